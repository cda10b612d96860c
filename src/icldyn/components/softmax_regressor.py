"""The softmax self-attention regressor (``model.kind = "softmax_regressor"``; *Training dynamics of softmax
self-attention: fast global convergence via preconditioning*, §3).

θ = (A ∈ R^{p×d}, B ∈ R^{d×d}). Over the n samples of a prompt (self included, no mask, no scaling),

    ŷ_i = A μ_i,   μ_i = Σ_j softmax_j(x_iᵀ B x_j) x_j,   L̂(θ) = (1/2n) Σ_i ‖ŷ_i − y_i‖²,

and R̂ is the balancing regulariser R (:func:`regulariser`) with the prompt's Σ̂ = (1/n) Σ_i x_i x_iᵀ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field

from icldyn.components import draws
from icldyn.config import ModelSection, Predict, RunConfig, Section


class SoftmaxRegressorTrain(Section):
    oracle: Literal["sampled", "population", "counts"] = Field(
        "sampled", description="gradients of the empirical loss on fresh prompts (sampled), or the exact gradient "
        "of the population loss (population: the closed-form population loss; the softmax_icl engine: an expectation "
        "over feature counts); counts (softmax_icl only): that expectation over train.batch fresh multinomial draws "
        "of the counts every step, the population gradient in expectation for N beyond exact enumeration")
    regularizer: float = Field(
        0.0, ge=0.0, description="weight of the balancing regulariser R̂ added to the loss (Algorithm 1: 1)")
    precondition: bool = Field(
        False, description="multiply the B-gradient by Σ̂⁻¹ of the initial sample, P̂⁻¹ = blockdiag(I_p, Σ̂⁻¹) "
        "(Algorithm 1)")


class SoftmaxRegressorModel(ModelSection):
    """ŷ_i = A Σ_j softmax_j(x_iᵀBx_j) x_j, A ∈ R^{p×d}, B ∈ R^{d×d}."""

    kind: Literal["softmax_regressor"] = Field("softmax_regressor", description="softmax self-attention regressor")
    data_kinds = ("regression",)
    train_fields = SoftmaxRegressorTrain
    init: Literal["random", "spectral"] = Field(
        "random", description="random: iid N(0, init_std²) entries; spectral: Algorithm 1's spectral "
        "initialisation from one sample of n (OLS M̂, Σ̂)")
    init_std: float = Field(1e-3, ge=0.0, description="std of the iid normal initialisation of every trained block")

    def check(self, cfg: RunConfig) -> None:
        if cfg.train.oracle == "counts":
            raise ValueError("train.oracle = 'counts' is the feature-token engine's (model.kind = 'softmax_icl'); "
                             "allowed here: 'sampled', 'population'")

    def predictor(self, cfg: RunConfig) -> Predict:
        """ŷ_q = A μ_q at the query (the last of the prompt's k + 1 samples, attending to all of them, itself
        included, as every sample does); it reads no label: ŷ (b, p), the shape of a p-output label."""
        model = SoftmaxRegressor(cfg.data.d, cfg.data.p)
        return lambda params, prompts: model.predict(params, prompts.X)[:, -1]


Params = dict[str, jax.Array]  # {"A": (p, d), "B": (d, d)}
GROUP_ELEMENTS = 320_000  # attention weights per group of prompts in the loss (a cache-sized block)


@dataclass(frozen=True)
class SoftmaxRegressor:
    d: int
    p: int
    init_std: float = 1e-3

    def init(self, key: jax.Array, dtype=jnp.float32) -> Params:
        """iid N(0, init_std²) entries (the small random initialisation)."""
        ka, kb = jax.random.split(key)
        return {"A": self.init_std * draws.normal(ka, (self.p, self.d), dtype),
                "B": self.init_std * draws.normal(kb, (self.d, self.d), dtype)}

    @staticmethod
    def attention(B: jax.Array, X: jax.Array) -> jax.Array:
        """μ_i = Σ_j softmax_j(x_iᵀBx_j) x_j for X of shape (..., n, d)."""
        logits = X @ B @ jnp.swapaxes(X, -1, -2)  # [i, j] = x_iᵀ B x_j: query on the left
        return jax.nn.softmax(logits, axis=-1) @ X

    def predict(self, params: Params, X: jax.Array) -> jax.Array:
        return self.attention(params["B"], X) @ params["A"].T

    def empirical_loss(self, params: Params, X: jax.Array, Y: jax.Array) -> jax.Array:
        """L̂ averaged over the prompts of a batch (b, n, ·): mean over prompts of (1/2n) Σ_i ‖ŷ_i − y_i‖².

        Prompts go through in groups whose n×n attention matrices fit in cache together (``lax.map``):
        on a CPU this is ≈ 3× faster than one (b, n, n) tensor at b = 48, n = 200 in float64."""
        def group_loss(xy):
            r = self.predict(params, xy[0]) - xy[1]
            return 0.5 * jnp.mean(jnp.sum(r * r, axis=-1))

        b, n = X.shape[0], X.shape[1]
        g = max(k for k in range(1, b + 1) if b % k == 0 and k * n * n <= GROUP_ELEMENTS or k == 1)
        groups = (X.reshape(b // g, g, *X.shape[1:]), Y.reshape(b // g, g, *Y.shape[1:]))
        return jnp.mean(jax.lax.map(group_loss, groups))

    def empirical_regulariser(self, params: Params, X: jax.Array) -> jax.Array:
        """R̂ with each prompt's own Σ̂, averaged over the batch."""
        sigma_hat = jnp.swapaxes(X, -1, -2) @ X / X.shape[-2]
        return jnp.mean(jax.vmap(lambda S: regulariser(params["A"], params["B"], S))(sigma_hat.reshape(-1, self.d,
                                                                                                      self.d)))


def regulariser(A, B, sigma) -> jax.Array:
    """The balancing regulariser R(θ) = ⅛‖Σ^½ D Σ^½‖²_F = ⅛ tr(DΣDΣ), D = AᵀA − BᵀΣB (Σ̂ in place of Σ gives R̂)."""
    D = A.T @ A - B.T @ sigma @ B
    DS = D @ sigma
    return 0.125 * jnp.sum(DS * DS.T)
