"""The algorithm-trajectory recipe: the L-layer linear transformer on an anisotropic Σ, its squared prediction
difference (and ILWD, sensitivity cosine and difference) against GD, preconditioned GD with Σ⁻¹ and OLS at every log
step, on the core's runner skeleton (:func:`icldyn.recipe.run_jobs`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import agreement
from icldyn.components.official import QUICK_TRAIN
from icldyn.config import RunConfig, with_overrides
from icldyn.papers.akyurek import problem
from icldyn.papers.akyurek.figures import trajectory
from icldyn.papers.akyurek.results import TrajectoryPoint, TrajectoryResult
from icldyn.recipe import Job, Recipe, Reporter, Rows, Table, Target, Trained, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.optimizers import build_optimizer


def unpreconditioned(params: dict, sigma_sqrt: jax.Array, d: int) -> dict:
    """The control: every d×d covariate block of the attention's key–query weights (``A`` of the sparse and relaxed
    forms, the x-block of ``Q`` of the full form) mapped A_ℓ → Σ^½ A_ℓ Σ^½. A model that runs preconditioned GD with
    A_ℓ = a_ℓ Σ⁻¹ becomes plain GD with A_ℓ = a_ℓ I, the same steps (arXiv 2306.00297 Lemma 1): the trained model
    with its preconditioning removed."""
    out = dict(params)
    key = "A" if "A" in params else "Q"
    M = params[key]
    out[key] = M.at[..., :d, :d].set(sigma_sqrt @ M[..., :d, :d] @ sigma_sqrt)
    return out


def _mean(values: list[dict[str, float]]) -> dict[str, float]:
    return {k: float(np.mean([v[k] for v in values])) for k in values[0]} if values else {}


def jobs(cfg: RunConfig):
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        setup = problem.build(pcfg)
        dtype = jnp.dtype(pcfg.train.dtype)
        lrn = problem.learner(pcfg, dtype)

        def summarise(trained, wall, label=label, over=over, pcfg=pcfg, setup=setup, lrn=lrn):
            [(params, hist)] = trained
            finals = [{k: float(v[i]) for k, v in hist.metrics[-1].items()} for i in range(len(setup.seeds))]
            controls = None
            if pcfg.model.kind == "linear_attention":  # the control: the trained model, preconditioning removed
                plain = jax.vmap(lambda p, s: unpreconditioned(p, s, pcfg.data.d))(params, setup.tasks.sigma_sqrt)
                ctrl = jax.jit(jax.vmap(lambda p, r: agreement.agreement(lambda x: lrn.predict(p, x), r)))(
                    plain, setup.tests[1])
                controls = [{k: float(v[i]) for k, v in ctrl.items()} for i in range(len(setup.seeds))]
            ok = [i for i in range(len(setup.seeds)) if i not in hist.diverged_at]
            m = pcfg.model
            return [{"point": label, "grid": over, "model": m.kind, "layers": problem.depth(pcfg),
                     "parameterization": getattr(m, "parameterization", None), "algorithms": list(setup.algorithms),
                     "test_loss": float(np.mean([finals[i]["test_loss"] for i in ok])) if ok else np.nan,
                     "final_mean": _mean([finals[i] for i in ok]),
                     "control_mean": _mean([controls[i] for i in ok]) if controls else None,
                     "seeds": [{"final": f, "control": controls[i] if controls else None}
                               for i, f in enumerate(finals)]}]

        yield Job(cfg=pcfg, targets=[Target(0, label, setup.seeds)], problem=setup.problem,
                  opt=build_optimizer(pcfg.train), tasks=setup.tasks, tests=setup.tests, keys=setup.keys,
                  summarise=summarise, description=label or cfg.experiment)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    return run_jobs([rd], reporter, jobs(cfg))[0]


def combine(cfg: RunConfig, points: list[TrajectoryPoint], rows: Rows, out: RunDir | None) -> TrajectoryResult:
    algs = points[0].algorithms
    table = Table(columns=["point", "test loss", *(f"SPD {a}" for a in algs), *(f"cos {a}" for a in algs),
                           "SPD pgd / SPD gd", "control: SPD pgd / SPD gd"],
                  rows=[[p.point or "—", f"{p.test_loss:.4g}", *(f"{p.final_mean[f'spd_{a}']:.3g}" for a in algs),
                         *(f"{p.final_mean[f'cos_{a}']:.4f}" for a in algs),
                         f"{p.final_mean['spd_pgd'] / p.final_mean['spd_gd']:.3g}",
                         f"{p.control_mean['spd_pgd'] / p.control_mean['spd_gd']:.3g}" if p.control_mean else "—"]
                        for p in points])
    notes = [("SPD(f, g) = E(f − g)² at the query, ILWD = E‖ŵ_f − ŵ_g‖² (the model's implicit weights fitted on 2d probe "
             "queries per context; arXiv 2211.15661 §4.1), cos = E cos(∂f/∂x_q, ∂g/∂x_q) (arXiv 2212.07677 §3), on "
             f"the first {problem.REFERENCE_PROMPTS} held-out prompts of each seed; docs/metrics.md."),
             ("gd / pgd: L steps of GD with A_ℓ = η_ℓ I / preconditioned GD with A_ℓ = η_ℓ Σ⁻¹ (Theorem 3 of arXiv "
             "2306.00297: the sparse model's critical point), each η_ℓ tuned on a validation set; gd1 / pgd1: one "
             "tuned step; ols: least squares. The control is the trained model with every A_ℓ mapped to Σ^½A_ℓΣ^½ "
             "(its preconditioning removed: preconditioned GD with a_ℓΣ⁻¹ becomes GD with a_ℓI).")]
    return TrajectoryResult(points=points, figures=[trajectory(cfg, points, rows, out)], table=table,
                            report_lines=notes)


TRAJECTORY_DATA = {"kind": "prompts", "d": 5, "n": 20, "covariance": "official", "w_prior": "inverse_covariance",
                   "test_size": 5000}
RECIPES: list[Recipe] = [Recipe(
    name="akyurek-trajectory", paper="akyurek",
    description="the L-layer linear transformer on anisotropic Σ over training: SPD, ILWD and sensitivity against "
    "GD, preconditioned GD with Σ⁻¹ and OLS; it settles on preconditioned GD (arXiv 2306.00297's prediction)",
    runner=run, combine=combine, result=TrajectoryResult,
    defaults={"seeds": 3, "grid": {"model.parameterization": ["sparse", "relaxed", "full"]}, "data": TRAJECTORY_DATA,
              "model": {"kind": "linear_attention", "layers": 3, "init_std": 1e-3},
              "train": {**QUICK_TRAIN, "steps": 6000, "batch": 1000, "log_every": 200}},
    quick={"seeds": 1, "grid": {"model.parameterization": ["sparse"]}, "data": {"test_size": 1000},
           "train": {"steps": 1200, "batch": 500, "log_every": 200}},
)]
RECIPES.append(Recipe(
    name="akyurek-trajectory-gpt", paper="akyurek",
    description="the GPT (Garg et al.'s tiny decoder) on the same prompts: SPD, ILWD and sensitivity against GD, "
    "preconditioned GD with Σ⁻¹ and OLS over training — which algorithm does it settle on?",
    runner=run, combine=combine, result=TrajectoryResult,
    # 256 held-out prompts: the agreement metrics run the GPT on 256 × (1 + 2d) prompts and a gradient per log step
    defaults={"seeds": 2, "data": {**TRAJECTORY_DATA, "test_size": 256}, "model": {"kind": "gpt", "size": "tiny"},
              "train": {"optimizer": "adam", "lr": 1e-3, "clip": 1.0, "schedule": "cosine", "steps": 6000,
                        "batch": 64, "log_every": 500}},
    quick={"seeds": 1, "data": {"test_size": 128}, "train": {"steps": 200, "log_every": 100}},
))
