"""Gaussian in-context linear-regression prompts: the data law ``data.kind = "prompts"`` and the Gaussian
covariates every Gaussian law shares (arXiv 2306.00297 §2 and the official LinearTransformer code).

.. math::
    x^{(i)} \\sim N(0, Σ),\\quad w^* \\sim N(0, Ω_w),\\quad y^{(i)} = ⟨w^*, x^{(i)}⟩ + σ ε_i,
    \\qquad Z_0 = \\begin{bmatrix} x^{(1)} & \\cdots & x^{(n)} & x^{(n+1)} \\\\
                                   y^{(1)} & \\cdots & y^{(n)} & 0 \\end{bmatrix}

with Ω_w = I_d (Theorem 1 of arXiv 2306.00297), Ω_w = Σ⁻¹ (its Theorems 3-4 and experiments) or a given Ω_w, and
w = Ω_w^½ g with g Gaussian, Laplace or sparse (:class:`WLaw`). Held-out prompts
follow one key convention (:data:`TEST_KEY`, :data:`VAL_KEY`, :func:`held_out`): the official code's test and
validation seeds, folded into each seed's key.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from icldyn.components import draws
from icldyn.config import DataSection, PositiveList


def _read_matrix(v: Any) -> Any:
    """A matrix field given as a ``.npy`` path: read now, so the run's config.toml holds the matrix itself."""
    if not isinstance(v, str):
        return v
    try:
        a = np.load(v, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"file {v!r} does not exist") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"file {v!r} is not a readable .npy array ({str(err).splitlines()[0][:80]})") from None
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.number):
        raise ValueError(f"file {v!r} holds a {a.dtype} array of shape {a.shape}: must be a square matrix of floats")
    return a.astype(np.float64).tolist()


def _spd(v: list[list[float]] | None) -> list[list[float]] | None:
    """Symmetric positive definite (within float rounding), or one line saying how it is not."""
    if v is None:
        return v
    if len({len(r) for r in v}) != 1 or len(v) != len(v[0]):
        raise ValueError(f"must be a square matrix, got rows of lengths {[len(r) for r in v][:8]}")
    a = np.asarray(v, np.float64)
    asym = float(np.max(np.abs(a - a.T)))
    if asym > 1e-9 * max(1.0, float(np.max(np.abs(a)))):
        raise ValueError(f"must be symmetric positive definite: max |Σ − Σᵀ| = {asym:.3g}")
    lam = np.linalg.eigvalsh((a + a.T) / 2)
    if lam[0] <= 1e-12 * max(lam[-1], 1e-300):
        raise ValueError(f"must be symmetric positive definite: its smallest eigenvalue is {lam[0]:.3g} "
                         f"(largest {lam[-1]:.3g})")
    return v


# a d×d symmetric positive-definite matrix, inline or from a .npy file (read at validation); None: unset
Matrix = Annotated[list[list[float]] | None, BeforeValidator(_read_matrix), AfterValidator(_spd)]
MATRIX = {"allowed": "a d×d symmetric positive-definite matrix [[…], …] or a .npy file's path"}


class GaussianCovariates(DataSection):
    """Covariates x ~ N(0, Σ) and label noise: the fields of every Gaussian law (the prompts here, the
    fixed-regression law of :mod:`icldyn.components.regression`)."""

    covariance: Literal["identity", "eigenvalues", "condition", "official", "matrix"] = Field(
        "identity",
        description="Σ: identity; `eigenvalues` (data.eigenvalues); `condition` "
        "(eigenvalues geometric from 1 to 1/condition_number); `official` "
        "(the official code's eigenvalues {1, 1, 1/4, 1/16, 1}, d = 5); each rotated by a seeded random rotation, "
        "new per seed, unless data.rotate = false; `matrix`: Σ given (data.covariance_matrix)",
    )
    eigenvalues: PositiveList = Field(None, description="eigenvalues of Σ (covariance = eigenvalues)")
    condition_number: float = Field(16.0, ge=1.0, description="κ(Σ) for covariance = condition")
    rotate: bool = Field(True, description="covariance = eigenvalues, condition, official: Σ = U diag(λ) Uᵀ with a "
                         "random rotation U drawn from the seed; false: Σ = diag(λ), axis-aligned")
    covariance_matrix: Matrix = Field(None, description="covariance = matrix: Σ itself, d×d symmetric positive "
                                      "definite, inline or a .npy file's path (read when the config is validated: the "
                                      "run's config.toml holds the matrix)", json_schema_extra=MATRIX)
    noise_std: float = Field(0.0, ge=0.0, description="label noise σ: y = wᵀx + σ ε (regression: Ω = σ² I_p)")

    depends: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {
        "eigenvalues": ("covariance", ("eigenvalues",)), "condition_number": ("covariance", ("condition",)),
        "rotate": ("covariance", ("eigenvalues", "condition", "official")),
        "covariance_matrix": ("covariance", ("matrix",))}

    @model_validator(mode="after")
    def _covariance(self) -> GaussianCovariates:
        if self.covariance == "eigenvalues":
            if self.eigenvalues is None:
                raise ValueError("covariance = 'eigenvalues' needs data.eigenvalues (a list of d positive floats)")
            if len(self.eigenvalues) != self.d:
                raise ValueError(f"data.eigenvalues has {len(self.eigenvalues)} entries but data.d = {self.d}")
        if self.covariance == "official" and self.d != 5:
            raise ValueError(f"data.covariance = 'official' is defined for d = 5 only, got data.d = {self.d}")
        if self.covariance == "matrix":
            _check_matrix("covariance_matrix", self.covariance_matrix, self.d, "data.covariance = 'matrix'")
        return self


