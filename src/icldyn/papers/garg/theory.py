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
