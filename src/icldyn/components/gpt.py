"""A GPT-2-style decoder on interleaved (x, y) prompts: the model of *What can transformers learn in-context?*
(NeurIPS 2022, arXiv 2208.01066, §2-3; their ``TransformerModel``: a Hugging Face ``GPT2Model`` between a linear
read-in and a linear read-out).

A prompt (x₁, f(x₁), …, x_k, f(x_k)) becomes 2k tokens z ∈ R^d — x_i, then (y_i, 0, …, 0) — read in by a linear map
to R^E, with learned positions; GPT-2 blocks (pre-LayerNorm, multi-head causal softmax attention, GELU MLP of width
4E, residuals), a final LayerNorm and a linear read-out at the x tokens give ŷ_i = M(x₁, y₁, …, x_i), the prediction
of f(x_i) from the i − 1 examples before it. Causal attention means the first k predictions of a longer prompt are
those of its k-point prefix: the curriculum of :mod:`icldyn.components.function_classes` trains on shorter prompts by
masking the loss instead of recompiling.

Parameters are a plain pytree with the layers stacked on a leading axis, named after the Hugging Face state dict so
that :func:`from_state_dict` is a renaming. The blocks are unrolled at trace time (a ``lax.scan`` over the stacked
layers compiles once whatever the depth but measured 25% slower per step on a CPU core, measured side by side).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from pydantic import Field

from icldyn.components import draws
from icldyn.config import ModelSection, Predict, PrefixPredict, RunConfig
from icldyn.errors import ConfigError

Params = dict[str, Any]

# n_embd, n_layer, n_head (arXiv 2208.01066 §3)
SIZES = {"tiny": (64, 3, 2), "small": (128, 6, 4), "standard": (256, 12, 8)}
LN_EPS = 1e-5  # GPT2Config.layer_norm_epsilon
INIT_STD = 0.02  # GPT2Config.initializer_range


class GPTModel(ModelSection):
    """arXiv 2208.01066's GPT-2 decoder (arXiv 2208.01066 §3), sized by ``size`` or explicit dimensions."""

    kind: Literal["gpt"] = Field("gpt", description="GPT-2-style decoder on (x, y) tokens (arXiv 2208.01066)")
    data_kinds: ClassVar[tuple[str, ...]] = (
        "linear_regression", "sparse_linear_regression", "noisy_linear_regression", "linear_classification",
        "quadratic_regression", "relu_2nn_regression", "decision_tree", "prompts", "laws")
    size: Literal["tiny", "small", "standard"] = Field(
        "tiny", description="sizes of arXiv 2208.01066 (n_embd / layers / heads): tiny 64/3/2, small 128/6/4, "
        "standard 256/12/8")
    n_embd: int | None = Field(None, ge=1, le=4096, description="embedding width E (overrides size)")
    n_layer: int | None = Field(None, ge=1, le=64, description="GPT-2 blocks (overrides size)")
    n_head: int | None = Field(None, ge=1, le=64, description="attention heads; must divide n_embd (overrides size)")

    def dims(self) -> tuple[int, int, int]:
        E, L, H = SIZES[self.size]
        return self.n_embd or E, self.n_layer or L, self.n_head or H

    def check(self, cfg: RunConfig) -> None:
        E, _, H = self.dims()
        if E % H:
            raise ValueError(f"model.n_head = {H} must divide model.n_embd = {E}")

    def execution(self, cfg: RunConfig) -> dict[str, Any]:
        E, L, H = self.dims()
        return {"gpt": f"n_embd {E}, layers {L}, heads {H}"}

    def predictor(self, cfg: RunConfig) -> Predict:
        """ŷ at the query (the last x token) of prompts up to the trained length n + 1 (the learned positions end
        there: a longer prompt is refused in one line)."""
        H, longest = self.dims()[2], self.longest_prompt(cfg)

        def at_query(params, prompts):
            if prompts.X.shape[1] > longest:
                raise ConfigError(f"the GPT was trained on prompts of {longest} points (its learned positions); "
                                  f"{prompts.X.shape[1]} points are beyond them")
            return predict(params, prompts.X, prompts.y, H)[:, -1]

        return at_query

    def prefix_predictor(self, cfg: RunConfig) -> PrefixPredict:
        """ŷ at every x token (the causal mask: each reads the points before it and its own x alone)."""
        H = self.dims()[2]
        return lambda params, prompts: predict(params, prompts.X, prompts.y, H)

    def longest_prompt(self, cfg: RunConfig) -> int:
        """n + 1: the learned positions end at the trained prompt length."""
        return cfg.data.n + 1


