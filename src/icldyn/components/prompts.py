"""Gaussian in-context linear-regression prompts: the data law ``data.kind = "prompts"`` and the Gaussian
covariates every Gaussian law shares (arXiv 2306.00297 §2 and the official LinearTransformer code).

.. math::
    x^{(i)} \\sim N(0, Σ),\\quad w^* \\sim N(0, Ω_w),\\quad y^{(i)} = ⟨w^*, x^{(i)}⟩ + σ ε_i,
    \\qquad Z_0 = \\begin{bmatrix} x^{(1)} & \\cdots & x^{(n)} & x^{(n+1)} \\\\
                                   y^{(1)} & \\cdots & y^{(n)} & 0 \\end{bmatrix}

with Ω_w = I_d (Theorem 1 of arXiv 2306.00297) or Ω_w = Σ⁻¹ (its Theorems 3-4 and experiments). Held-out prompts
follow one key convention (:data:`TEST_KEY`, :data:`VAL_KEY`, :func:`held_out`): the official code's test and
validation seeds, folded into each seed's key.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field, model_validator

from icldyn.config import DataSection, PositiveList


class GaussianCovariates(DataSection):
    """Covariates x ~ N(0, Σ) and label noise: the fields of every Gaussian law (the prompts here, the
    fixed-regression law of :mod:`icldyn.components.regression`)."""

    covariance: Literal["identity", "eigenvalues", "condition", "official"] = Field(
        "identity",
        description="Σ: identity; `eigenvalues` (with a seeded random rotation); `condition` "
        "(eigenvalues geometric from 1 to 1/condition_number, rotated); `official` "
        "(the official code's eigenvalues {1, 1, 1/4, 1/16, 1}, d = 5, new rotation per seed)",
    )
    eigenvalues: PositiveList = Field(None, description="eigenvalues of Σ (covariance = eigenvalues)")
    condition_number: float = Field(16.0, ge=1.0, description="κ(Σ) for covariance = condition")
    noise_std: float = Field(0.0, ge=0.0, description="label noise σ: y = wᵀx + σ ε (regression: Ω = σ² I_p)")


    @model_validator(mode="after")
    def _covariance(self) -> GaussianCovariates:
        if self.covariance == "eigenvalues":
            if self.eigenvalues is None:
                raise ValueError("covariance = 'eigenvalues' needs data.eigenvalues (a list of d positive floats)")
            if len(self.eigenvalues) != self.d:
                raise ValueError(f"data.eigenvalues has {len(self.eigenvalues)} entries but data.d = {self.d}")
        if self.covariance == "official" and self.d != 5:
            raise ValueError(f"data.covariance = 'official' is defined for d = 5 only, got data.d = {self.d}")
        if self.eigenvalues is not None and self.covariance != "eigenvalues":
            raise ValueError(f"data.eigenvalues applies to data.covariance = 'eigenvalues' only, not "
                             f"{self.covariance!r}")
        if self.condition_number != 16.0 and self.covariance != "condition":
            raise ValueError(f"data.condition_number applies to data.covariance = 'condition' only, not "
                             f"{self.covariance!r}")
        return self


class PromptsData(GaussianCovariates):
    """A fresh task w ~ N(0, Ω_w) per prompt, n examples and a query (arXiv 2306.00297 §2)."""

    kind: Literal["prompts"] = Field("prompts", description="a fresh task w ~ N(0, Ω_w) per prompt, n examples + a "
                                     "query")
    w_prior: Literal["identity", "inverse_covariance"] = Field(
        "inverse_covariance",
        description="task prior: w ~ N(0, I_d) (Thm 1) or w ~ N(0, Σ⁻¹) (Thms 3-4, the paper's experiments)",
    )
    test_size: int = Field(20_000, ge=1, description="prompts in the fixed held-out test set of each seed")
    sampler: Literal["auto", "jax", "kernel"] = Field(
        "auto",
        description="training prompts of the linear transformer, the same draws either way (Philox4x32-10, "
        "Box–Muller): kernel (C, CPU: drawn straight into moments for the moment forms, into prompt matrices for the "
        "column forms); jax (its jax.numpy twin, any backend); auto: "
        "kernel when the model runs the kernel forward",
    )


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


def covariance_eigenvalues(cfg: GaussianCovariates) -> np.ndarray:
    if cfg.covariance == "identity":
        return np.ones(cfg.d)
    if cfg.covariance == "eigenvalues":
        return np.asarray(cfg.eigenvalues, dtype=np.float64)
    if cfg.covariance == "condition":
        return np.geomspace(1.0, 1.0 / cfg.condition_number, cfg.d)
    return np.square(OFFICIAL_SQRT_EIGS)  # official: {1, 1, 1/4, 1/16, 1}


def make_covariance(cfg: GaussianCovariates, seed: int) -> np.ndarray:
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


def make_task(cfg: PromptsData, seed: int) -> GaussianTask:
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


# ---------------------------------------------------------------- Philox4x32-10 prompts (kernel's twin)

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _mulhilo(a: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """(high, low) 32-bit halves of the 64-bit product a·m for uint32 ``a`` and a constant ``m``, in
    uint32 arithmetic only (no x64 needed): a 16-bit schoolbook split."""
    u = lambda v: jnp.uint32(v)  # noqa: E731
    a_lo, a_hi, m_lo, m_hi = a & u(0xFFFF), a >> u(16), u(m & 0xFFFF), u(m >> 16)
    t = a_lo * m_lo
    m1 = a_hi * m_lo + (t >> u(16))
    m2 = a_lo * m_hi + (m1 & u(0xFFFF))
    return a_hi * m_hi + (m1 >> u(16)) + (m2 >> u(16)), a * u(m)


def philox4x32(counter: tuple[jax.Array, ...], key: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, ...]:
    """Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11) on broadcast uint32 counter words (c0, c1, c2, c3)
    and key (k0, k1); the same rounds as the C kernel's ``philox_block``."""
    c0, c1, c2, c3 = (jnp.asarray(c, jnp.uint32) for c in counter)
    k0, k1 = (jnp.asarray(k, jnp.uint32) for k in key)
    for _ in range(10):
        hi0, lo0 = _mulhilo(c0, _PHILOX_M[0])
        hi1, lo1 = _mulhilo(c2, _PHILOX_M[1])
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = k0 + jnp.uint32(_PHILOX_W[0]), k1 + jnp.uint32(_PHILOX_W[1])
    return c0, c1, c2, c3


