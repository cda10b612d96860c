"""Metrics of trained parameters shared by the models."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def dist_to_identity(M: np.ndarray) -> float:
    """The paper's scale-invariant distance Dist(M, I) = min_α ‖M − αI‖_F / ‖M‖_F
    = ‖M − (tr M/d) I‖_F / ‖M‖_F (arXiv 2306.00297 §5; the official code)."""
    d = M.shape[-1]
    return float(np.linalg.norm(M - np.trace(M) / d * np.eye(d)) / np.linalg.norm(M))


def dist_to_identity_batched(M: jax.Array) -> jax.Array:
    """:func:`dist_to_identity` in JAX, batched over leading axes (inside a trained program)."""
    d = M.shape[-1]
    off = M - jnp.trace(M, axis1=-2, axis2=-1)[..., None, None] / d * jnp.eye(d, dtype=M.dtype)
    return jnp.linalg.norm(off, axis=(-2, -1)) / jnp.linalg.norm(M, axis=(-2, -1))
