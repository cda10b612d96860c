"""The official LinearTransformer code's data laws (``generate_data``; arXiv 2310.01082), ``data.kind = "laws"``, in
JAX: covariates (normal, sphere, heavy-tailed gamma) and a task per prompt. Every draw comes from an explicit key."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
from pydantic import Field, model_validator

from icldyn.components import draws
from icldyn.components.prompts import Prompts
from icldyn.config import DataSection


class TaskLaws(DataSection):
    """The official code's ``generate_data`` laws: covariates ``normal``, ``sphere`` or ``gamma`` and a task per
    prompt (linear, or nonlinear: a random ReLU network, linear on random-MLP features, 1-d sine)."""

    kind: Literal["laws"] = Field("laws", description="the official code's covariate laws and tasks, a fresh task "
                                  "per prompt")
    covariates: Literal["normal", "sphere", "gamma"] = Field(
        "normal", description="x ~ N(0, I_d); sphere: x/‖x‖; gamma: x/‖x‖ · r with r² ~ Gamma(shape_k, "
        "scale √(10/shape_k)) (heavy-tailed; shape_k = 5/2 at d = 5 is N(0, I_5) again)")
    shape_k: float = Field(0.1, gt=0.0, description="Gamma shape of covariates = 'gamma' (official: 0.1)")
    task: Literal["linear", "relu_net", "mlp_features", "sine"] = Field(
        "linear", description="linear: y = wᵀx, w ~ N(0, I_d); relu_net: y = f(x), f a random one-hidden-layer "
        "ReLU network (weights N(0, 0.1²)) per prompt; mlp_features: tokens are φ(x) for a random d→hidden→d ReLU "
        "MLP (weights N(0, 1)), y = wᵀφ(x); sine: d = 1, x ~ U(−5, 5), y = a sin(x + φ), a ~ U(0.1, 5), "
        "φ ~ U(0, π)")
    hidden: int = Field(5, ge=1, le=4096, description="hidden width of relu_net and mlp_features (official: d)")
    test_size: int = Field(10_000, ge=1, description="prompts in each seed's fixed held-out set")

    @model_validator(mode="after")
    def _fit(self) -> TaskLaws:
        if self.task == "sine" and self.d != 1:
            raise ValueError(f"data.task = 'sine' is 1-d regression: it needs data.d = 1, got data.d = {self.d}")
        if self.task == "sine" and self.covariates != "normal":
            raise ValueError("data.task = 'sine' draws x ~ U(−5, 5) itself; data.covariates applies to the other "
                             "tasks only (leave it 'normal')")
        if self.shape_k != 0.1 and self.covariates != "gamma":
            raise ValueError(f"data.shape_k applies to data.covariates = 'gamma' only, not {self.covariates!r}")
        return self


def covariates(key: jax.Array, shape: tuple[int, ...], law: str, shape_k: float = 0.1, dtype=jnp.float32) -> jax.Array:
    """x of ``shape`` (…, d): ``normal`` N(0, I_d); ``sphere`` x/‖x‖; ``gamma`` x/‖x‖ · r with
    r² ~ Gamma(shape_k, scale √(10/shape_k)) — the official code's calibration, under which shape_k = 5/2 at d = 5
    gives ‖x‖² ~ χ²₅, i.e. N(0, I_5)."""
    kx, kr = jax.random.split(key)
    x = draws.normal(kx, shape, dtype)
    if law == "normal":
        return x
    u = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    if law == "sphere":
        return u
    log_r2 = log_gamma(kr, shape_k, shape[:-1], dtype) + 0.5 * jnp.log(10.0 / shape_k)
    return u * jnp.exp(0.5 * log_r2)[..., None]


def log_gamma(key: jax.Array, a: float, shape: tuple[int, ...], dtype=jnp.float32, rounds: int = 4) -> jax.Array:
    """log G with G ~ Gamma(a, 1), by Marsaglia and Tsang's rejection method (ACM TOMS 26, 2000), for a < 1 through
    G = G' U^{1/a}, G' ~ Gamma(a + 1) (in logs: a = 0.1 takes G below float32's range). Exact: each entry keeps the
    first accepted of an i.i.d. sequence of proposals, drawn ``rounds`` at a time for every entry; another round of
    proposals is drawn only while some entry has had all of its rejected (P ≈ 0.042⁴ per entry at a + 1 = 1.1).
    ``jax.random.gamma`` draws the same law, one rejection loop per entry: ≈ 7× slower here at 21 000 entries."""
    alpha = a + 1.0 if a < 1.0 else a
    dd = alpha - 1.0 / 3.0
    c = 1.0 / (9.0 * dd) ** 0.5
    kb, kp = jax.random.split(key)

    def propose(k):
        kz, ku = jax.random.split(k)
        z = draws.normal(kz, (rounds, *shape), dtype)
        v = (1.0 + c * z) ** 3
        log_v = jnp.log(jnp.where(v > 0, v, 1.0))
        ok = (v > 0) & (jnp.log(draws.uniform(ku, (rounds, *shape), dtype))
                        < 0.5 * z * z + dd - dd * v + dd * log_v)
        first = jnp.argmax(ok, axis=0)[None]
        return jnp.any(ok, axis=0), jnp.take_along_axis(log_v, first, axis=0)[0]

    def more(state):
        i, done, log_g = state
        got, new = propose(jax.random.fold_in(kp, i))
        return i + 1, done | got, jnp.where(done, log_g, new)

    state = (0, jnp.zeros(shape, bool), jnp.zeros(shape, dtype))
    _, _, log_v = jax.lax.while_loop(lambda s: ~jnp.all(s[1]), more, state)
    log_g = jnp.log(dd) + log_v
    if a < 1.0:
        log_g = log_g + jnp.log(draws.uniform(kb, shape, dtype)) / a
    return log_g


def relu_net(key: jax.Array, X: jax.Array, hidden: int, std: float = 0.1) -> jax.Array:
    """y = W₂ relu(W₁x + b₁) + b₂ per prompt (X: (b, m, d)), weights N(0, std²), biases U(±1/√fan-in) (PyTorch's
    default, as in the official ``generate_data_relu``; it draws one network per batch, here one per prompt)."""
    b, _, d = X.shape
    k1, k2, k3, k4 = jax.random.split(key, 4)
    W1 = std * draws.normal(k1, (b, hidden, d))
    b1 = draws.uniform(k2, (b, hidden), minval=-1, maxval=1) / jnp.sqrt(d)
    W2 = std * draws.normal(k3, (b, hidden))
    b2 = draws.uniform(k4, (b,), minval=-1, maxval=1) / jnp.sqrt(hidden)
    h = jax.nn.relu(jnp.einsum("bhd,bmd->bmh", W1, X) + b1[:, None])
    return jnp.einsum("bh,bmh->bm", W2, h) + b2[:, None]


def mlp_features(key: jax.Array, X: jax.Array, hidden: int) -> jax.Array:
    """φ(x) = W₂ relu(W₁x + b₁) + b₂, a random d → hidden → d network per prompt, weights N(0, 1) (official
    ``generate_data_mlp``, one per batch there)."""
    b, _, d = X.shape
    k1, k2, k3, k4 = jax.random.split(key, 4)
    W1 = draws.normal(k1, (b, hidden, d))
    b1 = draws.uniform(k2, (b, hidden), minval=-1, maxval=1) / jnp.sqrt(d)
    W2 = draws.normal(k3, (b, d, hidden))
    b2 = draws.uniform(k4, (b, d), minval=-1, maxval=1) / jnp.sqrt(hidden)
    h = jax.nn.relu(jnp.einsum("bhd,bmd->bmh", W1, X) + b1[:, None])
    return jnp.einsum("bdh,bmh->bmd", W2, h) + b2[:, None]


def sample(cfg: TaskLaws, key: jax.Array, batch: int, dtype=jnp.float32) -> Prompts:
    """``batch`` prompts of n examples and a query under ``cfg``'s law, each with its own task, in ``dtype``."""
    return jax.tree.map(lambda a: a.astype(dtype), _sample(cfg, key, batch, dtype))


def _sample(cfg: TaskLaws, key: jax.Array, batch: int, dtype) -> Prompts:
    kx, kt, kw = jax.random.split(key, 3)
    m = cfg.n + 1
    if cfg.task == "sine":
        x = draws.uniform(kx, (batch, m, 1), minval=-5.0, maxval=5.0)
        ka, kp = jax.random.split(kt)
        a = draws.uniform(ka, (batch, 1), minval=0.1, maxval=5.0)
        phase = draws.uniform(kp, (batch, 1), minval=0.0, maxval=jnp.pi)
        return Prompts(x, a * jnp.sin(phase + x[..., 0]))
    X = covariates(kx, (batch, m, cfg.d), cfg.covariates, cfg.shape_k, dtype)
    if cfg.task == "relu_net":
        return Prompts(X, relu_net(kt, X, cfg.hidden))
    if cfg.task == "mlp_features":
        X = mlp_features(kt, X, cfg.hidden)
    w = draws.normal(kw, (batch, cfg.d))
    return Prompts(X, jnp.einsum("bmd,bd->bm", X, w))
