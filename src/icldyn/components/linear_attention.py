"""The L-layer linear self-attention transformer (``model.kind = "linear_attention"``; arXiv 2306.00297 eq. (3)).

.. math::
    Z_{ℓ+1} = Z_ℓ + \\frac1n \\sum_h P_{ℓ,h} Z_ℓ M (Z_ℓ^⊤ Q_{ℓ,h} Z_ℓ),\\qquad
    M = \\mathrm{diag}(1,…,1,0),\\qquad \\mathrm{TF}(Z_0) = -[Z_L]_{d+1,n+1}

and, as the official code's ``attention(P, Q, Z, activation)``, with an activation on the scores:
Z_ℓ M (Z_ℓᵀQZ_ℓ) becomes Z_ℓ M σ(Z_ℓᵀQZ_ℓ) for σ = ReLU (Theorem 5) or a softmax over the keys
(:func:`attention_weights`).

Parameterisations: ``full`` (every P, Q entry trained), ``sparse`` (eq. (8):
P = [[0,0],[0,1]], Q = −[[A,0],[0,0]] → preconditioned GD, Lemma 1) and ``relaxed``
(eq. (9), as in the official code: P = [[B,0],[0,1]], Q = −[[A,0],[0,0]] → GD++).

Two exact forwards. The **column form** is the equation above. The **moment form** uses that
each layer maps every column by one matrix, z ← T_ℓ z with T_ℓ = I + Σ_h P_{ℓ,h} Ŝ_ℓ Q_{ℓ,h} and
Ŝ_ℓ = (1/n) Z_ℓ M Z_ℓᵀ, so Ŝ_{ℓ+1} = T_ℓ Ŝ_ℓ T_ℓᵀ and the query column follows z_q ← T_ℓ z_q:
after one pass over the prompt the cost is independent of n.

References:
    arXiv 2306.00297, eqs. (3), (8), (9), Lemma 1; the official LinearTransformer code's ``attention``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from pydantic import Field

from icldyn.components import draws
from icldyn.components import lsa_kernel as kernel
from icldyn.components.prompts import Prompts, prompt_matrix
from icldyn.config import ConfigError, ModelSection, Predict, RunConfig, Section

KERNEL_DMAX = kernel.DMAX  # the C kernel's largest token dimension D = d + 1

class LinearAttentionTrain(Section):
    threads: int = Field(1, ge=1, le=256, description="CPU threads of the fused kernel (changes summation order)")


class LinearAttentionModel(ModelSection):
    """L-layer linear self-attention, eq. (3); parameterisations full, sparse (8), relaxed (9)."""

    kind: Literal["linear_attention"] = Field("linear_attention", description="L-layer linear self-attention")
    data_kinds = ("prompts",)
    train_fields = LinearAttentionTrain
    layers: int = Field(3, ge=1, le=64, description="number of layers L")
    parameterization: Literal["full", "sparse", "relaxed"] = Field(
        "full", description="full (P, Q free), sparse (eq. 8: preconditioned GD), relaxed (eq. 9: GD++)"
    )
    heads: int = Field(1, ge=1, le=64, description="attention heads per layer (their updates are summed)")
    init_std: float = Field(1e-3, ge=0.0, description="std of the iid normal initialisation of every trained block")
    forward: Literal["auto", "kernel", "moments", "columns"] = Field(
        "auto",
        description="kernel: fused C loss+gradient on a CPU (of the moment form for activation = 'linear', of the "
        "column form for the others); moments: the exact (d+1)×(d+1) moment-matrix form in JAX (linear attention "
        "only); columns: the literal column form of eq. (3) in JAX; auto: kernel where it compiles on a CPU "
        "backend, else moments (linear) or columns (one line says why). An explicit kernel that cannot be built "
        "here is refused. Every form draws the same prompts (data.sampler)",
    )
    activation: Literal["linear", "relu", "softmax", "softmax_masked"] = Field(
        "linear",
        description="the attention's activation σ(ZᵀQZ), as the official code's attention(P, Q, Z, activation): "
        "linear (eq. 3); relu; softmax (over all n + 1 keys, the query's own score included, then the query key "
        "masked, as the official code does); softmax_masked (the query's score excluded before normalising). "
        "Every activation keeps eq. (3)'s 1/n",
    )

    def check(self, cfg: RunConfig) -> None:
        if self.activation != "linear" and self.forward == "moments":
            raise ValueError(f"model.forward = 'moments' holds for model.activation = 'linear' only, not "
                             f"{self.activation!r}; allowed: model.forward = 'auto', 'kernel' or 'columns'")
        if "kernel" in (self.forward, cfg.data.sampler) and cfg.data.d + 1 > KERNEL_DMAX:
            raise ValueError(f"the C kernel takes data.d ≤ {KERNEL_DMAX - 1}, got data.d = {cfg.data.d}; allowed: "
                             "model.forward and data.sampler = 'auto', or a JAX form")

    def execution(self, cfg: RunConfig) -> dict:
        return execution(cfg)

    def predictor(self, cfg: RunConfig) -> Predict:
        """TF(Z_0) = −[Z_L]_{d+1,k+1} on prompts of any context length k (eq. (3)'s 1/n is the prompt's own k), by
        the pure-JAX moment form (linear attention) or column form (ReLU, softmax)."""
        model = LinearTransformer(cfg.data.d, self.layers, self.heads, self.parameterization, self.init_std,
                                  "moments" if self.activation == "linear" else "columns", activation=self.activation)
        return lambda params, prompts: model.predict(params, model.prepare(prompts))


Params = dict[str, jax.Array]


class LawAttentionModel(LinearAttentionModel):
    """The L-layer attention on a data law drawn in JAX (no C sampler, no ``data.sampler``): the base of a kind that
    reads another law than ``prompts``; subclasses set ``kind`` and ``data_kinds``."""

    def check(self, cfg: RunConfig) -> None:
        if self.activation != "linear" and self.forward == "moments":
            raise ValueError(f"model.forward = 'moments' holds for model.activation = 'linear' only, not "
                             f"{self.activation!r}; allowed: model.forward = 'auto', 'kernel' or 'columns'")

    def execution(self, cfg: RunConfig) -> dict:
        form = resolve_forward(self, cfg.data.d)
        return {"forward": form, "threads": cfg.train.threads, "note": f"forward `{form}`; prompts drawn in JAX"}


class Moments(NamedTuple):
    """A prompt reduced to what the linear transformer reads (moment form)."""

    S: jax.Array  # (b, D, D) Ŝ_0 = (1/n) Σ_{i≤n} z_i z_iᵀ, D = d + 1
    zq: jax.Array  # (b, D) query column [x_{n+1}; 0]
    yq: jax.Array  # (b,) target y^{(n+1)}


class Columns(NamedTuple):
    Z: jax.Array  # (b, D, n+1) prompt matrix Z_0
    yq: jax.Array  # (b,)


def moments(p: Prompts) -> Moments:
    n = p.X.shape[1] - 1
    z = jnp.concatenate([p.X[:, :n], p.y[:, :n, None]], axis=-1)  # (b, n, D) context columns
    S = jnp.sum(z[:, :, :, None] * z[:, :, None, :], axis=1) / n  # fuses; a batched GEMM would not
    zq = jnp.concatenate([p.X[:, n], jnp.zeros_like(p.y[:, :1])], axis=-1)
    return Moments(S, zq, p.y[:, n])


def bmm(a: jax.Array, b: jax.Array) -> jax.Array:
    """Batched small matrix product as a broadcast multiply-sum, which XLA fuses into one
    vectorised loop instead of one tiny GEMM call per prompt."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


