"""Closed forms and baselines for Ahn, Cheng, Daneshmand, Sra (2023), float64 NumPy/SciPy.

Notation (SPEC §3): x ~ N(0, Σ), w* ~ N(0, Ω_w), y = ⟨w*, x⟩ + σε, n context examples,
Ŝ = (1/n) Σ_{i≤n} x_i x_iᵀ, h = (1/n) Σ_{i≤n} y_i x_i. Losses carry no ½ (official code).

References:
    Ahn, Cheng, Daneshmand, Sra, "Transformers learn to implement preconditioned gradient
    descent for in-context learning", https://arxiv.org/abs/2306.00297 (NeurIPS 2023).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from icldyn.runtime import float64_module


def _moments_h(sigma: np.ndarray, n: int, w_cov: np.ndarray, noise_std: float) -> np.ndarray:
    """E[h hᵀ] = ((n+1)/n) Σ Ω_w Σ + (tr(Ω_w Σ) + σ²)/n · Σ  (Wishart fourth moment)."""
    return (n + 1) / n * sigma @ w_cov @ sigma + (np.trace(w_cov @ sigma) + noise_std**2) / n * sigma


def one_layer_loss(G: np.ndarray, sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None,
                   noise_std: float = 0.0) -> float:
    """Exact loss of the one-step predictor ŷ = x_{n+1}ᵀ G h (SPEC §3.4, Theorem 1 proof).

    .. math:: f(G) = \\mathrm{tr}(Σ G\\,E[hh^⊤] G^⊤) − 2\\,\\mathrm{tr}(Σ G Σ Ω_w) + \\mathrm{tr}(Σ Ω_w) + σ²

    A sparse one-layer transformer (eq. 8) with block A predicts with G = Aᵀ.
    """
    w_cov = np.eye(sigma.shape[0]) if w_cov is None else w_cov
    H = _moments_h(sigma, n, w_cov, noise_std)
    return float(np.trace(sigma @ G @ H @ G.T) - 2 * np.trace(sigma @ G @ sigma @ w_cov)
                 + np.trace(sigma @ w_cov) + noise_std**2)


def optimal_preconditioner(sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None,
                           noise_std: float = 0.0) -> np.ndarray:
    """Theorem 1: the one-layer optimum is one preconditioned GD step with

    .. math:: Γ^* = \\Big(\\frac{n+1}{n} Σ + \\frac{\\mathrm{tr}(Σ)}{n} I_d\\Big)^{-1}

    for w* ~ N(0, I_d). For a general prior Ω_w it is Ω_w Σ E[hhᵀ]⁻¹ (the minimiser of
    :func:`one_layer_loss`); for Ω_w = Σ⁻¹ this is n/(n+d+1) · Σ⁻¹ (SPEC §3.6).
    """
    if w_cov is None and noise_std == 0.0:
        d = sigma.shape[0]
        return np.linalg.inv((n + 1) / n * sigma + np.trace(sigma) / n * np.eye(d))
    w_cov = np.eye(sigma.shape[0]) if w_cov is None else w_cov
    return w_cov @ sigma @ np.linalg.inv(_moments_h(sigma, n, w_cov, noise_std))


def optimal_loss(sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None, noise_std: float = 0.0) -> float:
    """Theorem 1: in-context loss of the optimal one-layer transformer, f(Γ*).
    Isotropic case (Σ = I, w ~ N(0, I)): d(d+1)/(n+d+1)."""
    G = optimal_preconditioner(sigma, n, w_cov, noise_std)
    return one_layer_loss(G, sigma, n, w_cov, noise_std)


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


# ---------------------------------------------------------------- L-step baselines on prompts


def context_stats(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Ŝ, h, x_{n+1}) per prompt from **all n** context examples: Ŝ = (1/n)Σ x_i x_iᵀ, h = (1/n)Σ y_i x_i."""
    n = X.shape[1] - 1
    Xc = X[:, :n]
    return np.einsum("bip,biq->bpq", Xc, Xc) / n, np.einsum("bid,bi->bd", Xc, y[:, :n]) / n, X[:, n]


def pgd_from_stats(S: np.ndarray, h: np.ndarray, xq: np.ndarray, As: list[np.ndarray]) -> np.ndarray:
    w = np.zeros_like(h)
    for A in As:
        grad = np.einsum("bpq,bq->bp", S, w, optimize=False) - h  # ∇R(w) = Ŝw − h
        w = w - np.einsum("bq,qp->bp", grad, A, optimize=False)  # rows: (A_ℓᵀ ∇R)ᵀ = ∇Rᵀ A_ℓ
    return np.einsum("bd,bd->b", xq, w)


