"""Fused C kernels of the L-layer attention (CPU): loss + gradient of the moment-form linear transformer
(:func:`loss`), loss + gradient of the column form with an activation — ReLU, softmax, linear
(:func:`attn_loss`) — and a sampler that draws Gaussian prompts straight into their moments or prompt matrices.

``_lsa_kernel.c`` (package data) is compiled on first use with the system C compiler, once per token
dimension D = d + 1 (a compile-time constant, so the register-blocked small products unroll), into a
cache folder, and called as an XLA custom call (its FFI handlers, :func:`jax.ffi.ffi_call`) inside a
``custom_vjp``: one call per training step returns the loss and the exact gradient with respect to every P and Q
(batch innermost, so the tiny products run as vector FMAs). XLA runs the call on its own thread, with no Python in
between, and a program that holds one is kept in JAX's persistent compilation cache like any other (a host
callback's program never was).

The build is visible and portable: it tries the fast flags (``-march=native``, OpenMP, glibc's vector
math), then the same without OpenMP, without libmvec and without ``-march=native``; each try's compiler
output is kept in ``<cache>/lsa<D>_<id>.log``; the FFI headers are jaxlib's (``jax.ffi.include_dir()``).
A library is cached per source, flags, CPU, compiler identity and jaxlib version; older libraries of the same D
and compiler are pruned. Where no build works, :func:`status` says why, one line is printed once per process, and
models use the pure-JAX moment form, which is also the reference the tests compare this kernel against.
``ICLDYN_NO_KERNEL=1`` disables the kernel; ``CC`` picks the compiler; ``ICLDYN_KERNEL_CACHE`` the cache folder
(default ``$XDG_CACHE_HOME/icldyn/kernels``, i.e. ``~/.cache/icldyn/kernels``).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.resources
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib.version
import numpy as np

from icldyn.runtime import cache_root, intact, publish

SOURCE_NAME = "_lsa_kernel.c"
# fast-math reassociation vectorises the reductions; -fno-finite-math-only keeps NaN/Inf semantics so a
# diverging run shows NaN instead of a silently wrong loss
BASE_FLAGS = ["-O3", "-ffast-math", "-fno-finite-math-only", "-fPIC", "-std=c11"]
# (name, extra compile flags, link flags, libraries): tried in order until one builds and loads. Linked
# separately and without fast-math flags: linking with -ffast-math adds crtfastmath.o, which sets
# flush-to-zero for the whole process on load and silently changes every other library's arithmetic.
VARIANTS = [
    ("native+openmp+libmvec", ["-march=native", "-fopenmp"], ["-shared", "-fopenmp"], ["-lmvec", "-lm"]),
    ("native+libmvec", ["-march=native"], ["-shared"], ["-lmvec", "-lm"]),
    ("native", ["-march=native", "-DLSA_NO_MVEC"], ["-shared"], ["-lm"]),
    ("portable", ["-DLSA_NO_MVEC"], ["-shared"], ["-lm"]),
]
# the XLA FFI headers the handlers are built against (jaxlib's own, ``jax.ffi.include_dir()``): part of a library's key
_FFI_HEADERS = f"jaxlib {jaxlib.version.__version__}"
DMAX = 16  # largest D = d + 1 the kernels take (DMAX in the C source)


@dataclass(frozen=True)
class Status:
    """How the kernel for one D stands in this process (recorded in every run's summary.json)."""

    available: bool
    origin: str  # built (this process) | cache (a library built earlier) | unavailable | disabled
    reason: str  # why unavailable; else the variant that built (e.g. native+openmp+libmvec)
    compiler: str  # the compiler's path and first line of ``--version``
    library: str | None  # path of the shared library
    log: str | None  # path of the compiler log

    def as_dict(self) -> dict:
        return asdict(self)


def _cpu_id() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = ""
    return platform.machine() + flags


def cache_dir() -> Path:
    env = os.environ.get("ICLDYN_KERNEL_CACHE")
    return Path(env) if env else cache_root() / "kernels"


def source() -> Path | None:
    """The kernel's C source as a file (shipped as package data), or None where it is missing."""
    try:
        path = Path(str(importlib.resources.files("icldyn.components") / SOURCE_NAME))
    except (ModuleNotFoundError, TypeError):
        return None
    return path if path.is_file() else None


def compiler() -> str | None:
    """The C compiler: ``$CC``, else ``cc``, else ``gcc``."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


@functools.cache
def _identity(cc: str) -> str:
    try:
        res = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        first = (res.stdout or res.stderr).strip().splitlines()
        return f"{cc}: {first[0]}" if res.returncode == 0 and first else f"{cc}: no version (exit {res.returncode})"
    except (OSError, subprocess.SubprocessError) as err:
        return f"{cc}: {type(err).__name__}"


def _first_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    hit = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "no output")
    return hit[:160]


def _try_build(cc: str, src: Path, out: Path, cflags: list[str], link: list[str], libs: list[str],
               log: list[str]) -> str | None:
    """Compile and link ``src`` into ``out`` (atomically); None on success, else a one-line reason."""
    tmp, obj = out.with_suffix(f".{os.getpid()}.tmp"), out.with_suffix(f".{os.getpid()}.o")
    try:
        for cmd in ([cc, *cflags, "-c", str(src), "-o", str(obj)], [cc, *link, str(obj), "-o", str(tmp), *libs]):
            log.append("$ " + " ".join(cmd))
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except (OSError, subprocess.SubprocessError) as err:
                log.append(str(err))
                return f"{Path(cc).name} could not run ({type(err).__name__})"
            log.append(res.stdout + res.stderr + f"[exit {res.returncode}]")
            if res.returncode != 0:
                return f"{Path(cc).name} failed (exit {res.returncode}): {_first_error(res.stdout + res.stderr)}"
        publish(tmp, out)  # atomic, its size and SHA-256 recorded beside it (checked before every load)
        return None
    finally:
        obj.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def _prune(directory: Path, D: int, prefix: str, keep: Path) -> None:
    """Remove older libraries (and logs) of the same D and compiler, and those named before libraries were
    keyed by compiler (``lsa<D>_<key>.so``, ``lsa_<key>.so``): the latest stays."""
    old = [p for p in directory.glob(prefix + "*") if p.suffix in (".so", ".log")]
    old += [p for p in directory.glob(f"lsa{D}_*.so") if p.stem.count("_") == 1]
    old += list(directory.glob("lsa_*.so"))
    for path in old:
        if path.name not in (keep.name, keep.with_suffix(".log").name):
            path.unlink(missing_ok=True)


@functools.cache
def _build(D: int) -> tuple[dict[str, str] | None, Status]:
    cc = compiler()
    ident = _identity(cc) if cc else "none found"
    unavailable = lambda origin, why, log=None: (None, Status(False, origin, why, ident, None, log))  # noqa: E731
    if os.environ.get("ICLDYN_NO_KERNEL"):
        return unavailable("disabled", "disabled by ICLDYN_NO_KERNEL")
    if not 2 <= D <= DMAX:
        return unavailable("unavailable", f"D = d + 1 = {D} is outside 2…{DMAX}")
    if cc is None:
        return unavailable("unavailable", "no C compiler found (install one, or set CC)")
    src = source()
    if src is None:
        return unavailable("unavailable", f"kernel source {SOURCE_NAME} is not installed with icldyn")
    folder = cache_dir()
    ctag = hashlib.sha256(ident.encode()).hexdigest()[:8]
    prefix = f"lsa{D}_{ctag}_"
    log: list[str] = [f"icldyn kernel build, D = {D}, compiler {ident}"]
    first_reason = None
    for name, cflags, link, libs in VARIANTS:
        flags = BASE_FLAGS + cflags + [f"-DDCONST={D}"]
        key = hashlib.sha256(src.read_bytes() + " ".join(flags + link + libs).encode() + _cpu_id().encode()
                             + ident.encode() + _FFI_HEADERS.encode()).hexdigest()[:16]
        out = folder / f"{prefix}{key}.so"
        origin = "cache"
        if out.exists() and not intact(out):  # truncated or changed since it was built: rebuilt, never loaded
            log.append(f"--- variant {name}: the cached {out.name} fails its size/SHA-256 check; rebuilding it")
            out.unlink(missing_ok=True)
        if not out.exists():
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                return unavailable("unavailable", f"cache folder {folder} is not writable ({err.strerror})")
            log.append(f"--- variant {name}")
            why = _try_build(cc, src, out, flags + ["-I", jax.ffi.include_dir()], link, libs, log)
            if why is not None:
                first_reason = first_reason or why
                continue
            origin = "built"
        try:
            targets = _register(ctypes.CDLL(str(out)), D, key)
        except (OSError, AttributeError, RuntimeError, ValueError) as err:  # not loaded, or its handlers refused
            log.append(f"--- variant {name}: the library does not load or register with XLA: {err}")
            first_reason = first_reason or f"the built library does not load ({str(err)[:120]})"
            out.unlink(missing_ok=True)
            continue
        logfile = out.with_suffix(".log")
        if origin == "built":
            _write_log(logfile, log)
            _prune(folder, D, prefix, out)
        built = name if first_reason is None else f"{name}, not a faster variant: {first_reason}"
        log_path = str(logfile) if logfile.exists() else None
        return targets, Status(True, origin, built, ident, str(out), log_path)
    logfile = folder / f"lsa{D}_{ctag}_failed.log"
    _write_log(logfile, log)
    return unavailable("unavailable", f"{first_reason} (log: {logfile})", str(logfile))


def _write_log(path: Path, lines: list[str]) -> None:
    try:
        path.write_text("\n".join(lines) + "\n")
    except OSError:
        pass


def _register(lib: ctypes.CDLL, D: int, key: str) -> dict[str, str]:
    """Register the library's three FFI handlers with XLA's CPU client under names of this D and build (so that a
    program compiled against one build never calls another's); returns {kernel: target name}."""
    names = {fn: f"icldyn_{fn}{D}_{key}" for fn in ("lsa", "attn", "sample")}
    for fn, name in names.items():
        if name not in _REGISTERED:  # XLA refuses a second handler under a name (a build loaded again, same code)
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, f"{fn}_ffi")), platform="cpu")
            _REGISTERED[name] = lib
    return names


