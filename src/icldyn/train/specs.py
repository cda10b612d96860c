"""optax optimisers and schedules named in a config (``train.optimizer``, ``train.schedule``): the plain names, any
optax function by name with its keyword arguments checked against its signature (``inspect.signature``), and the
record of an optax object passed from Python. Imports no other icldyn module but the errors (the config imports
this one), and optax only when a check needs it."""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

from icldyn.errors import ConfigError

NAMED_OPTIMIZERS = ("adam", "adamw", "sgd", "lbfgs")  # plain names read train.b1, b2, weight_decay, momentum, …
NAMED_SCHEDULES = ("constant", "step", "cosine")
PYTHON_OPTIMIZER = "<optax.GradientTransformation from Python>"  # how config.toml records an optax object


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
    import optax

    keep = lambda name, sig: (not name.startswith("scale_by_")  # noqa: E731
                              and list(sig.parameters)[:1] == ["learning_rate"])
    return {**_functions(optax, "", keep), **_functions(optax.contrib, "contrib.", keep)}


@functools.cache
def optax_schedules() -> dict[str, Callable]:
    """name → optax's schedule function (optax.schedules, the hyperparameter injectors left out)."""
    import optax

    return _functions(optax.schedules, "", lambda name, sig: not name.startswith("inject"))


def split(spec: Any) -> tuple[str, dict[str, Any]]:
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


_CHECKED: dict[tuple, Any] = {}  # (function, its keyword arguments' repr, …) → what the check found


def _once(key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per key (a config is validated again at every grid point)."""
    if key not in _CHECKED:
        _CHECKED[key] = compute()
    return _CHECKED[key]


def _probe(fn: Callable, kwargs: dict[str, Any]) -> None:
    """Build the optimiser and take one update on a two-parameter tree: one that needs more than (grads, state,
    params), a line search's loss value, say, fails here, before anything trains."""
    import jax
    import jax.numpy as jnp

    opt = fn(learning_rate=1.0, **kwargs)
    params = {"w": jnp.zeros(2), "v": jnp.ones((2, 2))}
    jax.eval_shape(lambda p: opt.update(jax.tree.map(jnp.ones_like, p), opt.init(p), p), params)  # traced only


def check_optimizer(spec: Any) -> None:
    """``train.optimizer``: a plain name, an optax optimiser's name or table, or an optax object; one-line
    ConfigError naming the field and what is allowed otherwise."""
    if isinstance(spec, str) and spec in (*NAMED_OPTIMIZERS, PYTHON_OPTIMIZER):
        return
    if not isinstance(spec, (str, dict)):
        import optax

        if not isinstance(spec, optax.GradientTransformation):
            raise ConfigError(f"train.optimizer = {type(spec).__name__} object is not allowed: must be a name, a "
                              "table {name = …, …} or an optax.GradientTransformation")
        return
    name, kwargs = split(spec)
    if name not in optax_optimizers():
        raise ConfigError(f"train.optimizer = {name!r} is not allowed: must be one of {', '.join(NAMED_OPTIMIZERS)} "
                          "or an optax optimiser: " + ", ".join(sorted(optax_optimizers())))
    fn = optax_optimizers()[name]
    _bind("optimizer", name, fn, kwargs, ("learning_rate",))
    try:
        _once((fn, repr(sorted(kwargs.items()))), lambda: _probe(fn, kwargs))
    except Exception as err:  # noqa: BLE001 — any failure of optax's constructor or update is the config's fault
        raise ConfigError(f"train.optimizer = {spec!r} cannot train here (one update on a small tree failed: "
                          f"{_brief(err)}); allowed: optimisers whose update takes (grads, state, params)") from None


def schedule_kwargs(spec: Any, steps: int) -> tuple[Callable, dict[str, Any]]:
    """An optax schedule's function and its keyword arguments, the unset ones that icldyn fills in: values are
    factors of train.lr (peak_value = 1; init_value = 0 beside a peak_value, else 1; value = 1) and
    decay_steps / transition_steps = train.steps."""
    name, kwargs = split(spec)
    fn = optax_schedules()[name]
    params = inspect.signature(fn).parameters
    fill = {"peak_value": 1.0, "init_value": 0.0 if "peak_value" in params else 1.0, "value": 1.0,
            "decay_steps": steps, "transition_steps": steps}
    return fn, {**{k: v for k, v in fill.items() if k in params and params[k].default is inspect.Parameter.empty},
                **kwargs}


def _factors(fn: Callable, kwargs: dict[str, Any], steps: int) -> list[float]:
    sched = fn(**kwargs)
    return [float(sched(t)) for t in (0, steps // 2, steps)]


def check_schedule(spec: Any, steps: int) -> None:
    """``train.schedule``: a plain name or an optax schedule's name or table, whose factor is finite over the run."""
    name, _ = split(spec)
    if isinstance(spec, str) and name in NAMED_SCHEDULES:
        return
    if name not in optax_schedules():
        raise ConfigError(f"train.schedule = {name!r} is not allowed: must be one of {', '.join(NAMED_SCHEDULES)} or "
                          "an optax schedule: " + ", ".join(sorted(optax_schedules())))
    fn, full = schedule_kwargs(spec, steps)
    _bind("schedule", name, fn, full, ())
    try:
        values = _once((fn, repr(sorted(full.items())), steps), lambda: _factors(fn, full, steps))
    except Exception as err:  # noqa: BLE001 — optax's constructor refusing the arguments is the config's fault
        raise ConfigError(f"train.schedule = {spec!r} cannot be built: {_brief(err)}") from None
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(f"train.schedule = {spec!r} is not finite over train.steps = {steps} (at steps 0, "
                          f"{steps // 2}, {steps}: {values})")
