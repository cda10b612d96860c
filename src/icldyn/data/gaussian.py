"""Gaussian in-context linear-regression prompts (Ahn et al. 2023, §2; SPEC §3.1).

.. math::
    x^{(i)} \\sim N(0, Σ),\\quad w^* \\sim N(0, Ω_w),\\quad y^{(i)} = ⟨w^*, x^{(i)}⟩ + σ ε_i,
    \\qquad Z_0 = \\begin{bmatrix} x^{(1)} & \\cdots & x^{(n)} & x^{(n+1)} \\\\
                                   y^{(1)} & \\cdots & y^{(n)} & 0 \\end{bmatrix}

with Ω_w = I_d (Theorem 1) or Ω_w = Σ⁻¹ (Theorems 3-4 and the paper's experiments).

References:
    Ahn, Cheng, Daneshmand, Sra, https://arxiv.org/abs/2306.00297, §2 and the official code.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.config import DataConfig

OFFICIAL_SQRT_EIGS = (1.0, 1.0, 0.5, 0.25, 1.0)  # D in x = U D g (official code); Σ = U D² Uᵀ


class GaussianTask(NamedTuple):
    """The law of one seed's prompts; a pytree, so seeds can be stacked and vmapped."""

    sigma: jax.Array  # (d, d) Σ
    sigma_sqrt: jax.Array  # (d, d) Σ^{1/2} (symmetric)
    w_sqrt: jax.Array  # (d, d) Ω_w^{1/2}: w = w_sqrt @ g, g ~ N(0, I)
    noise_std: jax.Array  # () σ


class Prompts(NamedTuple):
    """A batch of prompts in row convention (the official code's): x rows, labels incl. the query's."""

    X: jax.Array  # (b, n+1, d)
    y: jax.Array  # (b, n+1); y[:, n] is the query's target, zeroed in the prompt matrix


def random_rotation(d: int, seed: int) -> np.ndarray:
    """Left singular vectors of a d×d Uniform(−1, 1) matrix (the official code's rotation)."""
    rng = np.random.default_rng(seed)
    U, _, _ = np.linalg.svd(rng.uniform(-1.0, 1.0, (d, d)))
    return U


def covariance_eigenvalues(cfg: DataConfig) -> np.ndarray:
    if cfg.covariance == "identity":
        return np.ones(cfg.d)
    if cfg.covariance == "eigenvalues":
        return np.asarray(cfg.eigenvalues, dtype=np.float64)
    if cfg.covariance == "condition":
        return np.geomspace(1.0, 1.0 / cfg.condition_number, cfg.d)
    return np.square(OFFICIAL_SQRT_EIGS)  # official: {1, 1, 1/4, 1/16, 1}


def make_covariance(cfg: DataConfig, seed: int) -> np.ndarray:
    """Σ = U diag(λ) Uᵀ with a rotation U drawn from ``seed`` (identity needs none), float64."""
    lam = covariance_eigenvalues(cfg)
    if cfg.covariance == "identity":
        return np.diag(lam)
    U = random_rotation(cfg.d, seed)
    return (U * lam) @ U.T


def sym_sqrt(S: np.ndarray, power: float = 0.5) -> np.ndarray:
    """S^power for a symmetric positive-definite S."""
    lam, U = np.linalg.eigh(S)
    return (U * lam**power) @ U.T


def make_task(cfg: DataConfig, seed: int) -> GaussianTask:
    sigma = make_covariance(cfg, seed)
    w_sqrt = np.eye(cfg.d) if cfg.w_prior == "identity" else sym_sqrt(sigma, -0.5)
    return GaussianTask(sigma, sym_sqrt(sigma), w_sqrt, np.asarray(cfg.noise_std))


def w_covariance(task: GaussianTask) -> np.ndarray:
    """Ω_w = E[w wᵀ]."""
    W = np.asarray(task.w_sqrt)
    return W @ W.T


def sample_prompts(task: GaussianTask, *, key: jax.Array, batch: int, n: int) -> Prompts:
    """``batch`` prompts of n context examples and one query, each with its own task vector w."""
    kx, kw, ke = jax.random.split(key, 3)
    dtype = task.sigma.dtype
    d = task.sigma.shape[0]
    X = jax.random.normal(kx, (batch, n + 1, d), dtype) @ task.sigma_sqrt  # (b, n+1, d)
    w = jax.random.normal(kw, (batch, d), dtype) @ task.w_sqrt.T  # (b, d)
    y = jnp.einsum("bid,bd->bi", X, w) + task.noise_std * jax.random.normal(ke, (batch, n + 1), dtype)
    return Prompts(X, y)


def prompt_matrix(p: Prompts) -> jax.Array:
    """Z_0 ∈ R^{(d+1)×(n+1)} per prompt, query label zeroed: shape (b, d+1, n+1)."""
    y_ctx = p.y.at[:, -1].set(0.0)
    return jnp.concatenate([jnp.swapaxes(p.X, 1, 2), y_ctx[:, None, :]], axis=1)