def init(key: jax.Array, d: int, n_points: int, n_embd: int, n_layer: int, n_head: int, dtype=jnp.float32) -> Params:
    """Parameters as Hugging Face initialises ``GPT2Model`` (N(0, 0.02), residual projections N(0, 0.02/√(2L)),
    LayerNorms 1 and 0, biases 0) and PyTorch's ``nn.Linear`` the read-in and read-out (U(±1/√fan_in)).
    ``n_points``: the longest prompt (2 · n_points positions)."""
    E, L = n_embd, n_layer
    ks = iter(jax.random.split(key, 10))
    normal = lambda shape, std=INIT_STD: std * draws.normal(next(ks), shape, dtype)  # noqa: E731
    uniform = lambda shape, fan_in: draws.uniform(  # noqa: E731
        next(ks), shape, dtype, -1.0 / np.sqrt(fan_in), 1.0 / np.sqrt(fan_in))
    zeros, ones = (lambda *s: jnp.zeros(s, dtype)), (lambda *s: jnp.ones(s, dtype))
    proj_std = INIT_STD / (2 * L) ** 0.5
    return {
        "read_in": {"w": uniform((d, E), d), "b": uniform((E,), d)},
        "wpe": normal((2 * n_points, E)),
        "h": {"ln_1": {"g": ones(L, E), "b": zeros(L, E)},
              "attn": {"c_attn_w": normal((L, E, 3 * E)), "c_attn_b": zeros(L, 3 * E),
                       "c_proj_w": normal((L, E, E), proj_std), "c_proj_b": zeros(L, E)},
              "ln_2": {"g": ones(L, E), "b": zeros(L, E)},
              "mlp": {"c_fc_w": normal((L, E, 4 * E)), "c_fc_b": zeros(L, 4 * E),
                      "c_proj_w": normal((L, 4 * E, E), proj_std), "c_proj_b": zeros(L, E)}},
        "ln_f": {"g": ones(E), "b": zeros(E)},
        "read_out": {"w": uniform((E,), E), "b": uniform((), E)},
    }


def combine(xs: jax.Array, ys: jax.Array) -> jax.Array:
    """(b, k, d) and (b, k) → the (b, 2k, d) token sequence x₁, (y₁, 0…0), x₂, … (arXiv 2208.01066's ``_combine``)."""
    y_tok = jnp.zeros_like(xs).at[..., 0].set(ys)
    return jnp.stack([xs, y_tok], axis=2).reshape(xs.shape[0], 2 * xs.shape[1], xs.shape[2])


@jax.custom_vjp
def _layer_norm(h: jax.Array, g: jax.Array, b: jax.Array) -> jax.Array:
    return _layer_norm_fwd(h, g, b)[0]


def _layer_norm_fwd(h, g, b):
    mu = h.mean(-1, keepdims=True)
    var = jnp.square(h - mu).mean(-1, keepdims=True)
    r = jax.lax.rsqrt(var + LN_EPS)
    xh = (h - mu) * r
    return xh * g + b, (xh, r, g)


def _layer_norm_bwd(res, dy):
    """∂/∂h of (h − μ)/σ · g + b = r (dx̂ − mean dx̂ − x̂ mean(dx̂ x̂)) with dx̂ = dy g, from the saved x̂ and r = 1/σ
    (autodiff of the forward re-derives both through the mean and the variance: measured slower, docs/performance.md
    §10); g and b's gradients are column sums."""
    xh, r, g = res
    dxh = dy * g
    m1 = dxh.mean(-1, keepdims=True)
    m2 = (dxh * xh).mean(-1, keepdims=True)
    lead = tuple(range(dy.ndim - 1))
    return r * (dxh - m1 - xh * m2), jnp.sum(dy * xh, lead), jnp.sum(dy, lead)


_layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


def layer_norm(h: jax.Array, p: Params) -> jax.Array:
    """LayerNorm over the last axis (ε = 1e-5, GPT2Config), two-pass variance, with a hand-written VJP."""
    return _layer_norm(h, p["g"], p["b"])


