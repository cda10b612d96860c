"""JAX process set-up at the entry points (CLI, tests, benchmarks): float64 available on request
(every array's dtype is chosen explicitly by the code) and the persistent compilation cache, so a
second run of the same program shapes skips XLA compilation.

Caches live under ``$XDG_CACHE_HOME/icldyn`` (default ``~/.cache/icldyn``): ``jax/`` (compiled XLA
programs; ``ICLDYN_JAX_CACHE`` overrides) and ``kernels/`` (the C kernel's libraries and build logs;
``ICLDYN_KERNEL_CACHE`` overrides).
"""

from __future__ import annotations

import functools
import hashlib
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


def _seal_of(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def publish(tmp: Path, path: Path) -> None:
    """Move a freshly built artifact (a shared library) from ``tmp`` to ``path``, its size and SHA-256 recorded
    beside it first (``<path>.sha256``), so that :func:`intact` can tell a later truncation or change; seals left
    by libraries no longer there are removed."""
    seal, part = _seal_of(path), _seal_of(tmp)
    part.write_text(f"{tmp.stat().st_size} {_sha256(tmp)}\n")
    os.replace(part, seal)
    os.replace(tmp, path)  # atomic: concurrent builders agree
    for old in path.parent.glob("*.sha256"):
        if not old.with_name(old.name.removesuffix(".sha256")).exists():
            old.unlink(missing_ok=True)


def intact(path: Path) -> bool:
    """Whether ``path`` has the size and SHA-256 recorded when it was published (:func:`publish`); False where it,
    or its record, is missing, truncated or changed — it is then to be rebuilt, never loaded (a truncated shared
    library with a valid header is mapped by ``dlopen`` and kills the process with SIGBUS when run)."""
    try:
        size, digest = _seal_of(path).read_text().split()
        return path.stat().st_size == int(size) and _sha256(path) == digest
    except (OSError, ValueError):
        return False


def available_memory() -> int | None:
    """Bytes the default device can still allocate: an accelerator's free memory, or on a CPU the smallest of the
    system's available memory, this process's cgroup limit (a container, a batch job) and its address-space limit
    (``ulimit -v``) less the address space it already maps; None where unknown."""
    dev = jax.devices()[0]
    if dev.platform != "cpu":
        stats = dev.memory_stats() or {}
        return stats["bytes_limit"] - stats.get("bytes_in_use", 0) if "bytes_limit" in stats else None
    out = []
    try:
        with open("/proc/meminfo") as f:
            out += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError):
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            cap = Path(limit).read_text().strip()
            if cap != "max" and int(cap) < 1 << 60:
                out.append(int(cap) - int(Path(used).read_text()))
            break
        except (OSError, ValueError):
            continue
    try:
        import resource

        cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        if cap != resource.RLIM_INFINITY:
            with open("/proc/self/status") as f:
                mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
            out.append(cap - mapped)
    except (OSError, ValueError, StopIteration, ImportError):
        pass
    return min(out) if out else None


class TooBig(ValueError):
    """A program whose arrays cannot fit in this machine's memory: refused before it compiles, in one line."""


def check_fits(what: str, needed: int, hint: str) -> None:
    """Raise :class:`TooBig` where ``needed`` bytes exceed :func:`available_memory`."""
    free = available_memory()
    if free is not None and needed > free:
        raise TooBig(f"{what} needs at least {needed / 2**30:.3g} GiB, and this machine has {free / 2**30:.3g} GiB "
                     f"available; {hint}")


def setup_jax(cache_dir: str | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", cache_dir or str(jax_cache_dir()))
    # every program, however quick to compile: eager operations compile one small program per shape (25-50 ms each,
    # hundreds of them in a paper's quick verify), and each later process (a CLI run, a test's subprocess) reads them
    # back instead, 3x faster (docs/performance.md §10, "The suite's time")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


# XLA's CPU backend at LLVM O1 without its expensive passes, its elementwise fusions emitted by the classic emitter
# instead of the MLIR fusion emitters: a program that runs once (an initialisation, a test's reference draw) compiles
# in about half the time — its threefry hashes above all (a `tiny` GPT's initialisation 1.9 s → 0.8 s) — with the
# same bits (tested: normals and uniforms, float32 and float64, a GPT's initialisation); a program that runs many
# times keeps the default (the classic emitter ran the `tiny` GPT's training chunk 7% slower: docs/performance.md §10)
RUN_ONCE = {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True,
            "xla_cpu_use_fusion_emitters": False}


def jit_once(fn, **jit_kwargs):
    """``jax.jit(fn, **jit_kwargs)`` for a program that runs once: compiled at :data:`RUN_ONCE` on a CPU, at the
    defaults on another backend and when called inside a trace (JAX takes compiler options for the outermost program
    only: an argument a tracer, or a trace with concrete arguments alone, which JAX refuses in one ValueError before
    anything runs). Where this jaxlib lacks one of the options (``jax>=0.7`` is allowed), every call is a plain
    program, found at the first. ``jit_kwargs``: ``jax.jit``'s other arguments (the compiler options are this
    helper's)."""
    once, plain = jax.jit(fn, compiler_options=RUN_ONCE, **jit_kwargs), jax.jit(fn, **jit_kwargs)
    unknown_option = False  # set at the first "No such compile option": later calls go straight to the plain program

    @functools.wraps(fn)
    def call(*args, **kwargs):
        nonlocal unknown_option
        traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs)))
        if traced or unknown_option or jax.default_backend() != "cpu":
            return plain(*args, **kwargs)
        try:
            return once(*args, **kwargs)
        except ValueError as err:  # a trace with concrete arguments only
            if "compiler_options" not in str(err):
                raise
        except RuntimeError as err:  # jax.errors.JaxRuntimeError, before anything runs
            if "No such compile option" not in str(err):
                raise
            unknown_option = True
        return plain(*args, **kwargs)

    return call


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
