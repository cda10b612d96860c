"""optax optimisers built from a :class:`~icldyn.config.TrainConfig`: the plain names (adam, adamw, sgd, lbfgs;
constant, step, cosine), any optax optimiser or schedule by name with its keyword arguments (checked against
optax's signatures), or an optax object passed from Python."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from icldyn.config import TrainConfig, mode_of
from icldyn.errors import ConfigError
from icldyn.train.specs import NAMED_OPTIMIZERS, PYTHON_OPTIMIZER, optax_optimizers, schedule_kwargs, split


def clip_per_matrix(max_norm: float, matrix_ndim: int = 2) -> optax.GradientTransformation:
    """Clip the Frobenius norm of every trailing ``matrix_ndim``-D block of every leaf to ``max_norm``
    (as the official LinearTransformer code does with each d×d parameter matrix)."""

    def clip(g: jax.Array) -> jax.Array:
        axes = tuple(range(g.ndim - matrix_ndim, g.ndim))
        norm = jnp.sqrt(jnp.sum(jnp.square(g), axis=axes, keepdims=True))
        return g * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-30))

    return optax.stateless_with_tree_map(lambda g, _: clip(g))


class CurvatureGuardState(NamedTuple):
    inner: optax.OptState
    params: optax.Params  # the parameters and gradient the last step was taken at
    grads: optax.Updates
    count: jax.Array


def curvature_guard(inner: optax.GradientTransformation, tol: float = 1e-10) -> optax.GradientTransformation:
    """Take ``inner``'s (L-BFGS) step only while the last curvature pair satisfies sᵀy > ``tol``, as
    torch.optim.LBFGS keeps a pair only then: with s, y ≈ 0 at a minimum, optax's 1/(sᵀy) weights turn float32
    noise into huge steps. A failed pair leaves parameters and state as they are — on a fixed batch the run has
    converged and stays there, as the official notebook's loss does."""

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return CurvatureGuardState(inner.init(params), zeros, zeros, jnp.zeros((), jnp.int32))

    def update(updates, state, params=None):
        sy = sum(jnp.vdot(p - q, g - h) for p, q, g, h in zip(*(jax.tree.leaves(t) for t in (
            params, state.params, updates, state.grads))))
        ok = (state.count == 0) | (sy > tol)
        new, inner_state = inner.update(updates, state.inner, params)
        keep = lambda a, b: jnp.where(ok, a, b)  # noqa: E731
        out = jax.tree.map(lambda u: jnp.where(ok, u, jnp.zeros_like(u)), new)
        return out, CurvatureGuardState(*(jax.tree.map(keep, a, b) for a, b in (
            (inner_state, state.inner), (params, state.params), (updates, state.grads))), state.count + ok)

    return optax.GradientTransformation(init, update)


def learning_rate(learning_rate: float | jax.Array) -> optax.GradientTransformation:
    """Multiply updates by the peak ``learning_rate``, held in the optimiser state by ``optax.inject_hyperparams``
    (in the parameters' dtype): programs for different learning rates are then the same compiled program, and a
    learning-rate axis is a vmapped axis of the state (:func:`~icldyn.train.loop.train` with ``lrs``)."""
    return optax.inject_hyperparams(optax.scale)(step_size=learning_rate)


_INJECTED = type(jax.eval_shape(learning_rate(1.0).init, {}))  # optax's injected-hyperparameter state (traced only)


def is_learning_rate(state) -> bool:
    """Whether an optimiser-state node is :func:`learning_rate`'s."""
    return isinstance(state, _INJECTED) and set(state.hyperparams) == {"step_size"}


def schedule(cfg: TrainConfig) -> optax.Schedule:
    """The configured schedule as a factor of the peak rate (the peak rate is applied by :func:`learning_rate`)."""
    if cfg.schedule == "step":
        return optax.exponential_decay(1.0, cfg.decay_every, cfg.decay_factor, staircase=True)
    if cfg.schedule == "cosine":
        return optax.cosine_decay_schedule(1.0, cfg.steps)
    if cfg.schedule == "constant":
        return optax.constant_schedule(1.0)
    fn, kwargs = schedule_kwargs(cfg.schedule, cfg.steps)
    return fn(**kwargs)


def build_optimizer(cfg: TrainConfig, *, lr: float | jax.Array | None = None,
                    precondition: optax.GradientTransformation | None = None) -> optax.GradientTransformation:
    """Clipping (optional), a model's preconditioner (``precondition``, a transformation of the gradient), then
    the optimiser (adam / adamw / sgd(momentum) / L-BFGS, any optax optimiser by name with its keyword arguments)
    with the configured schedule as its learning rate, scaled by the peak learning rate (``lr``, default
    ``cfg.lr``) kept in the optimiser state: runs that differ only in it are one compiled program (and one vmapped
    program on a learning-rate axis). An optax object (from Python) is used as given, its updates multiplied by
    the schedule and the rate."""
    sched = schedule(cfg)
    if mode_of(cfg.optimizer) == "object":
        opt = optax.chain(cfg.optimizer, optax.scale_by_schedule(sched))
    elif cfg.optimizer == PYTHON_OPTIMIZER:
        raise ConfigError("train.optimizer was an optax.GradientTransformation passed from Python, which config.toml "
                          "cannot rebuild: run it again from Python with the object (or give the optimiser by name)")
    elif not isinstance(cfg.optimizer, str) or cfg.optimizer not in NAMED_OPTIMIZERS:
        name, kwargs = split(cfg.optimizer)
        opt = optax_optimizers()[name](learning_rate=sched, **kwargs)
    elif cfg.optimizer == "adam":
        opt = optax.adam(sched, b1=cfg.b1, b2=cfg.b2)
    elif cfg.optimizer == "adamw":
        opt = optax.adamw(sched, b1=cfg.b1, b2=cfg.b2, weight_decay=cfg.weight_decay)
    elif cfg.optimizer == "lbfgs":  # the two-loop direction, H₀ = (sᵀy / yᵀy) I; a fixed step, no line search
        opt = optax.chain(curvature_guard(optax.scale_by_lbfgs(cfg.lbfgs_memory)), optax.scale_by_learning_rate(sched))
    else:
        opt = optax.sgd(sched, momentum=cfg.momentum or None)
    opt = optax.chain(opt, learning_rate(cfg.lr if lr is None else lr))
    if precondition is not None:
        opt = optax.chain(precondition, opt)
    if cfg.clip > 0:
        clip = optax.clip_by_global_norm(cfg.clip) if cfg.clip_mode == "global" else clip_per_matrix(cfg.clip)
        opt = optax.chain(clip, opt)
    return opt