def forward_moments(P: jax.Array, Q: jax.Array, x: Moments) -> jax.Array:
    """[Z_L]_{d+1,n+1} from moments. P, Q: (L, H, D, D). Returns (b,)."""
    S, zq = x.S, x.zq
    eye = jnp.eye(S.shape[-1], dtype=S.dtype)
    for ell in range(P.shape[0]):
        SQ = jnp.einsum("bij,hjk->bhik", S, Q[ell])  # (b, H, D, D)
        T = eye + jnp.einsum("hij,bhjk->bik", P[ell], SQ)  # (b, D, D)
        zq = jnp.sum(T * zq[:, None, :], axis=-1)  # T z_q
        S = bmm(bmm(T, S), jnp.swapaxes(T, -1, -2))  # T Ŝ Tᵀ
    return zq[:, -1]


def attention_weights(scores: jax.Array, activation: str) -> jax.Array:
    """σ(ZᵀQZ) M: ``scores`` (…, n+1, n+1), rows the keys i (the query last), columns the tokens j; the query's row
    is zeroed after the activation (the official code's mask), or, for ``softmax_masked``, left out of the
    normalisation. ``softmax`` normalises over all n + 1 keys, the query's own score included (official code)."""
    n = scores.shape[-2] - 1
    if activation == "softmax_masked":
        return jax.nn.softmax(scores.at[..., n, :].set(-jnp.inf), axis=-2)
    act = {"linear": lambda s: s, "relu": jax.nn.relu, "softmax": lambda s: jax.nn.softmax(s, axis=-2)}[activation]
    return act(scores).at[..., n, :].set(0.0)


