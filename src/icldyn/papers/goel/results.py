"""Typed results of the Goel et al. recipes (summary.json; read by the claims and figures)."""

from __future__ import annotations

from typing import Any

from icldyn.recipe import Point, Result, Seed, Typed


class FittedRate(Typed):
    """A geometric rate fitted to a P-distance curve (theory.fit_rate)."""

    mu: float
    low: float
    high: float
    first: int
    last: int


class PredictedRate(Typed):
    """The linearisation of Algorithm 1 at its limit point (theory.local_rate)."""

    mu: float
    eta_best: float
    mu_best: float


class GoelSeed(Seed):
    initial_excess: float
    final_excess: float
    floor: float  # mean excess loss over the last quarter of the logged curve
    final_p_distance: float
    steps_to_target: int | None
    first_below_target: int | None
    rate: FittedRate | None
    predicted: PredictedRate | None


class GoelPoint(Point):
    method: str
    lr: float
    n: int
    kappa: float | None
    oracle: str
    seeds: list[GoelSeed]
    wall_s: float
    steps_to_target: int | None  # the slowest seed's
    mu: float | None
    mu_theory: float | None
    final_excess: float
    floor: float
    initial_excess: float
    final_p_distance: float
    tuned_best: bool | None = None  # the best learning rate of a tuned method (None: not tuned)
    assumptions: list[dict[str, Any]] = []  # per seed: the paper's assumption checks (theory.assumptions)


class GoelResult(Result):
    points: list[GoelPoint]
    target: float | None = None  # the excess loss the convergence recipes time
    assumptions: list[dict[str, Any]] = []  # per seed: the paper's assumption checks (theory.assumptions)
    warnings: list[str] = []
    # goel-convergence
    algorithm1_steps: int | None = None
    algorithm1_mu: float | None = None
    algorithm1_lr: float | None = None
    algorithm1_mu_theory: float | None = None
    algorithm1_mu_best: float | None = None
    algorithm1_eta_best: float | None = None
    adam_best: str | None = None
    adam_best_lr: float | None = None
    adam_first_below: int | None = None
    adam_steps: int | None = None
    speedup_lower_bound: bool | None = None
    speedup: float | None = None
    # goel-sample-size
    slope: float | None = None
    slope_ci: list[float] | None = None
    bound_slope: float | None = None
    floor_below_init: bool | None = None
    # goel-conditioning
    steps_by_kappa: dict[str, int | None] | None = None
