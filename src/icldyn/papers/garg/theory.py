"""Closed forms of the baseline zoo on Garg et al.'s linear regression (arXiv 2208.01066 §3): x ~ N(0, I_d),
w ~ N(0, I_d), y = wᵀx, the error at the query after k examples divided by E y² = d.

- Minimum-norm least squares projects w onto the span of k Gaussian directions, uniform and independent of w:
  E‖(I − P_k) w‖² = (d − k)₊, so the normalised error is (1 − k/d)₊ (zero from k = d on: Figure 2's corner).
- Averaging, ŵ = (1/k) Σ y_j x_j: E ŵ = w and Cov ŵ = (‖w‖² I + w wᵀ)/k (Gaussian fourth moments), so
  E‖ŵ − w‖² = d(d + 1)/k: normalised (d + 1)/k.
- One step of GD from 0 with step η, ŵ = η · (1/k) Σ y_j x_j: error d(1 − η)² + η² d(d + 1)/k, minimised at
  η* = k/(k + d + 1): normalised (d + 1)/(k + d + 1) — the best a one-layer linear attention can do here.
"""

from __future__ import annotations

import numpy as np


def least_squares_error(k: np.ndarray, d: int) -> np.ndarray:
    return np.clip(1.0 - np.asarray(k, float) / d, 0.0, None)


def averaging_error(k: np.ndarray, d: int) -> np.ndarray:
    k = np.asarray(k, float)
    return np.where(k > 0, (d + 1) / np.maximum(k, 1), 1.0)


def one_step_gd_error(k: np.ndarray, d: int) -> np.ndarray:
    return (d + 1) / (np.asarray(k, float) + d + 1)


def ridge_error(k: np.ndarray, d: int, lam: float, *, draws: int = 20_000, seed: int = 0) -> np.ndarray:
    """Ridge regression's normalised error on noiseless prompts, ŵ = (XᵀX + λI)⁻¹Xᵀy: ŵ − w = −λ(XᵀX + λI)⁻¹w, so
    E‖ŵ − w‖²/d = (λ²/d) E Σᵢ (eᵢ + λ)⁻² over W = XᵀX's d eigenvalues (the d − k zero ones give 1 each), by Monte
    Carlo over ``draws`` Wishart draws. The scale of "on least squares' curve" at a CPU size (λ → 0 is least
    squares' (1 − k/d)₊)."""
    rng = np.random.default_rng([seed, 13])
    out = np.empty(len(np.atleast_1d(k)))
    for i, kk in enumerate(np.atleast_1d(k)):
        if kk == 0:
            out[i] = 1.0
            continue
        ev = np.linalg.svd(rng.standard_normal((draws, int(kk), d)), compute_uv=False) ** 2
        out[i] = (np.sum(lam**2 / (ev + lam) ** 2, axis=1).mean() + max(d - int(kk), 0)) / d
    return out