def forward_columns(P: jax.Array, Q: jax.Array, Z: jax.Array, activation: str = "linear") -> jax.Array:
    """Z_L from Z_0 (b, D, n+1) by the literal column recursion of eq. (3),
    Z ← Z + (1/n) Σ_h P_h Z σ(ZᵀQ_h Z) M, with σ the identity (eq. 3), ReLU or a softmax over the keys."""
    n = Z.shape[-1] - 1
    for ell in range(P.shape[0]):
        scores = jnp.einsum("bki,hkl,blj->bhij", Z, Q[ell], Z)  # (b, H, n+1, n+1) ZᵀQZ
        Z = Z + jnp.einsum("hkl,bli,bhij->bkj", P[ell], Z, attention_weights(scores, activation)) / n
    return Z


def resolve_forward(cfg: LinearAttentionModel, d: int) -> str:
    """The forward that runs: ``auto`` is the kernel on a CPU backend where it builds, else the JAX moment form
    (linear attention) or column form (the others), with one line saying why; an explicit ``kernel`` that cannot
    be honoured raises ConfigError."""
    jax_form = "moments" if cfg.activation == "linear" else "columns"
    if cfg.forward == "auto":
        if jax.default_backend() != "cpu":
            return jax_form
        if kernel.available(d + 1):
            return "kernel"
        kernel.explain_fallback(d + 1)
        return jax_form
    if cfg.forward == "kernel" and (why := _kernel_unavailable(d + 1)):
        allowed = "'auto', 'moments', 'columns'" if cfg.activation == "linear" else "'auto', 'columns'"
        raise ConfigError(f"model.forward = 'kernel' cannot be honoured here: C kernel unavailable: {why}; "
                          f"allowed: {allowed}")
    return cfg.forward


def _kernel_unavailable(D: int) -> str | None:
    """Why the C kernel for D cannot run here (an XLA custom call of the CPU backend), or None where it can."""
    if jax.default_backend() != "cpu":
        return f"it runs on the CPU backend, this one is {jax.default_backend()}"
    return None if kernel.available(D) else kernel.status(D).reason


