"""The task-diversity recipe (arXiv 2306.15063 Fig. 2 at CPU size): one model trained per pool size M, its distance
to dMMSE and to ridge on true-prior prompts, and the transition M* between them. Every M of the grid trains in one
program (:mod:`icldyn.papers.raventos.problem`)."""

from __future__ import annotations

import numpy as np

from icldyn.components.official import QUICK_TRAIN
from icldyn.config import RunConfig, with_overrides
from icldyn.papers.raventos import problem, theory
from icldyn.papers.raventos.figures import diversity
from icldyn.papers.raventos.results import DiversityPoint, DiversityResult
from icldyn.recipe import Job, Recipe, Reporter, Rows, Table, Target, Trained, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.optimizers import build_optimizer


def _shape_key(c: RunConfig) -> str:
    dump = c.model_dump()
    dump["data"]["pool_size"] = None
    return repr(dump)


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def jobs(cfg: RunConfig):
    """One job per group of grid points that differ only in M (one program: the pool padded to the group's
    largest M)."""
    points = [(label, over, with_overrides(cfg, over)) for label, over in grid_points(cfg)]
    groups: dict[str, list] = {}
    for pt in points:
        groups.setdefault(_shape_key(pt[2]), []).append(pt)
    for group in groups.values():
        pcfgs = [c for _, _, c in group]
        setup = problem.build(pcfgs, max(c.data.pool_size for c in pcfgs))
        targets = [Target(0, label, list(range(c.seed, c.seed + c.seeds))) for label, _, c in group]

        def summarise(trained, wall, group=group, setup=setup):
            out, slot = [], 0
            for (label, over, c), (params, hist) in zip(group, trained):
                finals = [{k: float(v[i]) for k, v in hist.metrics[-1].items()} for i in range(c.seeds)]
                refs = setup.refs[slot:slot + c.seeds]
                slot += c.seeds
                ok = [i for i in range(c.seeds) if i not in hist.diverged_at]
                mean = lambda key, src=finals, ok=ok: _mean([src[i][key] for i in ok])
                out.append({"point": label, "grid": over, "pool_size": c.data.pool_size,
                            **{k: mean(k) for k in ("test_loss", "pool_loss", "spd_dmmse", "spd_ridge", "cos_dmmse",
                                                    "cos_ridge")},
                            **{k: mean(k, refs) for k in refs[0]},
                            "seeds": [{"final": f, "theory": r} for f, r in zip(finals, refs)]})
            return out

        yield Job(cfg=pcfgs[0], targets=targets, problem=setup.problem, opt=build_optimizer(pcfgs[0].train),
                  tasks=setup.tasks, tests=setup.tests, keys=setup.keys, summarise=summarise,
                  slot_lrs=[c.train.lr for c in pcfgs for _ in range(c.seeds)],
                  description=f"{cfg.experiment} ({len(group)} pool sizes)")


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    return run_jobs([rd], reporter, jobs(cfg))[0]


def combine(cfg: RunConfig, points: list[DiversityPoint], rows: Rows, out: RunDir | None) -> DiversityResult:
    pts = sorted(points, key=lambda p: p.pool_size)
    m_star = theory.transition(np.log2([p.pool_size for p in pts]), np.array([p.spd_dmmse for p in pts]),
                               np.array([p.spd_ridge for p in pts])) if len(pts) > 1 else None
    table = Table(columns=["M", "model loss (true / pool)", "SPD dMMSE", "SPD ridge", "cos dMMSE", "cos ridge",
                           "dMMSE loss (true / pool)", "ridge loss (true / pool)"],
                  rows=[[p.pool_size, f"{p.test_loss:.3g} / {p.pool_loss:.3g}", f"{p.spd_dmmse:.3g}",
                         f"{p.spd_ridge:.3g}", f"{p.cos_dmmse:.3f}", f"{p.cos_ridge:.3f}",
                         f"{p.dmmse_true_loss:.3g} / {p.dmmse_pool_loss:.3g}",
                         f"{p.ridge_true_loss:.3g} / {p.ridge_pool_loss:.3g}"] for p in pts])
    found = f"2^{m_star:.2f} ≈ {2**m_star:.1f}" if m_star is not None else "none in this grid"
    notes = [f"Transition M* (SPD to dMMSE = SPD to ridge, interpolated in log₂ M): {found}.",
             ("dMMSE: the posterior mean under the uniform prior on the pool; ridge (λ = σ²): the posterior mean "
              "under the true prior N(0, I_d) (arXiv 2306.15063 §2). SPD and cos on the first "
              f"{problem.REFERENCE_PROMPTS} held-out prompts of true-prior tasks; losses E[(ŷ − y)²] on "
              f"{cfg.data.test_size} prompts of each kind; docs/metrics.md.")]
    return DiversityResult(points=pts, figures=[diversity(cfg, pts, m_star, out)], table=table, report_lines=notes,
                           transition_log2_m=m_star)


DIVERSITY_DATA = {"kind": "task_pool", "d": 8, "n": 16, "noise_std": 0.5, "test_size": 2000}
RECIPES: list[Recipe] = [Recipe(
    name="raventos-diversity", paper="raventos",
    description="task diversity: one model per pool size M = 2¹ … 2¹⁰, its distance to dMMSE and to ridge, the "
    "transition M* (arXiv 2306.15063 Fig. 2 at CPU size)",
    runner=run, combine=combine, result=DiversityResult,
    defaults={"seeds": 2, "grid": {"data.pool_size": [2**k for k in range(1, 11)]}, "data": DIVERSITY_DATA,
              "model": {"kind": "pool_attention", "layers": 2, "parameterization": "full", "init_std": 1e-3},
              "train": {**QUICK_TRAIN, "steps": 3000, "batch": 500, "log_every": 250}},
    quick={"seeds": 1, "grid": {"data.pool_size": [2, 8, 64, 1024]}, "data": {"test_size": 1000},
           "train": {"steps": 800, "batch": 500, "log_every": 200}},
)]
RECIPES.append(Recipe(
    name="raventos-diversity-gpt", paper="raventos",
    description="task diversity with the GPT (Garg et al.'s tiny decoder, as Raventós et al.): its distance to dMMSE "
    "and to ridge per pool size M, the transition M*",
    runner=run, combine=combine, result=DiversityResult,
    # 256 held-out prompts: the agreement metrics run the GPT on 256 × (1 + 2d) prompts and a gradient per log step
    defaults={"seeds": 1, "grid": {"data.pool_size": [2**k for k in range(1, 11, 3)]},
              "data": {**DIVERSITY_DATA, "test_size": 256}, "model": {"kind": "pool_gpt", "size": "tiny"},
              "train": {"optimizer": "adam", "lr": 1e-3, "clip": 1.0, "schedule": "cosine", "steps": 5000,
                        "batch": 64, "log_every": 500}},
    quick={"grid": {"data.pool_size": [2, 1024]}, "data": {"test_size": 128},
           "train": {"steps": 200, "log_every": 100}},
))
