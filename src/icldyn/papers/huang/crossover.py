"""Recipes that cross the papers: Huang et al.'s one-layer softmax attention trained on Ahn et al.'s
Gaussian in-context regression prompts, held against Theorem 1's optimal one-layer *linear* attention
and tuned one-step GD / preconditioned GD on the same prompts."""

from __future__ import annotations

import time
from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.config import RunConfig, with_overrides
from icldyn.papers.ahn import theory
from icldyn.papers.ahn.data import Prompts, make_task, sample_prompts, w_covariance
from icldyn.papers.ahn.figures import loss_curves
from icldyn.papers.ahn.setup import TEST_KEY, VAL_KEY, held_out
from icldyn.papers.huang.data import FeaturePrompts
from icldyn.papers.huang.model import SoftmaxICL
from icldyn.recipe import Experiment, Job, Point, Reporter, Result, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.loop import Problem
from icldyn.train.optimizers import build_optimizer


def as_query_batch(p: Prompts) -> FeaturePrompts:
    """Ahn's prompt (n examples + a query, row convention) as the softmax model's context and query."""
    return FeaturePrompts(p.X[:, :-1], p.y[:, :-1], p.X[:, -1], p.y[:, -1], jnp.zeros(p.X.shape[0], jnp.int32))


def jobs(cfg: RunConfig, rd: RunDir) -> Iterator[Job]:
    """One job per grid point: the softmax model on the seeds' Gaussian prompts, summarised beside Theorem 1's
    linear-attention optimum and tuned one-step GD / PGD on the same held-out prompts."""
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        d, n = pcfg.data.d, pcfg.data.n
        dtype = jnp.float64 if pcfg.train.dtype == "float64" else jnp.float32
        model = SoftmaxICL(d, pcfg.model.train_value)
        seeds = list(range(pcfg.seed, pcfg.seed + pcfg.seeds))
        tasks64 = [make_task(pcfg.data, s) for s in seeds]
        tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks64)
        tests_raw = [held_out(pcfg, t, s, TEST_KEY, dtype) for t, s in zip(tasks64, seeds)]
        tests = jax.tree.map(lambda *xs: jnp.stack(xs), *[as_query_batch(p) for p in tests_raw])
        keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])
        problem = Problem(
            init=lambda task, key: model.init(dtype),
            sample=lambda task, key, n=n, pcfg=pcfg: as_query_batch(sample_prompts(task, key=key,
                                                                                   batch=pcfg.train.batch, n=n)),
            loss=model.loss,
            evaluate=lambda params, task, test: {"test_loss": 2.0 * model.loss(params, test),  # Ahn: no ½
                                                 "norm_Q": jnp.linalg.norm(params["Q"])},
            seed_map="vmap")

        def summarise(trained, wall, label=label, pcfg=pcfg, seeds=seeds, tasks64=tasks64, tests_raw=tests_raw):
            [(params, hist)] = trained
            per_seed = []
            for i, (seed, task) in enumerate(zip(seeds, tasks64)):
                Xt, yt = (np.asarray(a, np.float64) for a in tests_raw[i])
                Xv, yv = (np.asarray(a, np.float64) for a in held_out(pcfg, task, seed, VAL_KEY, jnp.float64))
                ref = theory.baselines(Xv, yv, Xt, yt, task.sigma, 1)
                G = theory.optimal_preconditioner(task.sigma, pcfg.data.n, w_covariance(task), pcfg.data.noise_std)
                ref["linear_optimum"] = theory.one_layer_loss(G, task.sigma, pcfg.data.n, w_covariance(task),
                                                              pcfg.data.noise_std)
                ref["predict_zero"] = float(np.mean(yt[:, -1] ** 2))
                per_seed.append({"seed": seed, "test_loss": float(hist.metrics[-1]["test_loss"][i]),
                                 "status": "diverged" if i in hist.diverged_at else "finished", "theory": ref})
            losses = [s["test_loss"] for s in per_seed]
            point = {"point": label, "n": pcfg.data.n, "seeds": per_seed, "test_loss": float(np.mean(losses)),
                     "test_loss_std": float(np.std(losses))}
            for k in per_seed[0]["theory"]:
                point[k] = float(np.mean([s["theory"][k] for s in per_seed]))
            return [point]

        yield Job(pcfg, [(0, label, seeds)], problem, build_optimizer(pcfg.train), tasks, tests, keys, summarise)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Result:
    t0 = time.time()
    [(points, rows)] = run_jobs([rd], reporter, jobs(cfg, rd))
    points = [Point.model_validate(p) for p in points]
    keys = ("linear_optimum", "gd", "pgd", "predict_zero")
    table = {"columns": ["point", "softmax attention test loss (mean ± sd)", "Thm 1 linear-attention optimum",
                         "1-step GD (tuned)", "1-step PGD (tuned)", "predict 0"],
             "rows": [[p.point or "—", f"{p.test_loss:.4g} ± {p.test_loss_std:.2g}",
                       *(f"{getattr(p, k):.4g}" for k in keys)] for p in points]}
    return Result(points=points, wall_s=time.time() - t0, table=table,
                  status="finished" if all(s.status == "finished" for p in points for s in p.seeds) else "diverged",
                  figures=[loss_curves(cfg, points, rows, rd)],
                  report_lines=["Losses are E[(ŷ − y)²] (Ahn's convention, no ½) on the same held-out prompts; "
                                "the softmax model is ŷ = Σ_i y_i softmax_i(x_iᵀQx_q) (Huang et al.), trained from "
                                "Q = 0.", ""])


RECIPES: list[Experiment] = []  # this module's recipes, in `icldyn list` order
RECIPES.append(Experiment(
    "softmax-gaussian-prompts", "ahn+huang",
    "Huang's one-layer softmax attention on Ahn's Gaussian prompts vs Thm 1's linear-attention optimum and tuned GD",
    run,
    defaults={"seeds": 3, "data": {"kind": "prompts", "d": 5, "n": 20, "covariance": "eigenvalues",
                                   "eigenvalues": [2.0, 1.0, 0.5, 0.25, 0.1], "w_prior": "identity",
                                   "test_size": 20_000},
              "model": {"kind": "softmax_icl"},
              "train": {"optimizer": "adam", "lr": 0.01, "schedule": "cosine", "clip": 1.0, "steps": 3000,
                        "batch": 2000, "log_every": 100}},
    quick={"seeds": 2, "train": {"steps": 1000, "batch": 1000}},
))