@dataclass(frozen=True)
class LinearTransformer:
    """Static description of the model; parameters live in a separate pytree."""

    d: int
    layers: int
    heads: int = 1
    parameterization: str = "full"
    init_std: float = 1e-3
    form: str = "moments"  # kernel | moments | columns
    threads: int = 1  # kernel only
    activation: str = "linear"  # linear | relu | softmax | softmax_masked (kernel or column form, unless linear)

    @classmethod
    def from_config(cls, cfg: LinearAttentionModel, d: int, threads: int = 1) -> LinearTransformer:
        return cls(d, cfg.layers, cfg.heads, cfg.parameterization, cfg.init_std, resolve_forward(cfg, d), threads,
                   cfg.activation)

    def init(self, key: jax.Array, dtype=jnp.float32) -> Params:
        """iid N(0, init_std²) blocks (official code); ``full`` starts with P[d,d] = 1 so the value
        path reads the labels from the first step, as the sparse and relaxed forms fix it."""
        L, H, d = self.layers, self.heads, self.d
        kA, kB = jax.random.split(key)
        normal = lambda k, shape: self.init_std * draws.normal(k, shape, dtype)  # noqa: E731
        if self.parameterization == "full":
            P = normal(kB, (L, H, d + 1, d + 1)).at[:, :, d, d].add(1.0)
            return {"P": P, "Q": normal(kA, (L, H, d + 1, d + 1))}
        params = {"A": normal(kA, (L, H, d, d))}
        if self.parameterization == "relaxed":
            params["B"] = normal(kB, (L, H, d, d))
        return params

    def PQ(self, params: Params) -> tuple[jax.Array, jax.Array]:
        """(P, Q), each (L, H, d+1, d+1), from the parameterisation's free blocks."""
        if self.parameterization == "full":
            return params["P"], params["Q"]
        A = params["A"]
        L, H, d, _ = A.shape
        P = jnp.zeros((L, H, d + 1, d + 1), A.dtype).at[:, :, d, d].set(1.0)
        if self.parameterization == "relaxed":
            P = P.at[:, :, :d, :d].set(params["B"])
        Q = jnp.zeros_like(P).at[:, :, :d, :d].set(-A)
        return P, Q

    def trained_entries(self) -> tuple | None:
        """(P mask, Q mask) of the (d+1)×(d+1) entries this parameterisation trains (None: all)."""
        if self.parameterization == "full":
            return None
        block = tuple(tuple(i < self.d and j < self.d for j in range(self.d + 1)) for i in range(self.d + 1))
        none = tuple(tuple(False for _ in range(self.d + 1)) for _ in range(self.d + 1))
        return (block if self.parameterization == "relaxed" else none), block

    def A(self, params: Params) -> jax.Array:
        """Effective preconditioners A_ℓ = −Σ_h P_{ℓ,h}[d,d] Q_{ℓ,h}[:d,:d], shape (L, d, d)."""
        P, Q = self.PQ(params)
        d = self.d
        return -jnp.einsum("lh,lhij->lij", P[:, :, d, d], Q[:, :, :d, :d])

    def B(self, params: Params) -> jax.Array:
        """Covariate maps B_ℓ = Σ_h P_{ℓ,h}[:d,:d] (relaxed eq. (9)), shape (L, d, d)."""
        P, _ = self.PQ(params)
        return P[:, :, : self.d, : self.d].sum(axis=1)

    @property
    def reads_moments(self) -> bool:
        """Whether this forward reads prompts as moments (linear attention, moment form or its kernel)."""
        return self.form == "moments" or (self.form == "kernel" and self.activation == "linear")

    def prepare(self, prompts: Prompts) -> Moments | Columns:
        """Turn raw prompts into this forward's input (done once per fresh batch)."""
        if self.reads_moments:
            return moments(prompts)
        return Columns(prompt_matrix(prompts), prompts.y[:, -1])

    def readout(self, params: Params, x: Moments | Columns) -> jax.Array:
        """[Z_L]_{d+1,n+1} per prompt (the prediction is its negative)."""
        P, Q = self.PQ(params)
        if isinstance(x, Moments):
            return forward_moments(P, Q, x)
        return forward_columns(P, Q, x.Z, self.activation)[:, -1, -1]

    def predict(self, params: Params, x: Moments | Columns) -> jax.Array:
        """TF(Z_0) = −[Z_L]_{d+1,n+1}."""
        return -self.readout(params, x)

    def per_prompt_loss(self, params: Params, x: Moments | Columns) -> jax.Array:
        """(TF(Z_0) − y^{(n+1)})², no ½ (official code)."""
        return jnp.square(self.readout(params, x) + x.yq)

    def loss(self, params: Params, x: Moments | Columns) -> jax.Array:
        """Mean of :meth:`per_prompt_loss`; the ``kernel`` form computes it and its gradient fused (moment form for
        linear attention, column form for the other activations)."""
        if self.form == "kernel":
            P, Q = self.PQ(params)
            if isinstance(x, Columns):
                return kernel.attn_loss(P, Q, x.Z, x.yq, self.activation, self.threads)
            return kernel.loss(P, Q, x.S, x.zq, x.yq, self.threads, self.trained_entries())
        return jnp.mean(self.per_prompt_loss(params, x))


