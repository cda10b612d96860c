"""Typed results of the Huang et al. recipes (summary.json; read by the claims and figures)."""

from __future__ import annotations

from typing import Any

from icldyn.recipe import Point, Result, Seed, Typed


class Phases(Typed):
    """Phase boundaries of one feature (theory.balanced_phases / underrepresented_phases); None: not reached."""

    phase_I_end: int | None
    phase_II_end: int | None = None
    phase_III_end: int | None = None
    initial_ratio: float | None = None
    ordered: bool | None = None


class Feature(Typed):
    role: str  # balanced, dominant or under-represented
    final_attn: float
    final_L: float
    converged_at: int | None
    phases: Phases


class EpsilonTime(Typed):
    """theory.epsilon_times: at the first step with L − L* ≤ ε."""

    eps: float
    t: int
    A: float  # A_k(T_ε)
    A_over_log: float  # A_k / log(K/ε) (Stage II: O(log(K/ε)))
    q99_miss_over_sqrt_eps: float  # 99th percentile over prompts of 1 − Attn_k, over ε^½


class HuangSeed(Seed):
    final_loss: float
    t_half: int | None  # first step with mean E[Attn_k] ≥ ½
    features: dict[str, Feature]  # tracked features k (from 0)
    epsilon_times: list[EpsilonTime] | None = None  # balanced only


class HuangPoint(Point):
    method: str
    oracle: str
    K: int
    N: int
    p: list[float]
    imbalanced: bool
    exact_counts: bool
    unavoidable_loss: float  # L_low
    optimal_loss: float | None = None  # L* = inf L (theory.optimal_loss)
    seeds: list[HuangSeed]
    wall_s: float
    final_loss: float
    final_attn_min: float


class Tracking(Typed):
    max_rel_gap: float
    median_z: float
    max_z: float
    seeds: int


class HuangResult(Result):
    points: list[HuangPoint]
    tracking: dict[str, Tracking] | None = None  # Monte-Carlo GD against the exact engine ("A", "loss")
    speed_ratio: float | None = None
    ood: list[dict[str, Any]] | None = None
    t_half: dict[int, float | None] | None = None  # phase scaling: K → t_½
    exponent: float | None = None
    exponent_ci: list[float] | None = None
    bound_exponent: float | None = None
    exact_gd: Tracking | None = None  # the sampled-counts engine's A_k − B_k against exact balanced GD (any N)