def preconditioned_gd(X: np.ndarray, y: np.ndarray, As: list[np.ndarray]) -> np.ndarray:
    """Lemma 1: the sparse (eq. 8) transformer computes ⟨w_L, x_{n+1}⟩ with w_0 = 0 and

    .. math:: w_{ℓ+1} = w_ℓ − A_ℓ^⊤ ∇R(w_ℓ),\\qquad R(w) = \\frac{1}{2n}\\sum_{i=1}^{n}(w^⊤x_i − y_i)^2

    over **all n** context examples. X: (b, n+1, d) rows incl. the query; y: (b, n+1) (the
    query's label is ignored). Returns the predictions (b,).
    """
    return pgd_from_stats(*context_stats(X, y), As)


def ols(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares on all n context examples (minimum-norm when n < d); predictions (b,)."""
    n = X.shape[1] - 1
    w = np.einsum("bdi,bi->bd", np.linalg.pinv(X[:, :n]), y[:, :n])
    return np.einsum("bd,bd->b", X[:, n], w)


def mse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.square(pred - y[:, -1])))


def tune_step(X: np.ndarray, y: np.ndarray, base: np.ndarray, steps: int) -> float:
    """Constant step η minimising the loss of ``steps`` steps of GD preconditioned by ``base``
    (A_ℓ = η·base) on the given (validation) prompts: log-grid search, then Brent refinement."""
    stats = context_stats(X, y)

    def loss(log_eta: float) -> float:
        val = mse(pgd_from_stats(*stats, [np.exp(log_eta) * base] * steps), y)
        return val if np.isfinite(val) else 1e300

    with np.errstate(over="ignore", invalid="ignore"):
        grid = np.linspace(np.log(1e-3), np.log(4.0), 30)
        best = int(np.argmin([loss(g) for g in grid]))
        lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
        res = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
    return float(np.exp(res.x))


def baselines(X_val: np.ndarray, y_val: np.ndarray, X: np.ndarray, y: np.ndarray, sigma: np.ndarray,
              steps: int) -> dict[str, float]:
    """Test losses of the paper's comparisons, step sizes tuned on the validation prompts:
    ``steps``-step GD (A = ηI), ``steps``-step preconditioned GD (A = ηΣ⁻¹), and OLS."""
    out: dict[str, float] = {}
    for name, base in (("gd", np.eye(sigma.shape[0])), ("pgd", np.linalg.inv(sigma))):
        eta = tune_step(X_val, y_val, base, steps)
        out[f"{name}_eta"] = eta
        out[name] = mse(preconditioned_gd(X, y, [eta * base] * steps), y)
    out["ols"] = mse(ols(X, y), y)
    return out


def dist_to_identity(M: np.ndarray) -> float:
    """The paper's scale-invariant distance Dist(M, I) = min_α ‖M − αI‖_F / ‖M‖_F
    = ‖M − (tr M/d) I‖_F / ‖M‖_F (official code; SPEC §3.5)."""
    d = M.shape[-1]
    return float(np.linalg.norm(M - np.trace(M) / d * np.eye(d)) / np.linalg.norm(M))


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

    .. math:: E\,\mathrm{tr} W = nd,\quad E\,\mathrm{tr} W^2 = nd(n + d + 1),\quad
              E\,\mathrm{tr} W^3 = nd(n^2 + d^2 + 3nd + 3n + 3d + 4),
    .. math:: E\,\mathrm{tr} W^4 = nd(n^3 + d^3 + 6n^2d + 6nd^2 + 6n^2 + 6d^2 + 17nd + 21n + 21d + 20)

    (the genus expansion of Gaussian moments; checked against Monte Carlo in tests/test_theory_ahn.py)."""
    t = [d, n * d, n * d * (n + d + 1), n * d * (n * n + d * d + 3 * n * d + 3 * n + 3 * d + 4),
         n * d * (n**3 + d**3 + 6 * n * n * d + 6 * n * d * d + 6 * n * n + 6 * d * d + 17 * n * d + 21 * n + 21 * d
                  + 20)]
    return np.array([float(v) / n**k for k, v in enumerate(t)])


def two_step_loss(a: float, b: float, d: int, n: int) -> float:
    """Theorem 2's setting (arXiv:2306.00297; L = 2, sparse eq. 8, x ~ N(0, I_d), w* ~ N(0, I_d), no noise) with
    scalar steps A_0 = aI, A_1 = bI: by Lemma 1 w − w_2 = (I − bŜ)(I − aŜ)w, so

    .. math:: f(a, b) = E\,\mathrm{tr}[(I − aŜ)^2 (I − bŜ)^2] = Σ_k c_k(a, b)\, E\,\mathrm{tr}\,Ŝ^k,

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


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