def gdpp_error(As: jax.Array, Bs: jax.Array, S: jax.Array, h: jax.Array, xq: jax.Array, yq: jax.Array) -> jax.Array:
    """ŷ − y_q of the relaxed (eq. 9) transformer in its d×d form (Bs: B_0 … B_{L−2}, empty for the
    sparse eq. 8, where it is Lemma 1's preconditioned GD): per layer M_ℓ = I − B_ℓŜ_ℓA_ℓ,
    o ← o − h_ℓᵀA_ℓx_q, x_q ← M_ℓx_q, h_{ℓ+1} = M_ℓ(h_ℓ − Ŝ_ℓA_ℓᵀh_ℓ), Ŝ_{ℓ+1} = M_ℓŜ_ℓM_ℓᵀ; ŷ = −o_L. Matrix-vector
    products only, except Ŝ's update where a later layer reads it."""
    mv = lambda M, v: jnp.einsum("bij,bj->bi", M, v) if M.ndim == 3 else v @ M.T  # noqa: E731
    o = jnp.zeros_like(yq)
    for ell, A in enumerate(As):
        o = o - jnp.einsum("bi,bi->b", h, mv(A, xq))
        if ell < len(Bs):  # M v = v − B Ŝ A v
            M_of = lambda v, A=A, B=Bs[ell], S=S: v - mv(B, mv(S, mv(A, v)))  # noqa: E731
            xq, h = M_of(xq), M_of(h - mv(S, h @ A))
            if ell + 1 < len(Bs):
                SA = jnp.einsum("bij,jk->bik", S, A)
                M = jnp.eye(S.shape[-1]) - jnp.einsum("ij,bjk->bik", Bs[ell], SA)
                S = jnp.einsum("bij,bjk,blk->bil", M, S, M)
        else:  # B_ℓ = 0 from here (sparse, or the last layer): M_ℓ = I
            h = h - mv(S, h @ A)
    return -o - yq


def resolve_sampler(cfg: RunConfig, form: str) -> str:
    """Which sampler draws the training prompts: ``kernel`` (C) or ``jax`` (its pure-JAX twin, the same draws).
    ``auto`` takes the C sampler exactly when the model runs the kernel forward and w is Gaussian (the C sampler
    draws no other law)."""
    if cfg.data.sampler == "auto":
        return "kernel" if form == "kernel" and getattr(cfg.data, "w_law", "gaussian") == "gaussian" else "jax"
    return cfg.data.sampler


def execution(cfg: RunConfig) -> dict:
    """What will run for ``cfg`` on this machine (summary.json's ``execution``); raises ConfigError where an
    explicit ``model.forward = "kernel"`` or ``data.sampler = "kernel"`` cannot be honoured."""
    if cfg.data.sampler == "kernel" and (why := _kernel_unavailable(cfg.data.d + 1)):
        raise ConfigError(f"data.sampler = 'kernel' cannot be honoured here: C kernel unavailable: {why}; "
                          "allowed: 'auto', 'jax' (the same draws)")
    form = resolve_forward(cfg.model, cfg.data.d)
    sampler = resolve_sampler(cfg, form)
    k, said = None, "not asked for"  # not built only to be reported: an explicit pure-JAX path, another backend
    if jax.default_backend() != "cpu":
        said = f"not used on the {jax.default_backend()} backend"
    elif cfg.model.forward in ("auto", "kernel") or cfg.data.sampler == "kernel":
        k = kernel.status(cfg.data.d + 1)
        said = f"{k.origin} ({k.reason}; compiler {k.compiler})"
    return {"forward": form, "sampler": sampler, "kernel": k.as_dict() if k else None, "threads": cfg.train.threads,
            "note": f"forward `{form}`, sampler `{sampler}`; C kernel {said}"}