@jax.custom_vjp
def dense(x: jax.Array, w: jax.Array) -> jax.Array:
    """x @ w (x: (…, i), w: (i, o)), with its weight gradient Σ_t x_tᵀ g_t computed with the narrower of x and the
    cotangent g on the left — for the wider, as (Σ_t g_tᵀ x_t)ᵀ, the same sums. XLA's CPU backend runs a product
    whose left operand is contracted over its rows at full rate only when that operand is the narrower: the MLP's
    c_proj gradient (5 248 × 512 on the left) ran at half the rate by its generic dot (measured, docs/performance.md
    §10); the gradients are unchanged."""
    return x @ w


def _dense_fwd(x, w):
    return x @ w, (x, w)


def _dense_bwd(res, g):
    x, w = res
    x2, g2 = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    dw = x2.T @ g2 if x2.shape[1] <= g2.shape[1] else jax.lax.optimization_barrier(g2.T @ x2).T
    return g @ w.T, dw


dense.defvjp(_dense_fwd, _dense_bwd)


def causal_mask(T: int, queries: slice = slice(None)) -> jax.Array:
    """(q, T) booleans: query position i (of ``range(T)[queries]``) sees key position j ≤ i."""
    return jnp.arange(T)[None, :] <= jnp.arange(T)[queries][:, None]


def _attention(a: jax.Array, p: Params, n_head: int, queries: slice = slice(None)) -> jax.Array:
    """Multi-head causal self-attention of GPT-2 (its ``c_attn`` / ``c_proj`` weights), heads-major: the projections
    write (b, H, T, c) directly, so that no einsum needs a transpose. ``queries``: the positions that attend (all, or
    ``slice(None, None, 2)``, the x tokens); each sees every position up to itself."""
    b, T, E = a.shape
    c = E // n_head
    W = p["c_attn_w"].reshape(E, 3, n_head, c)
    B = p["c_attn_b"].reshape(3, n_head, 1, c)
    q = jnp.einsum("bte,ehc->bhtc", a[:, queries], W[:, 0]) + B[0]
    k = jnp.einsum("bte,ehc->bhtc", a, W[:, 1]) + B[1]
    v = jnp.einsum("bte,ehc->bhtc", a, W[:, 2]) + B[2]
    scores = jnp.einsum("bhqc,bhkc->bhqk", q, k) * c**-0.5
    weights = jax.nn.softmax(jnp.where(causal_mask(T, queries), scores, jnp.finfo(scores.dtype).min), axis=-1)
    o = jnp.einsum("bhqk,bhkc->bhqc", weights, v)
    return jnp.einsum("bhqc,hce->bqe", o, p["c_proj_w"].reshape(n_head, c, E)) + p["c_proj_b"]


def block(h: jax.Array, p: Params, n_head: int, queries: slice = slice(None)) -> jax.Array:
    """One GPT-2 block: h + Attn(LN₁ h), then + MLP(LN₂ ·) (pre-LayerNorm; GELU in its tanh form, ``gelu_new``), at
    the positions ``queries`` (all; the last block needs only the x tokens, which is exact)."""
    h = h[:, queries] + _attention(layer_norm(h, p["ln_1"]), p["attn"], n_head, queries)
    m = jax.nn.gelu(dense(layer_norm(h, p["ln_2"]), p["mlp"]["c_fc_w"]) + p["mlp"]["c_fc_b"], approximate=True)
    return h + dense(m, p["mlp"]["c_proj_w"]) + p["mlp"]["c_proj_b"]


def predict(params: Params, xs: jax.Array, ys: jax.Array, n_head: int) -> jax.Array:
    """(b, k) predictions ŷ_i = M(x₁, y₁, …, x_i) at every x token (y_i itself is never seen by ŷ_i). Only the x
    tokens are read out, so the last block computes its queries, residual and MLP at those alone."""
    zs = combine(xs, ys)
    h = zs @ params["read_in"]["w"] + params["read_in"]["b"] + params["wpe"][: zs.shape[1]]
    L = params["h"]["ln_1"]["g"].shape[0]
    for i in range(L):  # unrolled: a lax.scan over layers ran 25% slower on CPU
        queries = slice(None, None, 2) if i == L - 1 else slice(None)
        h = block(h, jax.tree.map(lambda a, i=i: a[i], params["h"]), n_head, queries)
    return layer_norm(h, params["ln_f"]) @ params["read_out"]["w"] + params["read_out"]["b"]


