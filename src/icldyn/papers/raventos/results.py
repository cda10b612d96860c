"""Typed results of the task-diversity recipe (summary.json's ``points``; read by the claims and figures)."""

from __future__ import annotations

from icldyn.recipe import Point, Result, Seed


class DiversitySeed(Seed):
    final: dict[str, float]  # the last logged metrics: test_loss (true prior), pool_loss, spd_/ilwd_/cos_/sdiff_<alg>
    theory: dict[str, float]  # dMMSE's and ridge's losses on the seed's held-out sets (dmmse_pool_loss, …)


class DiversityPoint(Point):
    pool_size: int  # M
    test_loss: float  # true-prior tasks, mean over finished seeds
    pool_loss: float  # pool tasks
    spd_dmmse: float  # SPD(model, dMMSE) on true-prior prompts
    spd_ridge: float  # SPD(model, ridge)
    cos_dmmse: float
    cos_ridge: float
    dmmse_pool_loss: float
    ridge_pool_loss: float
    dmmse_true_loss: float
    ridge_true_loss: float
    seeds: list[DiversitySeed]


class DiversityResult(Result):
    points: list[DiversityPoint]
    transition_log2_m: float | None = None  # log₂ M* where SPD(model, dMMSE) = SPD(model, ridge)