_REGISTERED: dict[str, ctypes.CDLL] = {}  # XLA's CPU targets this process registered, and their libraries


_told: set[str] = set()


def status(D: int) -> Status:
    """How the kernel for D stands: built, loaded from the cache, or unavailable and why."""
    return _build(D)[1]


def available(D: int) -> bool:
    """Whether the kernel for token dimension D = d + 1 builds here (and is built, on first call)."""
    return _build(D)[0] is not None


def explain_fallback(D: int) -> None:
    """Print, once per process, the one line that says the pure-JAX path replaces the kernel and why."""
    st = status(D)
    if not st.available and st.reason not in _told:
        _told.add(st.reason)
        print(f"C kernel unavailable: {st.reason}; using the pure-JAX path (slower)", file=sys.stderr, flush=True)


ACTIVATIONS = ("linear", "relu", "softmax", "softmax_masked")  # the column kernel's codes 0…3


def _call(fn: str, D: int, dtype, args: list[tuple[jax.Array, int]], results: list[tuple[int, ...]], **attrs):
    """The kernel ``fn`` (lsa, attn, sample) of the library for D as an XLA custom call on ``args``, (array,
    number of its trailing core axes) pairs: float arrays in ``dtype``, their leading (seed) axes broadcast (padded
    with 1s to one count, which ``vmap`` then extends alike: every seed in one call); ``results``: each result's
    core shape, after the common leading axes."""
    args = [(a if a.dtype == jnp.uint32 else a.astype(dtype), k) for a, k in args]
    lead = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in args))
    padded = [a.reshape((1,) * (len(lead) - a.ndim + k) + a.shape) for a, k in args]
    shapes = tuple(jax.ShapeDtypeStruct(lead + core, dtype) for core in results)
    return jax.ffi.ffi_call(_build(D)[0][fn], shapes, vmap_method="expand_dims")(*padded, **attrs)


