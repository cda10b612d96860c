"""Feature-token prompts, the data law ``data.kind = "features"`` (arXiv 2310.05249 §2).

K orthonormal features v_1…v_K ∈ R^d (d ≥ K); every token x_i (i ≤ N) and the query x_q is v_k with
probability p_k; w ~ N(0, I_d); y_i = ⟨w, x_i⟩. Balanced: p_k = 1/K; imbalanced: p_1 given, the others
equal. The feature counts c ~ Multinomial(N, p) are all a prompt's tokens contribute to the loss.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field, model_validator

from icldyn.components import draws
from icldyn.config import DataSection, PositiveList


class FeaturesData(DataSection):
    """n tokens and a query drawn from K orthonormal features v_k with probabilities p_k, w ~ N(0, I_d)."""

    kind: Literal["features"] = Field("features", description="n tokens and a query from K orthonormal features v_k "
                                      "with probabilities p_k, w ~ N(0, I_d)")
    features: int = Field(4, ge=1, le=256, description="number of orthonormal features K (≤ d)")
    feature_basis: Literal["standard", "random"] = Field(
        "standard", description="v_k = e_k, or the first K columns of a seeded random orthogonal matrix")
    p_dominant: float | None = Field(
        None, gt=0.0, lt=1.0, description="imbalanced law p_1 = p_dominant, p_k = (1 − p_1)/(K − 1) (Thm 3.2); "
        "unset: balanced p_k = 1/K (Thm 3.1)")
    feature_probs: PositiveList = Field(
        None, description="explicit p_1…p_K (positive, summing to 1); overrides p_dominant")


    @model_validator(mode="after")
    def _shapes(self) -> FeaturesData:
        if self.features > self.d:
            raise ValueError(f"data.features = {self.features} exceeds data.d = {self.d}: K orthonormal features "
                             "need K ≤ d")
        if self.feature_probs is not None:
            if len(self.feature_probs) != self.features:
                raise ValueError(f"data.feature_probs has {len(self.feature_probs)} entries but data.features = "
                                 f"{self.features}")
            if abs(sum(self.feature_probs) - 1.0) > 1e-9:
                raise ValueError(f"data.feature_probs must sum to 1, got {sum(self.feature_probs):.6g}")
        return self


class FeatureTask(NamedTuple):
    V: jax.Array  # (d, K) orthonormal columns v_k
    p: jax.Array  # (K,) feature probabilities


class FeaturePrompts(NamedTuple):
    X: jax.Array  # (b, N, d) context tokens
    y: jax.Array  # (b, N) their labels
    xq: jax.Array  # (b, d) query token
    yq: jax.Array  # (b,) its target ⟨w, x_q⟩
    k: jax.Array  # (b,) the query's feature index


def feature_probs(cfg: FeaturesData) -> np.ndarray:
    K = cfg.features
    if cfg.feature_probs is not None:
        return np.asarray(cfg.feature_probs, np.float64)
    if cfg.p_dominant is None or K == 1:
        return np.full(K, 1.0 / K)
    return np.concatenate([[cfg.p_dominant], np.full(K - 1, (1.0 - cfg.p_dominant) / (K - 1))])


def make_feature_task(cfg: FeaturesData, seed: int) -> FeatureTask:
    """V: the standard basis e_1…e_K, or the first K columns of a seeded random orthogonal matrix."""
    if cfg.feature_basis == "standard":
        V = np.eye(cfg.d)[:, : cfg.features]
    else:
        V, _ = np.linalg.qr(np.random.default_rng([seed, 2]).standard_normal((cfg.d, cfg.features)))
    return FeatureTask(V, feature_probs(cfg))


def sample_feature_prompts(task: FeatureTask, key: jax.Array, batch: int, n: int,
                           w_law: str = "gaussian") -> FeaturePrompts:
    """``batch`` prompts of n context tokens and a query. ``w_law`` draws the task vector: gaussian
    (training, N(0, I_d)), or unseen laws for out-of-distribution tests: rademacher and sphere (E[wwᵀ] = I
    too), anisotropic (N(0, diag(2, …, 2, 0, …, 0)): E[wwᵀ] ≠ I), shifted (N(1, I): E[w] ≠ 0)."""
    kt, kq, kw = jax.random.split(key, 3)
    d, K = task.V.shape
    dtype = task.V.dtype
    logits = jnp.log(task.p)
    idx = jax.random.categorical(kt, logits, shape=(batch, n))
    k = jax.random.categorical(kq, logits, shape=(batch,))
    X, xq = task.V.T[idx], task.V.T[k]
    w = draws.normal(kw, (batch, d), dtype)
    if w_law == "rademacher":
        w = jnp.sign(w)
    elif w_law == "sphere":
        w = w / jnp.linalg.norm(w, axis=-1, keepdims=True) * jnp.sqrt(d)
    elif w_law == "anisotropic":
        w = w * jnp.sqrt(jnp.where(jnp.arange(d) < (d + 1) // 2, 2.0, 0.0)).astype(dtype)
    elif w_law == "shifted":
        w = w + 1.0
    elif w_law != "gaussian":
        raise ValueError(f"unknown w_law {w_law!r}")
    return FeaturePrompts(X, jnp.einsum("bnd,bd->bn", X, w), xq, jnp.einsum("bd,bd->b", xq, w), k)


def w_second_moment(w_law: str, d: int) -> np.ndarray:
    """E[wwᵀ] of each task law of :func:`sample_feature_prompts`."""
    if w_law in ("gaussian", "rademacher", "sphere"):
        return np.eye(d)
    if w_law == "anisotropic":
        return np.diag(np.where(np.arange(d) < (d + 1) // 2, 2.0, 0.0))
    if w_law == "shifted":
        return np.eye(d) + np.ones((d, d))
    raise ValueError(f"unknown w_law {w_law!r}")


W_LAWS = ("gaussian", "rademacher", "sphere", "anisotropic", "shifted")
