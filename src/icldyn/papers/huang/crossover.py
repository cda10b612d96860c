"""Recipes that cross the papers: Huang et al.'s one-layer softmax attention trained on Ahn et al.'s
Gaussian in-context regression prompts, held against Theorem 1's optimal one-layer *linear* attention
and tuned one-step GD / preconditioned GD on the same prompts."""

from __future__ import annotations

from typing import Iterator

import jax
import jax.numpy as jnp
import numpy as np

from icldyn import plots
from icldyn.components import baselines as theory
from icldyn.components.feature_attention import SoftmaxICL
from icldyn.components.features import FeaturePrompts
from icldyn.components.prompts import (
    TEST_KEY,
    VAL_KEY,
    Prompts,
    data_seeds,
    held_out,
    make_task,
    sample_prompts,
    w_covariance,
    w_law,
)
from icldyn.config import RunConfig, with_overrides
from icldyn.recipe import Job, Point, Recipe, Reporter, Result, Rows, Target, Trained, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.loop import Problem
from icldyn.train.optimizers import build_optimizer


def as_query_batch(p: Prompts) -> FeaturePrompts:
    """Ahn's prompt (n examples + a query, row convention) as the softmax model's context and query."""
    return FeaturePrompts(p.X[:, :-1], p.y[:, :-1], p.X[:, -1], p.y[:, -1], jnp.zeros(p.X.shape[0], jnp.int32))


def _subtitle(cfg: RunConfig) -> str:
    return (f"{plots.describe_gaussian(cfg.data)}, {cfg.seeds} seed{'s' if cfg.seeds > 1 else ''}, "
            f"{cfg.train.dtype}")


def jobs(cfg: RunConfig, rd: RunDir) -> Iterator[Job]:
    """One job per grid point: the softmax model on the seeds' Gaussian prompts, summarised beside Theorem 1's
    linear-attention optimum and tuned one-step GD / PGD on the same held-out prompts."""
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        d, n = pcfg.data.d, pcfg.data.n
        dtype = jnp.float64 if pcfg.train.dtype == "float64" else jnp.float32
        model = SoftmaxICL(d, pcfg.model.train_value)
        seeds = list(range(pcfg.seed, pcfg.seed + pcfg.seeds))
        dseeds = data_seeds(pcfg.data, seeds)  # the data's seeds (data.seed), the parameters' from the seeds
        tasks64 = [make_task(pcfg.data, s) for s in dseeds]
        tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks64)
        tests_raw = [held_out(pcfg.data, t, s, TEST_KEY, dtype) for t, s in zip(tasks64, dseeds)]
        tests = jax.tree.map(lambda *xs: jnp.stack(xs), *[as_query_batch(p) for p in tests_raw])
        key_of = lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 0)  # noqa: E731
        keys, init_keys = jnp.stack([key_of(s) for s in dseeds]), jnp.stack([key_of(s) for s in seeds])
        problem = Problem(
            init=lambda task, key: model.init(key, dtype),
            sample=lambda task, key, n=n, pcfg=pcfg: as_query_batch(sample_prompts(
                task, key=key, batch=pcfg.train.batch, n=n, law=w_law(pcfg.data))),
            loss=model.loss,
            evaluate=lambda params, task, test: {"test_loss": 2.0 * model.loss(params, test),  # Ahn: no ½
                                                 "norm_Q": jnp.linalg.norm(params["Q"])},
            seed_map="vmap")

        def summarise(trained, wall, label=label, pcfg=pcfg, seeds=dseeds, tasks64=tasks64, tests_raw=tests_raw):
            [(params, hist)] = trained
            per_seed = []
            for i, (seed, task) in enumerate(zip(seeds, tasks64)):
                Xt, yt = (np.asarray(a, np.float64) for a in tests_raw[i])
                Xv, yv = (np.asarray(a, np.float64) for a in held_out(pcfg.data, task, seed, VAL_KEY, jnp.float64))
                ref = theory.baselines(Xv, yv, Xt, yt, task.sigma, 1)
                G = theory.optimal_preconditioner(task.sigma, pcfg.data.n, w_covariance(task), pcfg.data.noise_std)
                ref["linear_optimum"] = theory.one_layer_loss(G, task.sigma, pcfg.data.n, w_covariance(task),
                                                              pcfg.data.noise_std)
                ref["predict_zero"] = float(np.mean(yt[:, -1] ** 2))
                per_seed.append({"test_loss": float(hist.metrics[-1]["test_loss"][i]), "theory": ref})
            losses = [s["test_loss"] for s in per_seed]
            point = {"point": label, "n": pcfg.data.n, "seeds": per_seed, "test_loss": float(np.mean(losses)),
                     "test_loss_std": float(np.std(losses))}
            for k in per_seed[0]["theory"]:
                point[k] = float(np.mean([s["theory"][k] for s in per_seed]))
            return [point]

        yield Job(cfg=pcfg, targets=[Target(0, label, seeds)], problem=problem, opt=build_optimizer(pcfg.train),
                  tasks=tasks, tests=tests, keys=keys, init_keys=init_keys, summarise=summarise)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    return run_jobs([rd], reporter, jobs(cfg, rd))[0]


def combine(cfg: RunConfig, points: list[Point], rows: Rows, out: RunDir | None) -> Result:
    keys = ("linear_optimum", "gd", "pgd", "predict_zero")
    table = {"columns": ["point", "softmax attention test loss (mean ± sd)", "Thm 1 linear-attention optimum",
                         "1-step GD (tuned)", "1-step PGD (tuned)", "predict 0"],
             "rows": [[p.point or "—", plots.mean_sd(p.test_loss, p.test_loss_std, len(p.seeds)),
                       *(f"{getattr(p, k):.4g}" for k in keys)] for p in points]}
    return Result(points=points, table=table,
                  figures=[plots.loss_curves(points, rows, out, f"{cfg.experiment}: test loss\n{_subtitle(cfg)}")],
                  report_lines=["Losses are E[(ŷ − y)²] (Ahn's convention, no ½) on the same held-out prompts; "
                                "the softmax model is ŷ = Σ_i y_i softmax_i(x_iᵀQx_q) (Huang et al.), trained from "
                                "Q = 0.", ""])


RECIPES: list[Recipe] = []  # this module's recipes, in `icldyn list` order
RECIPES.append(Recipe(
    name="softmax-gaussian-prompts", paper="huang",
    description="Huang's one-layer softmax attention on Ahn's Gaussian prompts vs Thm 1's linear-attention optimum "
    "and tuned GD", runner=run, combine=combine,
    defaults={"seeds": 3, "data": {"kind": "prompts", "d": 5, "n": 20, "covariance": "eigenvalues",
                                   "eigenvalues": [2.0, 1.0, 0.5, 0.25, 0.1], "w_prior": "identity",
                                   "test_size": 20_000},
              "model": {"kind": "softmax_icl"},
              "train": {"optimizer": "adam", "lr": 0.01, "schedule": "cosine", "clip": 1.0, "steps": 3000,
                        "batch": 2000, "log_every": 100}},
    quick={"seeds": 2, "train": {"steps": 1000, "batch": 1000}},
))