def _check_matrix(field: str, m: list[list[float]] | None, d: int, mode: str) -> None:
    if m is None:
        raise ValueError(f"{mode} needs data.{field} (a d×d symmetric positive-definite matrix, or a .npy path)")
    if len(m) != d:
        raise ValueError(f"data.{field} is {len(m)}×{len(m)} but data.d = {d}; set data.d = {len(m)}")


class PromptsData(GaussianCovariates):
    """A fresh task w = Ω_w^½ g per prompt (g ~ N(0, I_d), or Laplace or sparse coordinates of unit variance), n
    examples and a query (arXiv 2306.00297 §2)."""

    kind: Literal["prompts"] = Field("prompts", description="a fresh task w ~ N(0, Ω_w) per prompt, n examples + a "
                                     "query")
    w_prior: Literal["identity", "inverse_covariance", "matrix"] = Field(
        "inverse_covariance",
        description="the task covariance Ω_w = E[wwᵀ]: I_d (Thm 1), Σ⁻¹ (Thms 3-4, the paper's experiments) or "
        "`matrix` (data.w_covariance)",
    )
    w_covariance: Matrix = Field(None, description="w_prior = matrix: Ω_w, d×d symmetric positive definite, inline or "
                                 "a .npy file's path (as data.covariance_matrix)", json_schema_extra=MATRIX)
    w_law: Literal["gaussian", "laplace", "sparse"] = Field(
        "gaussian", description="the law of g in w = Ω_w^½ g: N(0, I_d); i.i.d. Laplace coordinates of variance 1; "
        "sparse: w_sparsity of the d coordinates (uniformly chosen per prompt) N(0, d/w_sparsity), the rest 0 — "
        "E[ggᵀ] = I_d each way. Outside Gaussian w the theorems' assumptions are not met (the report says so)")
    w_sparsity: int | None = Field(None, ge=1, le=256, description="w_law = sparse: the nonzero coordinates of g")
    seed: int | None = Field(None, ge=0, description="first data seed: seed i of the run draws Σ's rotation, its "
                             "held-out sets and its training prompts from data.seed + i, its initial parameters "
                             "from seed + i; unset: the run's seed")
    test_size: int = Field(20_000, ge=1, description="prompts in the fixed held-out test set of each seed")
    sampler: Literal["auto", "jax", "kernel"] = Field(
        "auto",
        description="training prompts of the linear transformer, the same draws either way (Philox4x32-10, "
        "Box–Muller): kernel (C, CPU: drawn straight into moments for the moment forms, into prompt matrices for the "
        "column forms; Gaussian w only); jax (its jax.numpy twin, any backend); auto: "
        "kernel when the model runs the kernel forward and w is Gaussian",
    )

    depends: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {
        **GaussianCovariates.depends, "w_covariance": ("w_prior", ("matrix",)), "w_sparsity": ("w_law", ("sparse",))}

    @model_validator(mode="after")
    def _prior(self) -> PromptsData:
        if self.w_prior == "matrix":
            _check_matrix("w_covariance", self.w_covariance, self.d, "data.w_prior = 'matrix'")
        if self.w_law == "sparse" and (self.w_sparsity is None or self.w_sparsity > self.d):
            raise ValueError(f"data.w_law = 'sparse' needs data.w_sparsity, the nonzero coordinates: 1 … data.d = "
                             f"{self.d}, got {self.w_sparsity}")
        if self.w_law != "gaussian" and self.sampler == "kernel":
            raise ValueError(f"data.sampler = 'kernel' draws Gaussian w only, not data.w_law = {self.w_law!r}; "
                             "allowed: 'auto', 'jax'")
        return self


def data_seeds(cfg: PromptsData, seeds: list[int]) -> list[int]:
    """The data seed of each of a run's seeds (``data.seed``: its own first seed; unset: the run's seeds)."""
    return list(seeds) if cfg.seed is None else [cfg.seed + i for i in range(len(seeds))]


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
    if cfg.covariance == "matrix":
        return np.linalg.eigvalsh(np.asarray(cfg.covariance_matrix, np.float64))[::-1]
    if cfg.covariance == "identity":
        return np.ones(cfg.d)
    if cfg.covariance == "eigenvalues":
        return np.asarray(cfg.eigenvalues, dtype=np.float64)
    if cfg.covariance == "condition":
        return np.geomspace(1.0, 1.0 / cfg.condition_number, cfg.d)
    return np.square(OFFICIAL_SQRT_EIGS)  # official: {1, 1, 1/4, 1/16, 1}


