"""One-layer softmax attention for in-context regression (Huang, Cheng, Liang; SPEC §2.2).

W^{KQ} = [[Q, 0], [0, 0]], W^V = [[0, 0], [0, ν]], the query masked from keys and values, so

    ŷ_q = ν Σ_{i=1}^N y_i softmax_i(x_iᵀ Q x_q),

with ν = 1 fixed unless trained. Loss ½ E[(ŷ_q − y_q)²].
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from icldyn.papers.huang.data import FeaturePrompts


@dataclass(frozen=True)
class SoftmaxICL:
    d: int
    train_value: bool = False

    def init(self, dtype=jnp.float32) -> dict[str, jax.Array]:
        """Q⁽⁰⁾ = 0 (the paper's initialisation); ν = 1."""
        params = {"Q": jnp.zeros((self.d, self.d), dtype)}
        if self.train_value:
            params["nu"] = jnp.ones((), dtype)
        return params

    @staticmethod
    def nu(params) -> jax.Array:
        return params.get("nu", 1.0)

    def predict(self, params, X, y, xq) -> jax.Array:
        logits = jnp.einsum("bnd,de,be->bn", X, params["Q"], xq)  # key ᵀ Q query
        return self.nu(params) * jnp.sum(jax.nn.softmax(logits, axis=-1) * y, axis=-1)

    def loss(self, params, batch: FeaturePrompts) -> jax.Array:
        r = self.predict(params, batch.X, batch.y, batch.xq) - batch.yq
        return 0.5 * jnp.mean(r * r)