def _cotangent(g, grad, like):
    """The loss's cotangent ``g`` (one per seed) times its gradient, summed down to the shape of ``like`` (the
    parameter, whose seed axes may have broadcast), in its dtype."""
    out = g.reshape(g.shape + (1,) * 4) * grad
    out = out.sum(tuple(range(out.ndim - like.ndim)))
    axes = tuple(i for i, (a, b) in enumerate(zip(like.shape, out.shape)) if a == 1 and b != 1)
    return out.sum(axes, keepdims=True).astype(like.dtype)


def sample_moments(task, key: jax.Array, batch: int, n: int, threads: int = 1, columns: bool = False):
    """Fresh Gaussian prompts reduced to (Ŝ, z_q, y_q) as they are drawn (Philox4x32-10, Box-Muller): the law of
    :func:`icldyn.components.prompts.sample_prompts` followed by ``moments``; the bits of the JAX PRNG ``key``
    seed Philox. ``columns``: the same prompts as (Z_0, y_q) instead, Z_0 the prompt matrix (…, batch, d+1, n+1) of
    ``data.prompt_matrix``. Under ``vmap`` over seeds, every seed is drawn in one call."""
    d = task.sigma_sqrt.shape[-1]
    args = [(task.sigma_sqrt, 2), (jnp.asarray(task.w_sqrt), 2), (jnp.asarray(task.noise_std), 0),
            (jax.random.bits(key, (2,), jnp.uint32), 1)]
    cores = [(batch, d + 1, n + 1), (batch,)] if columns else [(batch, d + 1, d + 1), (batch, d + 1), (batch,)]
    return _call("sample", d + 1, task.sigma_sqrt.dtype, args, cores, threads=np.int32(threads), n=np.int32(n),
                 columns=np.int32(columns))


