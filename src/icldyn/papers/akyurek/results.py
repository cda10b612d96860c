"""Typed results of the algorithm-trajectory recipe (summary.json's ``points``; read by the claims and figures)."""

from __future__ import annotations

from icldyn.recipe import Point, Result, Seed


class TrajectorySeed(Seed):
    final: dict[str, float]  # the last logged metrics: test_loss, spd_<alg>, ilwd_<alg>, cos_<alg>, sdiff_<alg>
    control: dict[str, float] | None = None  # the same metrics of the control (A_ℓ → Σ^½A_ℓΣ^½, recipes)


class TrajectoryPoint(Point):
    model: str  # model.kind
    layers: int
    parameterization: str | None = None
    algorithms: list[str]  # the reference algorithms (gd, pgd, gd1, pgd1, ols)
    test_loss: float  # final, mean over finished seeds
    final_mean: dict[str, float]  # the final metrics, mean over finished seeds
    control_mean: dict[str, float] | None = None
    seeds: list[TrajectorySeed]


class TrajectoryResult(Result):
    points: list[TrajectoryPoint]
