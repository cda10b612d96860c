"""Closed forms of Raventós, Paul, Chen, Ganguli (2023), float64 NumPy: the two Bayes estimators a model trained on a
finite pool of M tasks is held against.

A pool T_M = {w_1, …, w_M}, w_m ~ N(0, I_d), drawn once; a prompt draws w uniformly from T_M (pretraining) or from
N(0, I_d) (the true prior, evaluation); y_i = ⟨w, x_i⟩ + σε_i. Given the n context pairs:

.. math::
    \\text{dMMSE:}\\quad \\hat w = \\sum_{m=1}^M \\mathrm{softmax}_m\\Big(−\\frac{1}{2σ^2}\\sum_{i=1}^n
    (y_i − w_m^⊤x_i)^2\\Big)\\, w_m
    \\qquad\\text{(the posterior mean under the uniform prior on } T_M\\text{)}

.. math::
    \\text{ridge:}\\quad \\hat w = (X^⊤X + σ^2 I_d)^{-1} X^⊤ y
    \\qquad\\text{(the posterior mean under } w \\sim N(0, I_d)\\text{)}

Both predict ŷ = ⟨ŵ, x_{n+1}⟩; each is Bayes-optimal under its own prior.

References:
    Raventós, Paul, Chen, Ganguli, "Pretraining task diversity and the emergence of non-Bayesian in-context
    learning for regression", arXiv 2306.15063 (NeurIPS 2023), §2 (eqs. for dMMSE and ridge), Fig. 2.
"""

from __future__ import annotations

import numpy as np

from icldyn.components import baselines, bayes
from icldyn.runtime import float64_module


def dmmse_weights(X: np.ndarray, y: np.ndarray, pool: np.ndarray, noise_std: float, chunk: int = 256) -> np.ndarray:
    """ŵ (b, d) of the discrete posterior mean over ``pool`` (M, d) from each prompt's n context pairs (X: (b, n+1, d)
    rows with the query last, y: (b, n+1)): the posterior over the pool
    (:func:`icldyn.components.bayes.finite_pool_weights`, the one definition), times the pool."""
    return bayes.finite_pool_weights(X[:, :-1], y[:, :-1], pool, noise_std, chunk) @ np.asarray(pool, np.float64)


def dmmse(X: np.ndarray, y: np.ndarray, pool: np.ndarray, noise_std: float) -> np.ndarray:
    """dMMSE's predictions at the queries (b,)."""
    return np.einsum("bd,bd->b", dmmse_weights(X, y, pool, noise_std), X[:, -1])


def ridge(X: np.ndarray, y: np.ndarray, noise_std: float) -> np.ndarray:
    """The posterior mean under w ~ N(0, I_d): ridge with λ = σ² (:func:`~icldyn.components.baselines.ridge`)."""
    return baselines.ridge(X, y, noise_std**2)


def transition(log2_m: np.ndarray, to_dmmse: np.ndarray, to_ridge: np.ndarray) -> float | None:
    """log₂ M* where the model's distance to dMMSE first exceeds its distance to ridge: the crossing of
    log SPD(model, dMMSE) − log SPD(model, ridge) through 0, linear in log₂ M between the grid points around it
    (None if the sign never changes from − to +)."""
    gap = np.log(to_dmmse) - np.log(to_ridge)
    for i in range(len(gap) - 1):
        if gap[i] < 0 <= gap[i + 1]:
            return float(log2_m[i] + (log2_m[i + 1] - log2_m[i]) * -gap[i] / (gap[i + 1] - gap[i]))
    return None


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