def _lsa(P, Q, S, zq, y, want_grad: bool, threads: int, trained):
    masks = {} if trained is None else {"trained": "".join("1" if v else "0" for v in np.ravel(trained))}
    return _call("lsa", P.shape[-1], S.dtype, [(P, 4), (Q, 4), (S, 3), (zq, 2), (y, 1)],
                 [(), P.shape[-4:], Q.shape[-4:]], threads=np.int32(threads), want_grad=np.int32(want_grad), **masks)


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def loss(P, Q, S, zq, y, threads: int = 1, trained=None):
    """Mean squared readout error of the moment-form forward, differentiable in P and Q. ``trained``:
    optional hashable (P mask, Q mask), nested tuples of bools, of the entries a parameterisation trains;
    the gradient of the other entries is returned as 0 and not computed. Leading (seed) axes broadcast: one loss
    per seed."""
    return _lsa(P, Q, S, zq, y, False, threads, trained)[0]


def _fwd(P, Q, S, zq, y, threads, trained):
    value, gP, gQ = _lsa(P, Q, S, zq, y, True, threads, trained)
    return value, (gP, gQ, P, Q, S, zq, y)


def _bwd(threads, trained, res, g):
    gP, gQ, P, Q, S, zq, y = res
    return _cotangent(g, gP, P), _cotangent(g, gQ, Q), jnp.zeros_like(S), jnp.zeros_like(zq), jnp.zeros_like(y)


loss.defvjp(_fwd, _bwd)


def _attn(P, Q, Z, y, activation: str, want_grad: bool, threads: int):
    return _call("attn", P.shape[-1], Z.dtype, [(P, 4), (Q, 4), (Z, 3), (y, 1)], [(), P.shape[-4:], Q.shape[-4:]],
                 act=np.int32(ACTIVATIONS.index(activation)), threads=np.int32(threads), want_grad=np.int32(want_grad))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def attn_loss(P, Q, Z, y, activation: str = "softmax", threads: int = 1):
    """Mean squared readout error of the column form with ``activation``, its loss and gradient fused in C. Leading
    (seed) axes broadcast: one loss per seed."""
    return _attn(P, Q, Z, y, activation, False, threads)[0]


def _attn_fwd(P, Q, Z, y, activation, threads):
    value, gP, gQ = _attn(P, Q, Z, y, activation, True, threads)
    return value, (gP, gQ, P, Q, Z, y)


def _attn_bwd(activation, threads, res, g):
    gP, gQ, P, Q, Z, y = res
    return _cotangent(g, gP, P), _cotangent(g, gQ, Q), jnp.zeros_like(Z), jnp.zeros_like(y)


attn_loss.defvjp(_attn_fwd, _attn_bwd)
