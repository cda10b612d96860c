"""Closed forms for Ahn, Cheng, Daneshmand, Sra (2023), float64 NumPy/SciPy. Theorem 1's one-layer optimum and the
L-step baselines (GD, preconditioned GD, OLS) are shared components (:mod:`icldyn.components.baselines`), re-exported
here.

Notation (SPEC §3): x ~ N(0, Σ), w* ~ N(0, Ω_w), y = ⟨w*, x⟩ + σε, n context examples,
Ŝ = (1/n) Σ_{i≤n} x_i x_iᵀ, h = (1/n) Σ_{i≤n} y_i x_i. Losses carry no ½ (official code).

References:
    Ahn, Cheng, Daneshmand, Sra, "Transformers learn to implement preconditioned gradient
    descent for in-context learning", https://arxiv.org/abs/2306.00297 (NeurIPS 2023).
"""

from __future__ import annotations

from icldyn.components.baselines import (  # noqa: F401  (Theorem 1's optimum and the baselines: shared components)
    baselines,
    context_stats,
    mse,
    ols,
    one_layer_loss,
    optimal_loss,
    optimal_preconditioner,
    pgd_from_stats,
    preconditioned_gd,
    tune_step,
)
from icldyn.components.metrics import dist_to_identity  # noqa: F401
from icldyn.runtime import float64_module


def relu_attention_optimum(d: int, n: int) -> tuple[float, float]:
    """Theorem 5 (one layer of ReLU attention, x ~ N(0, I_d), w* ~ N(0, I_d), no noise): the global minimiser has
    b₁A = c*·I (and b₀ = 0, the key reading no label), here in closed form,

    .. math:: c^* = \\frac{2n}{n + 2d + 3},\\qquad f^* = \\frac{d\\,(2d + 3)}{n + 2d + 3}.

    Derivation (the proof's Stein step): for ŷ = (c/n) Σ_i y_i σ(x_iᵀx_q) the loss is E‖v − x_q‖² over w*, with
    v = (c/n) Σ_i x_i σ(x_iᵀx_q). Since E[σ′] = ½, E[x σ(xᵀu)] = u/2; by the symmetry x ↦ −x,
    E[(xᵀu) σ(xᵀu)] = ‖u‖²/2 and E[‖x‖²σ(xᵀu)²] = E[‖x‖²(xᵀu)²]/2. So
    f(c) = c² d (n + 2d + 3)/(4n) − c d + d. Linear attention's Theorem 1 optimum is n/(n + d + 1) and
    d(d + 1)/(n + d + 1): a ReLU zeroes half the scores, so the step doubles and the loss is higher.
    In this library's sign convention (Q = −[[A, 0], [0, 0]]) the minimiser is A = c*·I with b₁ = P[d, d] = 1.
    """
    c = 2 * n / (n + 2 * d + 3)
    return c, relu_attention_loss(c, d, n)


def relu_attention_loss(c: float, d: int, n: int) -> float:
    """Theorem 5's setting at b₁A = c·I: f(c) = c² d (n + 2d + 3)/(4n) − c d + d (see
    :func:`relu_attention_optimum`)."""
    return c**2 * d * (n + 2 * d + 3) / (4 * n) - c * d + d


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