def _box_muller(a: jax.Array, b: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    """Two normals from two uint32 words (their top 24 bits): u₁ ∈ (0, 1], u₂ ∈ [0, 1) (as the kernel)."""
    scale = jnp.asarray(5.9604644775390625e-08, dtype)  # 2⁻²⁴
    u1 = ((a >> jnp.uint32(8)).astype(jnp.int32).astype(dtype) + 1) * scale
    u2 = (b >> jnp.uint32(8)).astype(jnp.int32).astype(dtype) * scale
    r, th = jnp.sqrt(-2 * jnp.log(u1)), jnp.asarray(6.283185307179586, dtype) * u2
    return r * jnp.cos(th), r * jnp.cos(th - jnp.asarray(1.5707963267948966, dtype))


def philox_normals(bits: jax.Array, batch: int, count: int, dtype) -> jax.Array:
    """(batch, count) standard normals: prompt b's j-th group of four is Philox4x32-10 with key ``bits``
    (two uint32) at counter (j, b mod 2³², b div 2³², 0x1CD1), through Box–Muller — the C sampler's stream."""
    groups = -(-count // 4)
    j = jnp.arange(groups, dtype=jnp.uint32)[None, :]
    b = jnp.arange(batch, dtype=jnp.uint32)[:, None]  # batch < 2³²: the high word is 0
    u = philox4x32((j, b, jnp.zeros_like(b), jnp.full_like(b, 0x1CD1)), (bits[0], bits[1]))
    g0, g1 = _box_muller(u[0], u[1], dtype)
    g2, g3 = _box_muller(u[2], u[3], dtype)
    return jnp.stack([g0, g1, g2, g3], axis=-1).reshape(batch, 4 * groups)[:, :count]


def sample_prompts_philox(task: GaussianTask, *, key: jax.Array, batch: int, n: int) -> Prompts:
    """The law of :func:`sample_prompts` drawn from the C sampler's stream (``kernel.sample_moments``): for the
    same key, the very same prompts on every path (kernel or pure JAX, CPU or GPU), to rounding. Per prompt the
    normals are w's d, then (x_i's d, ε_i) for i = 1…n+1."""
    dtype = task.sigma.dtype
    d = task.sigma.shape[0]
    bits = jax.random.bits(key, (2,), jnp.uint32)
    G = philox_normals(bits, batch, d + (n + 1) * (d + 1), dtype)
    w = G[:, :d] @ task.w_sqrt.T  # (b, d)
    ex = G[:, d:].reshape(batch, n + 1, d + 1)
    X = ex[..., :d] @ task.sigma_sqrt.T  # (b, n+1, d)
    y = jnp.einsum("bid,bd->bi", X, w) + task.noise_std * ex[..., d]
    return Prompts(X, y)


def prompt_matrix(p: Prompts) -> jax.Array:
    """Z_0 ∈ R^{(d+1)×(n+1)} per prompt, query label zeroed: shape (b, d+1, n+1)."""
    y_ctx = p.y.at[:, -1].set(0.0)
    return jnp.concatenate([jnp.swapaxes(p.X, 1, 2), y_ctx[:, None, :]], axis=1)


TEST_KEY, VAL_KEY = 99, 999  # the official code's test and validation seeds


def held_out_key(seed: int, which: int) -> jax.Array:
    """The key of a seed's fixed held-out set (``which``: :data:`TEST_KEY` or :data:`VAL_KEY`)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), which)


def held_out(cfg: PromptsData, task: GaussianTask, seed: int, which: int, dtype) -> Prompts:
    """A seed's fixed held-out prompts (``which``: TEST_KEY or VAL_KEY), ``cfg.test_size`` of them."""
    t = jax.tree.map(lambda a: jnp.asarray(a, dtype), task)
    return sample_prompts(t, key=held_out_key(seed, which), batch=cfg.test_size, n=cfg.n)
