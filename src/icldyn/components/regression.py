"""Gaussian multi-output regression, the data law ``data.kind = "regression"`` (the setting of *Training dynamics
of softmax self-attention: fast global convergence via preconditioning*, §3).

.. math::
    x_i \\sim N(0, Σ) \\in R^d,\\quad y_i = M x_i + z_i,\\quad z_i \\sim N(0, σ^2 I_p),

with one fixed M ∈ R^{p×d} per seed; a prompt is n samples, each of which is both a query and a
key/value token. M is a seeded Gaussian matrix scaled to ‖MΣ^½‖_op = ``m_norm``, or has given
singular values of MΣ^½.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import numpy as np
from pydantic import Field, model_validator

from icldyn.components import draws
from icldyn.components.prompts import GaussianCovariates, make_covariance, sym_sqrt
from icldyn.config import PositiveList


class RegressionData(GaussianCovariates):
    """One fixed M ∈ R^{p×d} per seed, y = Mx + z; a prompt is n samples, each a query."""

    kind: Literal["regression"] = Field("regression", description="one fixed M per seed, y = Mx + z, a prompt is n "
                                        "samples, each a query")
    p: int = Field(4, ge=1, le=256, description="response dimension p (the paper assumes p ≥ d)")
    m_norm: float = Field(
        0.05, gt=0.0, description="M is a seeded Gaussian matrix scaled to ‖MΣ^½‖_op = m_norm (the paper assumes "
        "< 1/16)")
    m_singular_values: PositiveList = Field(
        None, description="the singular values of MΣ^½ (min(p, d) of them, seeded random singular vectors) instead "
        "of a scaled Gaussian M")


    @model_validator(mode="after")
    def _shapes(self) -> RegressionData:
        if self.p < self.d:
            raise ValueError(f"data.p = {self.p} < data.d = {self.d}: the regression law needs p ≥ d "
                             "(S and θ*(J) are defined for p ≥ d); allowed: data.p ≥ data.d")
        if self.m_singular_values is not None and len(self.m_singular_values) != min(self.p, self.d):
            raise ValueError(f"data.m_singular_values has {len(self.m_singular_values)} entries but "
                             f"min(data.p, data.d) = {min(self.p, self.d)}")
        return self


class RegressionTask(NamedTuple):
    """One seed's data law (a pytree, stackable over seeds)."""

    sigma: jax.Array  # (d, d) Σ
    sigma_sqrt: jax.Array  # (d, d) Σ^½
    M: jax.Array  # (p, d)
    noise_std: jax.Array  # () σ, Ω = σ² I_p


def make_M(cfg: RegressionData, sigma: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, 1])  # a stream apart from Σ's rotation
    s_half, s_mhalf = sym_sqrt(sigma), sym_sqrt(sigma, -0.5)
    if cfg.m_singular_values is not None:
        r = len(cfg.m_singular_values)
        U, _ = np.linalg.qr(rng.standard_normal((cfg.p, r)))
        V, _ = np.linalg.qr(rng.standard_normal((cfg.d, r)))
        return (U * np.asarray(cfg.m_singular_values)) @ V.T @ s_mhalf
    G = rng.standard_normal((cfg.p, cfg.d))
    return G * (cfg.m_norm / np.linalg.norm(G @ s_half, 2))


def make_regression_task(cfg: RegressionData, seed: int) -> RegressionTask:
    """Σ (``data.covariance``, rotation from ``seed``) and M, float64 NumPy."""
    sigma = make_covariance(cfg, seed)
    return RegressionTask(sigma, sym_sqrt(sigma), make_M(cfg, sigma, seed), np.asarray(cfg.noise_std))


def sample_regression(task: RegressionTask, key: jax.Array, batch: int, n: int, *,
                      noise: bool = True) -> tuple[jax.Array, jax.Array]:
    """``batch`` prompts of n samples: X (b, n, d), Y (b, n, p). ``noise=False`` returns E_z[Y] = XMᵀ:
    attention never sees z, so dropping it leaves E[∇L̂] unchanged and only removes variance."""
    kx, kz = jax.random.split(key)
    d, p = task.M.shape[1], task.M.shape[0]
    X = draws.normal(kx, (batch, n, d), task.sigma.dtype) @ task.sigma_sqrt
    Y = X @ task.M.T
    if noise:
        Y = Y + task.noise_std * draws.normal(kz, (batch, n, p), task.sigma.dtype)
    return X, Y
