"""optax optimisers built from a :class:`~icldyn.config.TrainConfig`: the plain names (adam, adamw, sgd, lbfgs;
constant, step, cosine), any optax optimiser or schedule by name with its keyword arguments (checked against
optax's signatures), or an optax object passed from Python."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from icldyn.config import NAMED_OPTIMIZERS, NAMED_SCHEDULES, PYTHON_OPTIMIZER, TrainConfig, mode_of
from icldyn.errors import ConfigError


def _functions(module, prefix: str, keep: Callable[[str, inspect.Signature], bool]) -> dict[str, Callable]:
    out = {}
    for name in dir(module):
        f = getattr(module, name)
        if name.startswith("_") or isinstance(f, type) or not callable(f):
            continue
        try:
            sig = inspect.signature(f)
        except (TypeError, ValueError):
            continue
        if keep(name, sig):
            out[prefix + name] = f
    return out


@functools.cache
def optax_optimizers() -> dict[str, Callable]:
    """name → optax's optimiser function: every public function of optax (and ``contrib.NAME`` of optax.contrib)
    whose first argument is ``learning_rate`` (the ``scale_by_*`` transformations left out)."""
    keep = lambda name, sig: (not name.startswith("scale_by_")  # noqa: E731
                              and list(sig.parameters)[:1] == ["learning_rate"])
    return {**_functions(optax, "", keep), **_functions(optax.contrib, "contrib.", keep)}


@functools.cache
def optax_schedules() -> dict[str, Callable]:
    """name → optax's schedule function (optax.schedules, the hyperparameter injectors left out)."""
    return _functions(optax.schedules, "", lambda name, sig: not name.startswith("inject"))


def _split(spec: Any) -> tuple[str, dict[str, Any]]:
    return (spec, {}) if isinstance(spec, str) else (spec["name"], {k: v for k, v in spec.items() if k != "name"})


def _bind(field: str, name: str, fn: Callable, kwargs: dict[str, Any], given: tuple[str, ...]) -> None:
    """Refuse keyword arguments ``fn`` does not take and required ones not given (``given``: those icldyn passes)."""
    params = inspect.signature(fn).parameters
    takes = [p for p in params if p not in given and params[p].kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                                         inspect.Parameter.KEYWORD_ONLY)]
    for k in kwargs:
        if k in given:
            what = "train.lr (and its schedule train.schedule)" if field == "optimizer" else "its place"
            raise ConfigError(f"train.{field} = {name!r}: {k} is set by icldyn, not here: give it as {what}")
        if k not in takes:
            raise ConfigError(f"train.{field} = {name!r}: optax.{name} takes no argument {k!r}; allowed: "
                              + (", ".join(takes) or "none"))
    missing = [p for p in takes if params[p].default is inspect.Parameter.empty and p not in kwargs]
    if missing:
        raise ConfigError(f"train.{field} = {name!r}: optax.{name} needs {', '.join(missing)}: write train.{field} "
                          f"= {{name = \"{name}\", {missing[0]} = …}}")


def _brief(err: Exception) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"[:200]


@functools.lru_cache(maxsize=256)
def _probe(fn: Callable, items: tuple) -> None:
    """Build the optimiser and take one update on a two-parameter tree: one that needs more than (grads, state,
    params), a line search's loss value, say, fails here, before anything trains."""
    opt = fn(learning_rate=1.0, **dict(items))
    params = {"w": jnp.zeros(2), "v": jnp.ones((2, 2))}
    jax.eval_shape(lambda p: opt.update(jax.tree.map(jnp.ones_like, p), opt.init(p), p), params)  # traced only


def check_optimizer(spec: Any) -> None:
    """``train.optimizer``: a plain name, an optax optimiser's name or table, or an optax object; one-line
    ConfigError naming the field and what is allowed otherwise."""
    mode = mode_of(spec)
    if mode == "object":
        if not isinstance(spec, optax.GradientTransformation):
            raise ConfigError(f"train.optimizer = {type(spec).__name__} object is not allowed: must be a name, a "
                              "table {name = …, …} or an optax.GradientTransformation")
        return
    name, kwargs = _split(spec)
    if isinstance(spec, str) and name in (*NAMED_OPTIMIZERS, PYTHON_OPTIMIZER):
        return
    if name not in optax_optimizers():
        raise ConfigError(f"train.optimizer = {name!r} is not allowed: must be one of {', '.join(NAMED_OPTIMIZERS)} "
                          "or an optax optimiser: " + ", ".join(sorted(optax_optimizers())))
    fn = optax_optimizers()[name]
    _bind("optimizer", name, fn, kwargs, ("learning_rate",))
    try:
        _probe(fn, tuple(sorted((k, _hashable(v)) for k, v in kwargs.items())))
    except Exception as err:  # noqa: BLE001 — any failure of optax's constructor or update is the config's fault
        raise ConfigError(f"train.optimizer = {spec!r} cannot train here (one update on a small tree failed: "
                          f"{_brief(err)}); allowed: optimisers whose update takes (grads, state, params)") from None


def _hashable(v: Any) -> Any:
    return tuple(map(_hashable, v)) if isinstance(v, list) else v


def schedule_kwargs(spec: Any, steps: int) -> tuple[Callable, dict[str, Any]]:
    """An optax schedule's function and its keyword arguments, the unset ones that icldyn fills in: values are
    factors of train.lr (peak_value = 1; init_value = 0 beside a peak_value, else 1; value = 1) and
    decay_steps / transition_steps = train.steps."""
    name, kwargs = _split(spec)
    fn = optax_schedules()[name]
    params = inspect.signature(fn).parameters
    fill = {"peak_value": 1.0, "init_value": 0.0 if "peak_value" in params else 1.0, "value": 1.0,
            "decay_steps": steps, "transition_steps": steps}
    return fn, {**{k: v for k, v in fill.items() if k in params and params[k].default is inspect.Parameter.empty},
                **kwargs}


def check_schedule(spec: Any, steps: int) -> None:
    """``train.schedule``: a plain name or an optax schedule's name or table, whose factor is finite over the run."""
    name, _ = _split(spec)
    if isinstance(spec, str) and name in NAMED_SCHEDULES:
        return
    if name not in optax_schedules():
        raise ConfigError(f"train.schedule = {name!r} is not allowed: must be one of {', '.join(NAMED_SCHEDULES)} or "
                          "an optax schedule: " + ", ".join(sorted(optax_schedules())))
    fn, full = schedule_kwargs(spec, steps)
    _bind("schedule", name, fn, full, ())
    try:
        values = [float(fn(**full)(t)) for t in (0, steps // 2, steps)]
    except Exception as err:  # noqa: BLE001 — optax's constructor refusing the arguments is the config's fault
        raise ConfigError(f"train.schedule = {spec!r} cannot be built: {_brief(err)}") from None
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"train.schedule = {spec!r} is not finite over train.steps = {steps} (at steps 0, "
                          f"{steps // 2}, {steps}: {values})")


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


_INJECTED = type(learning_rate(1.0).init({}))  # optax's state of an injected hyperparameter


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
        name, kwargs = _split(cfg.optimizer)
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
