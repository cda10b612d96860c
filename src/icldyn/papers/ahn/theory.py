"""Closed forms for Ahn, Cheng, Daneshmand, Sra (2023), float64 NumPy/SciPy. Theorem 1's one-layer optimum and the
L-step baselines (GD, preconditioned GD, OLS) are shared components (:mod:`icldyn.components.baselines`), re-exported
here.

Notation: x ~ N(0, Σ), w* ~ N(0, Ω_w), y = ⟨w*, x⟩ + σε, n context examples,
Ŝ = (1/n) Σ_{i≤n} x_i x_iᵀ, h = (1/n) Σ_{i≤n} y_i x_i. Losses carry no ½ (official code).

References:
    Ahn, Cheng, Daneshmand, Sra, "Transformers learn to implement preconditioned gradient
    descent for in-context learning", https://arxiv.org/abs/2306.00297 (NeurIPS 2023).
"""

from __future__ import annotations

import numpy as np

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


def gamma_errors(A: np.ndarray, sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None,
                 noise_std: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A trained one-layer preconditioner A (ŷ = hᵀA x_q) against Theorem 1's Γ* along Σ's eigen-directions u_i:
    (λ_i ascending, u_iᵀAu_i, u_iᵀΓ*u_i). The loss's curvature along u_iu_iᵀ is 2λ_i m_i, m_i = (n+1)/n λ_i² +
    tr(Σ)λ_i/n (w* ~ N(0, I)), so small-λ directions are far flatter and training reaches them last."""
    lam, U = np.linalg.eigh(sigma)
    G = optimal_preconditioner(sigma, n, w_cov, noise_std)
    return lam, np.einsum("ji,jk,ki->i", U, A, U), np.einsum("ji,jk,ki->i", U, G, U)


def wishart_trace_moments(d: int, n: int) -> np.ndarray:
    """E tr Ŝ^k, k = 0 … 4, for Ŝ = (1/n) Σ_{i≤n} x_i x_iᵀ, x ~ N(0, I_d) (W = nŜ ~ Wishart_d(n, I)):

    .. math:: E\\,\\mathrm{tr} W = nd,\\quad E\\,\\mathrm{tr} W^2 = nd(n + d + 1),\\quad
              E\\,\\mathrm{tr} W^3 = nd(n^2 + d^2 + 3nd + 3n + 3d + 4),
    .. math:: E\\,\\mathrm{tr} W^4 = nd(n^3 + d^3 + 6n^2d + 6nd^2 + 6n^2 + 6d^2 + 17nd + 21n + 21d + 20)

    (the genus expansion of Gaussian moments; checked against Monte Carlo in tests/test_theory_ahn.py)."""
    t = [d, n * d, n * d * (n + d + 1), n * d * (n * n + d * d + 3 * n * d + 3 * n + 3 * d + 4),
         n * d * (n**3 + d**3 + 6 * n * n * d + 6 * n * d * d + 6 * n * n + 6 * d * d + 17 * n * d + 21 * n + 21 * d
                  + 20)]
    return np.array([float(v) / n**k for k, v in enumerate(t)])


def two_step_loss(a: float, b: float, d: int, n: int) -> float:
    """Theorem 2's setting (arXiv:2306.00297; L = 2, sparse eq. 8, x ~ N(0, I_d), w* ~ N(0, I_d), no noise) with
    scalar steps A_0 = aI, A_1 = bI: by Lemma 1 w − w_2 = (I − bŜ)(I − aŜ)w, so

    .. math:: f(a, b) = E\\,\\mathrm{tr}[(I − aŜ)^2 (I − bŜ)^2] = Σ_k c_k(a, b)\\, E\\,\\mathrm{tr}\\,Ŝ^k,

    c_k the coefficients of the polynomial (1 − as)²(1 − bs)² (:func:`wishart_trace_moments`). Symmetric:
    f(a, b) = f(b, a), so the optimal steps are an unordered pair."""
    P = np.polynomial.polynomial
    c = P.polymul(P.polypow([1.0, -a], 2), P.polypow([1.0, -b], 2))
    return float(c @ wishart_trace_moments(d, n))


def two_step_optimum(d: int, n: int) -> tuple[float, float, float]:
    """The exact optimum of :func:`two_step_loss`: (smaller step, larger step, f*), by BFGS from both orders
    (d = 5, n = 20: {0.5154, 1.2496}, f* = 0.36124)."""
    from scipy import optimize

    res = min((optimize.minimize(lambda x: two_step_loss(x[0], x[1], d, n), x0, method="BFGS",
                                 options={"gtol": 1e-12}) for x0 in ((0.4, 1.2), (1.2, 0.4))), key=lambda r: r.fun)
    lo, hi = sorted(res.x)
    return float(lo), float(hi), float(res.fun)


def _h_moment(k: int, sigma: np.ndarray, w_cov: np.ndarray, noise_std: float) -> np.ndarray:
    """E[hhᵀ] = ((k+1)/k) ΣΩ_wΣ + (tr(Ω_wΣ) + σ²)/k · Σ for k examples of x ~ N(0, Σ)."""
    return (k + 1) / k * sigma @ w_cov @ sigma + (np.trace(w_cov @ sigma) + noise_std**2) / k * sigma


def shifted_optimum(k: int, sigma: np.ndarray, w_cov: np.ndarray | None = None,
                    noise_std: float = 0.0) -> tuple[np.ndarray, float]:
    """The best one-step preconditioner for a law at prompt length k and its loss, (G*, f(G*)): G* = Ω_wΣE[hhᵀ]⁺,
    Theorem 1's Γ* for that law (a pseudo-inverse, so that a singular Σ', e.g. a half subspace, is allowed: G* is
    then unique on Σ''s range, which is all the loss sees)."""
    w_cov = np.eye(sigma.shape[0]) if w_cov is None else w_cov
    G = w_cov @ sigma @ np.linalg.pinv(_h_moment(k, sigma, w_cov, noise_std))
    return G, shifted_loss(G, k, sigma, sigma, w_cov, noise_std)


def shifted_loss(G: np.ndarray, k: int, sigma_context: np.ndarray, sigma_query: np.ndarray | None = None,
                 w_cov: np.ndarray | None = None, noise_std: float = 0.0) -> float:
    """Exact in-context loss of the one-step predictor ŷ = x_qᵀ G h (the one-layer model of Theorem 1, ``G`` any
    preconditioner, e.g. Γ* of the training law) on a shifted test law: k context examples x_i ~ N(0, Σ_c), the
    query x_q ~ N(0, Σ_q), w* ~ N(0, Ω_w), y = ⟨w*, x⟩ + σε, h = (1/k) Σ_{i≤k} y_i x_i.

    .. math:: f = \\mathrm{tr}(Σ_q G\\,H_k G^⊤) − 2\\,\\mathrm{tr}(Σ_q G Σ_c Ω_w) + \\mathrm{tr}(Σ_q Ω_w) + σ^2,
              \\qquad H_k = E[hh^⊤] = \\tfrac{k+1}{k} Σ_c Ω_w Σ_c + \\tfrac{\\mathrm{tr}(Ω_w Σ_c) + σ^2}{k} Σ_c

    Derivation: ŷ − y_q = x_qᵀ(Gh − w*) − σε_q with x_q independent of (h, w*), so f = E[(Gh − w*)ᵀΣ_q(Gh − w*)] + σ²;
    E[h w*ᵀ] = E[Ŝ]Ω_w = Σ_cΩ_w (the noise is independent of x); and by Isserlis' theorem
    E[x xᵀΩ_w x xᵀ] = 2Σ_cΩ_wΣ_c + tr(Ω_wΣ_c)Σ_c for one example, Σ_cΩ_wΣ_c for two distinct ones, so
    E[hhᵀ] = (1/k²)[k(2Σ_cΩ_wΣ_c + tr(Ω_wΣ_c)Σ_c) + k(k − 1)Σ_cΩ_wΣ_c] + (σ²/k)Σ_c = H_k. At Σ_q = Σ_c = Σ and k = n
    it is :func:`one_layer_loss` (the proof of Theorem 1, arXiv 2306.00297); with Σ_c = Σ_q = Σ' it is the exact
    risk of a trained one-layer model under the covariance shifts of :mod:`icldyn.components.shifts` (skewed, half
    subspace, x or w scaled, label noise, longer prompts)."""
    sigma_query = sigma_context if sigma_query is None else sigma_query
    w_cov = np.eye(sigma_context.shape[0]) if w_cov is None else w_cov
    H = _h_moment(k, sigma_context, w_cov, noise_std)
    return float(np.trace(sigma_query @ G @ H @ G.T) - 2 * np.trace(sigma_query @ G @ sigma_context @ w_cov)
                 + np.trace(sigma_query @ w_cov) + noise_std**2)


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
