"""One-layer softmax attention on feature tokens or prompts (``model.kind = "softmax_icl"``; arXiv 2310.05249 §2).

W^{KQ} = [[Q, 0], [0, 0]], W^V = [[0, 0], [0, ν]], the query masked from keys and values, so

    ŷ_q = ν Σ_{i=1}^N y_i softmax_i(x_iᵀ Q x_q),

with ν = 1 fixed unless trained. Loss ½ E[(ŷ_q − y_q)²].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field

from icldyn.components.features import FeaturePrompts
from icldyn.components.softmax_regressor import SoftmaxRegressorTrain
from icldyn.config import ModelSection, Predict, RunConfig, Section


class SoftmaxICLTrain(Section):
    oracle: Literal["sampled", "population", "counts"] = SoftmaxRegressorTrain.model_fields["oracle"]
    count_samples: int = Field(
        20_000, ge=100, description="oracle = population or counts: the Monte-Carlo count vectors (common random "
        "numbers) the population loss and the logged metrics use when exact enumeration of the multinomial counts "
        "would exceed 200 000 vectors")


class SoftmaxICLModel(ModelSection):
    """One-layer softmax attention, the query masked; on feature tokens, or on Gaussian prompts."""

    kind: Literal["softmax_icl"] = Field("softmax_icl", description="one-layer softmax attention ŷ = ν Σ_i y_i "
                                         "softmax_i(x_iᵀQx_q), query masked")
    data_kinds = ("features", "prompts")
    train_fields = SoftmaxICLTrain
    train_value: bool = Field(False, description="train the value weight ν (the paper fixes ν = 1)")

    def check(self, cfg: RunConfig) -> None:
        if cfg.data.kind == "prompts":
            if cfg.train.oracle != "sampled":
                raise ValueError(f"train.oracle = {cfg.train.oracle!r} needs data.kind = 'features' (Gaussian prompts "
                                 "have no population engine here); allowed with prompts: 'sampled'")
            if cfg.data.sampler != "auto":
                raise ValueError(f"data.sampler = {cfg.data.sampler!r} applies to model.kind = 'linear_attention' "
                                 "only, not 'softmax_icl'; remove it")

    def predictor(self, cfg: RunConfig) -> Predict:
        """ŷ_q = ν Σ_{i≤k} y_i softmax_i(x_iᵀQx_q) on prompts of any context length k (tokens as rows of X)."""
        model = SoftmaxICL(cfg.data.d, self.train_value)
        return lambda params, p: model.predict(params, p.X[:, :-1], p.y[:, :-1], p.X[:, -1])


@dataclass(frozen=True)
class SoftmaxICL:
    d: int
    train_value: bool = False

    def init(self, key: jax.Array | None = None, dtype=jnp.float32) -> dict[str, jax.Array]:
        """Q⁽⁰⁾ = 0 (the paper's initialisation); ν = 1. ``key`` is unused (every model's ``init(key, dtype)``)."""
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