def seed_map() -> str:
    """How a trainer maps the GPT's seeds and learning rates (:attr:`icldyn.train.loop.Problem.seed_map`): one program
    looping over them on a CPU (``map_slots``: each step's products are already 64 × 2(n + 1) rows; vmapping five
    seeds of the small model ran 15–25% slower per seed than a loop, and a 5 × 3 grid of seeds and rates 40% slower,
    measured in docs/performance.md §10), vmapped on an accelerator."""
    return "map_slots" if jax.default_backend() == "cpu" else "vmap"


class QueryRegressor(NamedTuple):
    """The GPT as an in-context regressor of the prompt's last label: ``init(key)``; ``loss(params, prompts)``, the
    squared error at every x position (the training objective of arXiv 2208.01066 §3); ``predict(params, prompts)``
    → ŷ (b,) at the query; ``test_loss(params, prompts)``, E(ŷ − y)² at the query."""

    init: Callable
    loss: Callable
    predict: Callable
    test_loss: Callable


def query_regressor(d: int, n: int, n_embd: int, n_layer: int, n_head: int, dtype=jnp.float32) -> QueryRegressor:
    """:class:`QueryRegressor` for prompts of n examples and a query (n + 1 x positions) in R^d."""
    def at_all(params, p):  # (b, n+1): every x position
        return predict(params, p.X, p.y, n_head)

    return QueryRegressor(init=lambda key: init(key, d, n + 1, n_embd, n_layer, n_head, dtype),
                          loss=lambda params, p: jnp.mean(jnp.square(at_all(params, p) - p.y)),
                          predict=lambda params, p: at_all(params, p)[:, -1],
                          test_loss=lambda params, p: jnp.mean(jnp.square(at_all(params, p)[:, -1] - p.y[:, -1])))


_HF_BLOCK = {  # our name -> (HF state-dict name inside block i, transpose)
    ("ln_1", "g"): "ln_1.weight", ("ln_1", "b"): "ln_1.bias", ("ln_2", "g"): "ln_2.weight", ("ln_2", "b"): "ln_2.bias",
    ("attn", "c_attn_w"): "attn.c_attn.weight", ("attn", "c_attn_b"): "attn.c_attn.bias",
    ("attn", "c_proj_w"): "attn.c_proj.weight", ("attn", "c_proj_b"): "attn.c_proj.bias",
    ("mlp", "c_fc_w"): "mlp.c_fc.weight", ("mlp", "c_fc_b"): "mlp.c_fc.bias",
    ("mlp", "c_proj_w"): "mlp.c_proj.weight", ("mlp", "c_proj_b"): "mlp.c_proj.bias",
}


def from_state_dict(state: dict[str, Any], dtype=jnp.float32) -> Params:
    """Parameters from a PyTorch state dict of arXiv 2208.01066's ``TransformerModel`` (keys ``_read_in.*``,
    ``_backbone.*`` — a ``GPT2Model`` —, ``_read_out.*``; tensors or arrays). The head count is not in the weights:
    pass the model's to :func:`predict`. HF's Conv1D stores (in, out) as we do; ``nn.Linear`` stores (out, in) and
    is transposed."""
    arr = {k: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v) for k, v in state.items()}
    layers = sorted({int(k.split(".")[2]) for k in arr if k.startswith("_backbone.h.")})
    if layers != list(range(len(layers))) or not layers:
        raise ValueError("not a TransformerModel state dict: no _backbone.h.<i> blocks")
    h: Params = {"ln_1": {}, "ln_2": {}, "attn": {}, "mlp": {}}
    for (group, name), hf in _HF_BLOCK.items():
        h[group][name] = jnp.asarray(np.stack([arr[f"_backbone.h.{i}.{hf}"] for i in layers]), dtype)
    cast = lambda a: jnp.asarray(a, dtype)  # noqa: E731
    params = {
        "read_in": {"w": cast(arr["_read_in.weight"].T), "b": cast(arr["_read_in.bias"])},
        "wpe": cast(arr["_backbone.wpe.weight"]),
        "h": h,
        "ln_f": {"g": cast(arr["_backbone.ln_f.weight"]), "b": cast(arr["_backbone.ln_f.bias"])},
        "read_out": {"w": cast(arr["_read_out.weight"][0]), "b": cast(arr["_read_out.bias"][0])},
    }
    return params


def count(params: Params) -> int:
    """Trained parameters (HF's unused token embedding ``wte`` is not among them)."""
    return int(sum(np.prod(a.shape) for a in jax.tree.leaves(params)))
