"""arXiv 2208.01066's function classes as data laws (NeurIPS 2022, arXiv 2208.01066 §2 and Appendix A.2; their
``src/tasks.py``), with their curriculum (§3, Appendix A.3).

A prompt is (x₁, f(x₁), …, x_{n+1}, f(x_{n+1})) with x_i ~ N(0, I_d) i.i.d. and one f per prompt, drawn from:

=========================== ==================================================================================
``linear_regression``       f(x) = s · wᵀx, w ~ N(0, I_d)
``sparse_linear_regression`` w with ``sparsity`` non-zero N(0, 1) coordinates at a uniform random support
``noisy_linear_regression`` f(x) = wᵀx + σ ε, ε ~ N(0, 1)
``linear_classification``   f(x) = sign(wᵀx)
``quadratic_regression``    f(x) = s · w ᵀ(x ⊙ x) / √3
``relu_2nn_regression``     f(x) = s · √(2/H) · Σ_j v_j ReLU(u_jᵀx), u_j ~ N(0, I_d), v_j ~ N(0, 1), H hidden units
``decision_tree``           a full binary tree of depth 4, node i splitting on x[c_i] > 0, c_i uniform over the d
                            coordinates, N(0, 1) leaf values
=========================== ==================================================================================

The scalings put E f(x)² = d for the regression classes (linear, quadratic, ReLU networks; sparse: ``sparsity``; the
tree and classification: 1), which is how arXiv 2208.01066 normalise errors (squared error / d: Figure 2).

**Curriculum** (Appendix A.3): the active dimensions grow from ``dims_start`` by ``dims_inc`` and the prompt length
from ``points_start`` by ``points_inc`` every ``curriculum_every`` steps, up to d and n + 1. The prompts keep the full
shape (coordinates beyond the active ones are zero, as in arXiv 2208.01066's code), and the loss is taken over the first
``points`` positions only: with causal attention that is the loss of the shorter prompt, so one compiled program
serves every stage.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from pydantic import Field, model_validator

from icldyn.components import draws
from icldyn.components.prompts import Prompts
from icldyn.config import DataSection

CLASSES = ("linear_regression", "sparse_linear_regression", "noisy_linear_regression", "linear_classification",
           "quadratic_regression", "relu_2nn_regression", "decision_tree")


class FunctionClass(DataSection):
    """The fields every function class shares: x ~ N(0, I_d), the output scale, and the curriculum."""

    d: int = Field(20, ge=1, le=256, description="covariate dimension d (arXiv 2208.01066: n_dims = 20)")
    n: int = Field(40, ge=1, le=100_000, description="context examples n: a prompt has n + 1 points, each predicted "
                   "(arXiv 2208.01066: 41 points)")
    scale: float = Field(1.0, gt=0.0, description="s: the output scale (arXiv 2208.01066's `scale`)")
    dims_start: int | None = Field(None, ge=1, description="curriculum: active dimensions at step 0 "
                                   "(arXiv 2208.01066: 5); "
                                   "none = no dimension curriculum")
    dims_inc: int = Field(1, ge=1, description="curriculum: dimensions added per stage")
    points_start: int | None = Field(None, ge=1, description="curriculum: points per prompt at step 0 "
                                     "(arXiv 2208.01066: 11); "
                                     "none = no length curriculum")
    points_inc: int = Field(2, ge=1, description="curriculum: points added per stage")
    curriculum_every: int = Field(2000, ge=1, description="curriculum: steps per stage (arXiv 2208.01066: 2000)")
    test_size: int = Field(1000, ge=1, description="prompts in each seed's fixed held-out set (final stage)")
    per_prompt: int = Field(100, ge=2, description="held-out prompts the baselines fitted prompt by prompt "
                            "(scikit-learn's, a trained network) are evaluated on")

    @model_validator(mode="after")
    def _curriculum(self):
        if self.dims_start is not None and self.dims_start > self.d:
            raise ValueError(f"data.dims_start = {self.dims_start} exceeds data.d = {self.d}")
        if self.points_start is not None and self.points_start > self.n + 1:
            raise ValueError(f"data.points_start = {self.points_start} exceeds the n + 1 = {self.n + 1} points")
        return self


class LinearRegression(FunctionClass):
    """f(x) = s · wᵀx, w ~ N(0, I_d)."""

    kind: Literal["linear_regression"] = Field("linear_regression", description="f(x) = s wᵀx, w ~ N(0, I)")


class SparseLinearRegression(FunctionClass):
    """w with ``sparsity`` non-zero coordinates (uniform support among the active ones)."""

    kind: Literal["sparse_linear_regression"] = Field("sparse_linear_regression",
                                                      description="w with `sparsity` non-zeros, f(x) = s wᵀx")
    sparsity: int = Field(3, ge=1, description="non-zero coordinates of w (arXiv 2208.01066: 3)")

    @model_validator(mode="after")
    def _sparse(self):
        if self.sparsity > (self.dims_start or self.d):
            raise ValueError(f"data.sparsity = {self.sparsity} exceeds the active dimensions "
                             f"{self.dims_start or self.d}")
        return self


class NoisyLinearRegression(FunctionClass):
    """f(x) = wᵀx + σ ε."""

    kind: Literal["noisy_linear_regression"] = Field("noisy_linear_regression",
                                                     description="f(x) = s wᵀx + σ ε, ε ~ N(0, 1)")
    noise_std: float = Field(1.0, ge=0.0, description="label noise σ")


class LinearClassification(FunctionClass):
    """f(x) = sign(wᵀx)."""

    kind: Literal["linear_classification"] = Field("linear_classification", description="f(x) = sign(wᵀx)")


class QuadraticRegression(FunctionClass):
    """f(x) = s · wᵀ(x ⊙ x)/√3."""

    kind: Literal["quadratic_regression"] = Field("quadratic_regression", description="f(x) = s wᵀ(x⊙x)/√3")


class Relu2nnRegression(FunctionClass):
    """A random two-layer ReLU network."""

    kind: Literal["relu_2nn_regression"] = Field("relu_2nn_regression",
                                                 description="f(x) = s √(2/H) vᵀ ReLU(Ux), a random 2-layer network")
    hidden: int = Field(100, ge=1, le=4096, description="hidden units H (arXiv 2208.01066: 100)")


class DecisionTree(FunctionClass):
    """A random depth-``depth`` tree on the signs of the coordinates."""

    kind: Literal["decision_tree"] = Field("decision_tree", description="a random depth-4 tree on sign(x_c)")
    depth: int = Field(4, ge=1, le=12, description="tree depth (arXiv 2208.01066: 4)")


KINDS = (LinearRegression, SparseLinearRegression, NoisyLinearRegression, LinearClassification, QuadraticRegression,
         Relu2nnRegression, DecisionTree)


class Stage(NamedTuple):
    dims: jax.Array  # active dimensions (int32 scalar)
    points: jax.Array  # points per prompt (int32 scalar)


def stage(cfg: FunctionClass, step: jax.Array) -> Stage:
    """The curriculum's stage at ``step`` (arXiv 2208.01066's ``Curriculum``: start + inc · ⌊step / every⌋, capped)."""
    k = jnp.asarray(step, jnp.int32) // cfg.curriculum_every
    grow = lambda start, inc, end: end if start is None else jnp.minimum(start + inc * k, end)  # noqa: E731
    return Stage(jnp.asarray(grow(cfg.dims_start, cfg.dims_inc, cfg.d), jnp.int32),
                 jnp.asarray(grow(cfg.points_start, cfg.points_inc, cfg.n + 1), jnp.int32))


def sample(cfg: FunctionClass, key: jax.Array, batch: int, dims: jax.Array | int | None = None,
           dtype=jnp.float32) -> Prompts:
    """``batch`` prompts of n + 1 points of the class, coordinates ≥ ``dims`` (default d) set to zero."""
    d, m = cfg.d, cfg.n + 1
    dims = d if dims is None else dims
    kx, kf, ke = jax.random.split(key, 3)
    active = jnp.arange(d) < dims
    X = draws.normal(kx, (batch, m, d), dtype) * active
    return Prompts(X, _evaluate(cfg, kf, ke, X, active, dtype))


def _evaluate(cfg: FunctionClass, kf, ke, X, active, dtype) -> jax.Array:
    batch, _, d = X.shape
    kind = cfg.kind
    if kind in ("linear_regression", "sparse_linear_regression", "noisy_linear_regression", "linear_classification",
                "quadratic_regression"):
        kw, ks = jax.random.split(kf)
        w = draws.normal(kw, (batch, d), dtype)
        if kind == "sparse_linear_regression":  # the support: `sparsity` uniform coordinates among the active ones
            rank = jnp.argsort(jnp.where(active, draws.uniform(ks, (batch, d)), 2.0), axis=-1)
            w = w * (jnp.argsort(rank, axis=-1) < cfg.sparsity)
        if kind == "quadratic_regression":
            return cfg.scale * jnp.einsum("bmd,bd->bm", X * X, w) / 3.0**0.5
        y = jnp.einsum("bmd,bd->bm", X, w)
        if kind == "linear_classification":
            return jnp.sign(y)
        if kind == "noisy_linear_regression":
            return cfg.scale * y + cfg.noise_std * draws.normal(ke, y.shape, dtype)
        return cfg.scale * y
    if kind == "relu_2nn_regression":
        ku, kv = jax.random.split(kf)
        U = draws.normal(ku, (batch, d, cfg.hidden), dtype)
        v = draws.normal(kv, (batch, cfg.hidden), dtype)
        hidden = jax.nn.relu(jnp.einsum("bmd,bdh->bmh", X, U))
        return cfg.scale * (2.0 / cfg.hidden) ** 0.5 * jnp.einsum("bmh,bh->bm", hidden, v)
    if kind == "decision_tree":
        kc, kl = jax.random.split(kf)
        nodes = 2 ** (cfg.depth + 1) - 1
        coords = jax.random.randint(kc, (batch, nodes), 0, d)
        leaves = draws.normal(kl, (batch, nodes), dtype)
        node = jnp.zeros(X.shape[:2], jnp.int32)
        for _ in range(cfg.depth):
            c = jnp.take_along_axis(coords, node, axis=1)  # (batch, m)
            right = jnp.take_along_axis(X, c[..., None], axis=2)[..., 0] > 0
            node = 2 * node + 1 + right
        return jnp.take_along_axis(leaves, node, axis=1)
    raise ValueError(f"unknown function class {kind!r}; one of {', '.join(CLASSES)}")


def second_moment(cfg: FunctionClass) -> float:
    """E f(x)² at the final stage: the normaliser of the classes' errors (the squared error / d of arXiv 2208.01066
    for the regression classes) — d s² (linear, quadratic, ReLU networks), sparsity · s², d s² + σ² (noisy),
    1 (tree, classification)."""
    return {"sparse_linear_regression": cfg.scale**2 * getattr(cfg, "sparsity", 0),
            "noisy_linear_regression": cfg.scale**2 * cfg.d + getattr(cfg, "noise_std", 0.0) ** 2,
            "linear_classification": 1.0, "decision_tree": 1.0}.get(cfg.kind, cfg.scale**2 * cfg.d)
