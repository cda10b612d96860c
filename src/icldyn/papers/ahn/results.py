"""Typed results of the Ahn et al. recipes (summary.json's ``points``; read by the claims and figures)."""

from __future__ import annotations

from pydantic import BaseModel

from icldyn.recipe import Point, Result, Seed


class AhnSeed(Seed):
    final: dict[str, float]  # the last logged metrics (a diverged seed's from before it diverged)
    theory: dict[str, float]  # the seed's baselines (gd, pgd, ols) and, at L = 1, Theorem 1's optimum
    A: list | None = None  # the trained A_ℓ (L, d, d), B_ℓ, and Σ^½ (heat maps)
    B: list | None = None
    sigma_sqrt: list | None = None


class AhnPoint(Point):
    layers: int
    n: int
    parameterization: str
    activation: str | None = None  # model.activation (None: a result recorded before it was kept)
    seeds: list[AhnSeed]
    test_loss: float  # mean over finished seeds
    test_loss_std: float
    final_mean: dict[str, float]
    norms_increasing: bool  # ‖A₀‖ ≤ ‖A₁‖ ≤ … (Thm 4 figure)
    optimal_loss: float | None = None  # Theorem 1 (L = 1)
    optimal_test_loss: float | None = None  # Γ* on the same held-out prompts
    gd: float | None = None
    pgd: float | None = None
    ols: float | None = None


class AhnResult(Result):
    points: list[AhnPoint]


class ShiftCell(BaseModel):
    """One seed's one-layer model under one covariance shift at one prompt length k (``ahn-shift``)."""

    shift: str
    seed: int
    k: int
    measured: float  # the trained model's mean squared error on the shift's prompts (icldyn eval's rows)
    se: float  # its standard error
    exact: float  # theory.shifted_loss at the trained G = Aᵀ and the shifted law
    theorem1: float  # the same for Theorem 1's Γ* of the training law
    in_law: float  # the shifted law's own best one-layer loss (Γ* for Σ', Ω', σ' and k)


class AhnShiftResult(AhnResult):
    cells: list[ShiftCell]
    z_rms: float  # root mean square over cells of z = (measured − exact) / se
    z_max: float  # max over cells of |z|
