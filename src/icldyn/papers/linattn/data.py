"""The official code's data laws (``linear_transformer.generate_data``), in JAX: covariates and per-prompt tasks.
Every draw comes from an explicit key."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from icldyn.papers.ahn.data import Prompts
from icldyn.papers.linattn.config import TaskLaws


def covariates(key: jax.Array, shape: tuple[int, ...], law: str, shape_k: float = 0.1, dtype=jnp.float32) -> jax.Array:
    """x of ``shape`` (…, d): ``normal`` N(0, I_d); ``sphere`` x/‖x‖; ``gamma`` x/‖x‖ · r with
    r² ~ Gamma(shape_k, scale √(10/shape_k)) — the official code's calibration, under which shape_k = 5/2 at d = 5
    gives ‖x‖² ~ χ²₅, i.e. N(0, I_5)."""
    kx, kr = jax.random.split(key)
    x = jax.random.normal(kx, shape, dtype)
    if law == "normal":
        return x
    u = x / jnp.linalg.norm(x, axis=-1, keepdims=True)
    if law == "sphere":
        return u
    r2 = jax.random.gamma(kr, shape_k, shape[:-1], dtype) * jnp.sqrt(10.0 / shape_k)
    return u * jnp.sqrt(r2)[..., None]


def relu_net(key: jax.Array, X: jax.Array, hidden: int, std: float = 0.1) -> jax.Array:
    """y = W₂ relu(W₁x + b₁) + b₂ per prompt (X: (b, m, d)), weights N(0, std²), biases U(±1/√fan-in) (PyTorch's
    default, as in the official ``generate_data_relu``; it draws one network per batch, here one per prompt)."""
    b, _, d = X.shape
    k1, k2, k3, k4 = jax.random.split(key, 4)
    W1 = std * jax.random.normal(k1, (b, hidden, d))
    b1 = jax.random.uniform(k2, (b, hidden), minval=-1, maxval=1) / jnp.sqrt(d)
    W2 = std * jax.random.normal(k3, (b, hidden))
    b2 = jax.random.uniform(k4, (b,), minval=-1, maxval=1) / jnp.sqrt(hidden)
    h = jax.nn.relu(jnp.einsum("bhd,bmd->bmh", W1, X) + b1[:, None])
    return jnp.einsum("bh,bmh->bm", W2, h) + b2[:, None]


def mlp_features(key: jax.Array, X: jax.Array, hidden: int) -> jax.Array:
    """φ(x) = W₂ relu(W₁x + b₁) + b₂, a random d → hidden → d network per prompt, weights N(0, 1) (official
    ``generate_data_mlp``, one per batch there)."""
    b, _, d = X.shape
    k1, k2, k3, k4 = jax.random.split(key, 4)
    W1 = jax.random.normal(k1, (b, hidden, d))
    b1 = jax.random.uniform(k2, (b, hidden), minval=-1, maxval=1) / jnp.sqrt(d)
    W2 = jax.random.normal(k3, (b, d, hidden))
    b2 = jax.random.uniform(k4, (b, d), minval=-1, maxval=1) / jnp.sqrt(hidden)
    h = jax.nn.relu(jnp.einsum("bhd,bmd->bmh", W1, X) + b1[:, None])
    return jnp.einsum("bdh,bmh->bmd", W2, h) + b2[:, None]


def sample(cfg: TaskLaws, key: jax.Array, batch: int, dtype=jnp.float32) -> Prompts:
    """``batch`` prompts of n examples and a query under ``cfg``'s law, each with its own task, in ``dtype``."""
    return jax.tree.map(lambda a: a.astype(dtype), _sample(cfg, key, batch, dtype))


def _sample(cfg: TaskLaws, key: jax.Array, batch: int, dtype) -> Prompts:
    kx, kt, kw = jax.random.split(key, 3)
    m = cfg.n + 1
    if cfg.task == "sine":
        x = jax.random.uniform(kx, (batch, m, 1), minval=-5.0, maxval=5.0)
        ka, kp = jax.random.split(kt)
        a = jax.random.uniform(ka, (batch, 1), minval=0.1, maxval=5.0)
        phase = jax.random.uniform(kp, (batch, 1), minval=0.0, maxval=jnp.pi)
        return Prompts(x, a * jnp.sin(phase + x[..., 0]))
    X = covariates(kx, (batch, m, cfg.d), cfg.covariates, cfg.shape_k, dtype)
    if cfg.task == "relu_net":
        return Prompts(X, relu_net(kt, X, cfg.hidden))
    if cfg.task == "mlp_features":
        X = mlp_features(kt, X, cfg.hidden)
    w = jax.random.normal(kw, (batch, cfg.d))
    return Prompts(X, jnp.einsum("bmd,bd->bm", X, w))