def make_covariance(cfg: GaussianCovariates, seed: int) -> np.ndarray:
    """Σ = U diag(λ) Uᵀ with a rotation U drawn from ``seed`` (identity and ``rotate = false`` need none; a given
    matrix is Σ itself), float64."""
    if cfg.covariance == "matrix":
        a = np.asarray(cfg.covariance_matrix, np.float64)
        return (a + a.T) / 2
    lam = covariance_eigenvalues(cfg)
    if cfg.covariance == "identity" or not cfg.rotate:
        return np.diag(lam)
    U = random_rotation(cfg.d, seed)
    return (U * lam) @ U.T


def sym_sqrt(S: np.ndarray, power: float = 0.5) -> np.ndarray:
    """S^power for a symmetric positive-definite S."""
    lam, U = np.linalg.eigh(S)
    return (U * lam**power) @ U.T


def make_task(cfg: PromptsData, seed: int) -> GaussianTask:
    sigma = make_covariance(cfg, seed)
    if cfg.w_prior == "matrix":
        w_sqrt = sym_sqrt(np.asarray(cfg.w_covariance, np.float64))
    else:
        w_sqrt = np.eye(cfg.d) if cfg.w_prior == "identity" else sym_sqrt(sigma, -0.5)
    return GaussianTask(sigma, sym_sqrt(sigma), w_sqrt, np.asarray(cfg.noise_std))


def w_covariance(task: GaussianTask) -> np.ndarray:
    """Ω_w = E[w wᵀ]."""
    W = np.asarray(task.w_sqrt)
    return W @ W.T


class WLaw(NamedTuple):
    """How g in w = Ω_w^½ g is drawn (static: part of the compiled program, not of the task pytree)."""

    name: str = "gaussian"  # gaussian, laplace or sparse (data.w_law)
    k: int | None = None  # sparse: the nonzero coordinates (data.w_sparsity)


GAUSSIAN = WLaw()


def w_law(cfg: PromptsData) -> WLaw:
    return WLaw(cfg.w_law, cfg.w_sparsity)


def draw_g(key: jax.Array, batch: int, d: int, dtype, law: WLaw = GAUSSIAN) -> jax.Array:
    """(batch, d) draws of g, E[ggᵀ] = I_d: standard normal; i.i.d. Laplace of scale 1/√2; or ``law.k`` coordinates
    (a uniform subset per row) N(0, d/k) and the rest 0."""
    if law.name == "laplace":
        return jax.random.laplace(key, (batch, d), dtype) * jnp.sqrt(jnp.asarray(0.5, dtype))
    if law.name == "sparse":
        kg, ks = jax.random.split(key)
        ranks = jnp.argsort(jnp.argsort(draws.uniform(ks, (batch, d)), axis=1), axis=1)
        g = draws.normal(kg, (batch, d), dtype) * jnp.sqrt(jnp.asarray(d / law.k, dtype))
        return jnp.where(ranks < law.k, g, jnp.zeros_like(g))
    return draws.normal(key, (batch, d), dtype)


def sample_prompts(task: GaussianTask, *, key: jax.Array, batch: int, n: int, law: WLaw = GAUSSIAN) -> Prompts:
    """``batch`` prompts of n context examples and one query, each with its own task vector w (``law``: g's)."""
    kx, kw, ke = jax.random.split(key, 3)
    dtype = task.sigma.dtype
    d = task.sigma.shape[0]
    X = draws.normal(kx, (batch, n + 1, d), dtype) @ task.sigma_sqrt  # (b, n+1, d)
    w = draw_g(kw, batch, d, dtype, law) @ task.w_sqrt.T  # (b, d)
    y = jnp.einsum("bid,bd->bi", X, w) + task.noise_std * draws.normal(ke, (batch, n + 1), dtype)
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


def sample_prompts_philox(task: GaussianTask, *, key: jax.Array, batch: int, n: int,
                          law: WLaw = GAUSSIAN) -> Prompts:
    """The law of :func:`sample_prompts` drawn from the C sampler's stream (``kernel.sample_moments``): for the
    same key, the very same prompts on every path (kernel or pure JAX, CPU or GPU), to rounding. Per prompt the
    normals are w's d, then (x_i's d, ε_i) for i = 1…n+1; a non-Gaussian ``law`` draws g from the key's fold 1
    instead of the stream's first d (which the C sampler cannot follow)."""
    dtype = task.sigma.dtype
    d = task.sigma.shape[0]
    bits = jax.random.bits(key, (2,), jnp.uint32)
    G = philox_normals(bits, batch, d + (n + 1) * (d + 1), dtype)
    g = G[:, :d] if law == GAUSSIAN else draw_g(jax.random.fold_in(key, 1), batch, d, dtype, law)
    w = g @ task.w_sqrt.T  # (b, d)
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
    """A seed's fixed held-out prompts (``which``: TEST_KEY or VAL_KEY), ``cfg.test_size`` of them (``seed``: its
    data seed, :func:`data_seeds`)."""
    t = jax.tree.map(lambda a: jnp.asarray(a, dtype), task)
    return sample_prompts(t, key=held_out_key(seed, which), batch=cfg.test_size, n=cfg.n, law=w_law(cfg))
