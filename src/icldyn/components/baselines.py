"""In-context baselines on Gaussian prompts, float64 NumPy/SciPy: L steps of gradient descent and of preconditioned
GD with tuned steps, least squares, ridge, and the optimal one-step preconditioned GD (the best one-layer linear
attention, arXiv 2306.00297 Theorem 1) with its exact loss.

Notation: x ~ N(0, Σ), w* ~ N(0, Ω_w), y = ⟨w*, x⟩ + σε, n context examples, Ŝ = (1/n) Σ_{i≤n} x_i x_iᵀ,
h = (1/n) Σ_{i≤n} y_i x_i. Prompts in row convention: X (b, n+1, d) with the query last, y (b, n+1). Losses carry
no ½ (the official LinearTransformer code).
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
    """Exact loss of the one-step predictor ŷ = x_{n+1}ᵀ G h (arXiv 2306.00297, proof of Theorem 1).

    .. math:: f(G) = \\mathrm{tr}(Σ G\\,E[hh^⊤] G^⊤) − 2\\,\\mathrm{tr}(Σ G Σ Ω_w) + \\mathrm{tr}(Σ Ω_w) + σ²

    A sparse one-layer transformer (eq. 8) with block A predicts with G = Aᵀ.
    """
    w_cov = np.eye(sigma.shape[0]) if w_cov is None else w_cov
    H = _moments_h(sigma, n, w_cov, noise_std)
    return float(np.trace(sigma @ G @ H @ G.T) - 2 * np.trace(sigma @ G @ sigma @ w_cov)
                 + np.trace(sigma @ w_cov) + noise_std**2)


def optimal_preconditioner(sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None,
                           noise_std: float = 0.0) -> np.ndarray:
    """arXiv 2306.00297 Theorem 1: the one-layer optimum is one preconditioned GD step with

    .. math:: Γ^* = \\Big(\\frac{n+1}{n} Σ + \\frac{\\mathrm{tr}(Σ)}{n} I_d\\Big)^{-1}

    for w* ~ N(0, I_d). For a general prior Ω_w it is Ω_w Σ E[hhᵀ]⁻¹ (the minimiser of
    :func:`one_layer_loss`); for Ω_w = Σ⁻¹ this is n/(n+d+1) · Σ⁻¹.
    """
    if w_cov is None and noise_std == 0.0:
        d = sigma.shape[0]
        return np.linalg.inv((n + 1) / n * sigma + np.trace(sigma) / n * np.eye(d))
    w_cov = np.eye(sigma.shape[0]) if w_cov is None else w_cov
    return w_cov @ sigma @ np.linalg.inv(_moments_h(sigma, n, w_cov, noise_std))


def optimal_loss(sigma: np.ndarray, n: int, w_cov: np.ndarray | None = None, noise_std: float = 0.0) -> float:
    """arXiv 2306.00297 Theorem 1: in-context loss of the optimal one-layer transformer, f(Γ*).
    Isotropic case (Σ = I, w ~ N(0, I)): d(d+1)/(n+d+1)."""
    G = optimal_preconditioner(sigma, n, w_cov, noise_std)
    return one_layer_loss(G, sigma, n, w_cov, noise_std)


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


def ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """Ridge regression on all n context examples, ŵ = (XᵀX + λ I)⁻¹ Xᵀy (the posterior mean for w ~ N(0, τ² I)
    and noise σ² at λ = σ²/τ²); predictions (b,)."""
    n, d = X.shape[1] - 1, X.shape[2]
    Xc = X[:, :n]
    rhs = np.einsum("bid,bi->bd", Xc, y[:, :n])[..., None]  # (b, d, 1): NumPy ≥ 2 reads (b, d) as one matrix
    w = np.linalg.solve(np.einsum("bip,biq->bpq", Xc, Xc) + lam * np.eye(d), rhs)[..., 0]
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


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
