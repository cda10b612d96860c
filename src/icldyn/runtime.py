"""JAX process set-up at the entry points (CLI, tests, benchmarks): float64 available on request
(every array's dtype is chosen explicitly by the code) and the persistent compilation cache, so a
second run of the same program shapes skips XLA compilation.

Caches live under ``$XDG_CACHE_HOME/icldyn`` (default ``~/.cache/icldyn``): ``jax/`` (compiled XLA
programs; ``ICLDYN_JAX_CACHE`` overrides) and ``kernels/`` (the C kernel's libraries and build logs;
``ICLDYN_KERNEL_CACHE`` overrides).
"""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path

import jax
import numpy as np


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/icldyn``, or ``~/.cache/icldyn``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "icldyn"


def jax_cache_dir() -> Path:
    env = os.environ.get("ICLDYN_JAX_CACHE")
    return Path(env) if env else cache_root() / "jax"


def setup_jax(cache_dir: str | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", cache_dir or str(jax_cache_dir()))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _x64():
    """``jax.enable_x64(True)`` (JAX ≥ 0.6), or ``jax.experimental.enable_x64()`` on older JAX."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is not None:
        return ctx(True)
    from jax.experimental import enable_x64  # pragma: no cover  (JAX < 0.6)

    return enable_x64()


def _to64(x):
    if isinstance(x, jax.Array) and jax.numpy.issubdtype(x.dtype, jax.numpy.floating):
        return x.astype(jax.numpy.float64)
    if isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating):
        return x.astype(np.float64)
    return x


def float64(fn):
    """Run ``fn`` in float64 whatever JAX's x64 flag (closed forms from a plain ``python -c``): called with
    concrete values, its floating arrays are cast to float64 and it runs with x64 enabled; called inside a trace
    (``jit``, ``grad``, ``vmap``: tracer arguments), it keeps the caller's dtype, as a trainer's float32 loss."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
            return fn(*args, **kwargs)
        if jax.config.jax_enable_x64:  # already on (the CLI, the tests): no context, so no new jit cache keys
            return fn(*jax.tree.map(_to64, args), **jax.tree.map(_to64, kwargs))
        with _x64():
            args, kwargs = jax.tree.map(_to64, (args, kwargs))
            return fn(*args, **kwargs)

    return wrapper


def float64_module(namespace: dict) -> None:
    """Wrap every public function defined in a module (its ``globals()``) with :func:`float64`."""
    for name, obj in list(namespace.items()):
        if (inspect.isfunction(obj) and not name.startswith("_")
                and obj.__module__ == namespace["__name__"]):
            namespace[name] = float64(obj)
