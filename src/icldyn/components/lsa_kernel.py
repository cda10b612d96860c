"""Fused C kernels of the L-layer attention (CPU): loss + gradient of the moment-form linear transformer
(:func:`loss`), loss + gradient of the column form with an activation — ReLU, softmax, linear
(:func:`attn_loss`) — and a sampler that draws Gaussian prompts straight into their moments or prompt matrices.

``_lsa_kernel.c`` (package data) is compiled on first use with the system C compiler, once per token
dimension D = d + 1 (a compile-time constant, so the register-blocked small products unroll), into a
cache folder, and called through :func:`jax.pure_callback` inside a ``custom_vjp``: one call per training
step returns the loss and the exact gradient with respect to every P and Q (batch innermost, so the tiny
products run as vector FMAs).

The build is visible and portable: it tries the fast flags (``-march=native``, OpenMP, glibc's vector
math), then the same without OpenMP, without libmvec and without ``-march=native``; each try's compiler
output is kept in ``<cache>/lsa<D>_<id>.log``. A library is cached per source, flags, CPU and compiler
identity; older libraries of the same D and compiler are pruned. Where no build works, :func:`status`
says why, one line is printed once per process, and models use the pure-JAX moment form, which is also
the reference the tests compare this kernel against. ``ICLDYN_NO_KERNEL=1`` disables the kernel;
``CC`` picks the compiler; ``ICLDYN_KERNEL_CACHE`` the cache folder (default
``$XDG_CACHE_HOME/icldyn/kernels``, i.e. ``~/.cache/icldyn/kernels``).
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
def _build(D: int) -> tuple[ctypes.CDLL | None, Status]:
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
                             + ident.encode()).hexdigest()[:16]
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
            why = _try_build(cc, src, out, flags, link, libs, log)
            if why is not None:
                first_reason = first_reason or why
                continue
            origin = "built"
        try:
            lib = ctypes.CDLL(str(out))
        except OSError as err:
            log.append(f"--- variant {name}: the library does not load: {err}")
            first_reason = first_reason or f"the built library does not load ({str(err)[:120]})"
            out.unlink(missing_ok=True)
            continue
        logfile = out.with_suffix(".log")
        if origin == "built":
            _write_log(logfile, log)
            _prune(folder, D, prefix, out)
        _declare(lib)
        built = name if first_reason is None else f"{name}, not a faster variant: {first_reason}"
        return lib, Status(True, origin, built, ident, str(out), str(logfile) if logfile.exists() else None)
    logfile = folder / f"lsa{D}_{ctag}_failed.log"
    _write_log(logfile, log)
    return unavailable("unavailable", f"{first_reason} (log: {logfile})", str(logfile))


def _write_log(path: Path, lines: list[str]) -> None:
    try:
        path.write_text("\n".join(lines) + "\n")
    except OSError:
        pass


def _declare(lib: ctypes.CDLL) -> None:
    i32, i64, u32p = ctypes.c_int, ctypes.c_long, ctypes.POINTER(ctypes.c_uint32)
    for suffix, real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        ptr = ctypes.POINTER(real)
        u8p = ctypes.POINTER(ctypes.c_uint8)
        fn = getattr(lib, f"lsa_{suffix}")  # (NS, L, H, D, B, P, Q, S, zq, y, loss, gP, gQ, mP, mQ, grad, threads)
        fn.restype, fn.argtypes = i32, [i32, i32, i32, i32, i64] + [ptr] * 8 + [u8p, u8p, i32, i32]
        fn = getattr(lib, f"sample_{suffix}")  # (NS, d, n, B, Ssq, Wsq, sigma, keys, S | Z, zq, yq, cols, threads)
        fn.restype, fn.argtypes = i32, [i32, i32, i32, i64, ptr, ptr, ptr, u32p, ptr, ptr, ptr, i32, i32]
        fn = getattr(lib, f"attn_{suffix}")  # (NS, L, H, D, N, B, act, P, Q, Z, y, loss, gP, gQ, grad, threads)
        fn.restype, fn.argtypes = i32, [i32, i32, i32, i32, i32, i64, i32] + [ptr] * 7 + [i32, i32]


_told: set[str] = set()


def library(D: int) -> ctypes.CDLL | None:
    """The kernel compiled for token dimension D = d + 1 (once per machine, compiler and D), or None
    where it cannot be built here (:func:`status` says why)."""
    return _build(D)[0]


def status(D: int) -> Status:
    """How the kernel for D stands: built, loaded from the cache, or unavailable and why."""
    return _build(D)[1]


def available(D: int) -> bool:
    """Whether the kernel for token dimension D = d + 1 builds here (and is built, on first call)."""
    return library(D) is not None


def explain_fallback(D: int) -> None:
    """Print, once per process, the one line that says the pure-JAX path replaces the kernel and why."""
    st = status(D)
    if not st.available and st.reason not in _told:
        _told.add(st.reason)
        print(f"C kernel unavailable: {st.reason}; using the pure-JAX path (slower)", file=sys.stderr, flush=True)


def _seeds(arrays: list[np.ndarray], core_ndims: list[int], dtype) -> tuple[tuple[int, ...], list[np.ndarray]]:
    """Broadcast the leading (seed) axes of every array and flatten them into one: (NS, *core)."""
    lead = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip(arrays, core_ndims)))
    flat = [np.ascontiguousarray(np.broadcast_to(a, lead + a.shape[a.ndim - k:]).reshape((-1,) + a.shape[a.ndim - k:]),
                                 dtype) for a, k in zip(arrays, core_ndims)]
    return lead, flat


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double if a.dtype == np.float64 else ctypes.c_float))


def value_and_grad_np(P: np.ndarray, Q: np.ndarray, S: np.ndarray, zq: np.ndarray, y: np.ndarray, *,
                      want_grad: bool = True, threads: int = 1, trained: tuple[np.ndarray, np.ndarray] | None = None):
    """Loss (1/B)Σ(z_L[d] + y)² and its gradient w.r.t. P, Q (each (..., L, H, D, D)); NumPy in and out.
    Leading axes (seeds) broadcast; all seeds run in one call, spread over ``threads``. Leading axes that only
    the parameters have (copies of a seed at several learning rates, sharing its batch) are looped over
    instead of copying the batch. ``trained``: (D, D) boolean masks of the P and Q entries whose gradient is
    wanted (others are returned as 0)."""
    dtype = np.float64 if S.dtype == np.float64 else np.float32
    lib = library(P.shape[-1])
    fn = lib.lsa_f64 if dtype == np.float64 else lib.lsa_f32
    lead = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip((P, Q, S, zq, y), (4, 4, 3, 2, 1))))
    data = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip((S, zq, y), (3, 2, 1))))
    data = (1,) * (len(lead) - len(data)) + data
    k = next((i for i, (a, b) in enumerate(zip(data, lead)) if a != 1 or b == 1), len(lead))
    if k and data[k:] == lead[k:]:  # parameters-only leading axes: one kernel call per copy, same batch
        inner = lead[k:]
        strip = lambda a, core: a.reshape(a.shape[max(a.ndim - core - len(inner), 0):])  # noqa: E731  (size-1 axes)
        Pb, Qb = (np.broadcast_to(a, lead + a.shape[-4:]).reshape((-1,) + inner + a.shape[-4:]) for a in (P, Q))
        parts = [value_and_grad_np(Pc, Qc, strip(S, 3), strip(zq, 2), strip(y, 1), want_grad=want_grad,
                                   threads=threads, trained=trained) for Pc, Qc in zip(Pb, Qb)]
        return tuple(np.stack([part[j] for part in parts]).reshape(lead + parts[0][j].shape[len(inner):])
                     for j in range(3))
    lead, (P, Q, S, zq, y) = _seeds([P, Q, S, zq, y], [4, 4, 3, 2, 1], dtype)
    ns, (L, H, D, _) = P.shape[0], P.shape[1:]
    loss, gP, gQ = np.zeros(ns, dtype), np.zeros_like(P), np.zeros_like(Q)
    mP, mQ = (np.ascontiguousarray(np.ones((D, D)) if m is None else m, np.uint8) for m in (trained or (None, None)))
    u8 = ctypes.POINTER(ctypes.c_uint8)
    rc = fn(ns, L, H, D, S.shape[1], *(_ptr(a) for a in (P, Q, S, zq, y, loss, gP, gQ)), mP.ctypes.data_as(u8),
            mQ.ctypes.data_as(u8), int(want_grad), threads)
    if rc != 0:
        raise RuntimeError(_failed("lsa kernel", rc, f"D = {D} must be ≤ 16"))
    return loss.reshape(lead), gP.reshape(lead + P.shape[1:]), gQ.reshape(lead + Q.shape[1:])


def _failed(what: str, rc: int, shapes: str) -> str:
    """A kernel's non-zero return code in words: 1, shapes it was not built for; 2, its scratch memory refused."""
    return f"{what} failed: " + ("out of memory for its scratch buffers" if rc == 2 else f"code {rc}; {shapes}")


ACTIVATIONS = ("linear", "relu", "softmax", "softmax_masked")  # the column kernel's codes 0…3


def attn_value_and_grad_np(P: np.ndarray, Q: np.ndarray, Z: np.ndarray, y: np.ndarray, activation: str, *,
                           want_grad: bool = True, threads: int = 1):
    """Loss (1/B)Σ([Z_L]_{d+1,n+1} + y)² of the column form with an activation (``model.forward_columns``) and its
    gradient w.r.t. P, Q (each (..., L, H, D, D)); Z: (..., B, D, n+1), y: (..., B). Leading (seed) axes
    broadcast and run in one call."""
    dtype = np.float64 if Z.dtype == np.float64 else np.float32
    lib = library(P.shape[-1])
    fn = lib.attn_f64 if dtype == np.float64 else lib.attn_f32
    lead, (P, Q, Z, y) = _seeds([P, Q, Z, y], [4, 4, 3, 1], dtype)
    ns, (L, H, D, _), (B, _, N) = P.shape[0], P.shape[1:], Z.shape[1:]
    loss, gP, gQ = np.zeros(ns, dtype), np.zeros_like(P), np.zeros_like(Q)
    rc = fn(ns, L, H, D, N, B, ACTIVATIONS.index(activation), *(_ptr(a) for a in (P, Q, Z, y, loss, gP, gQ)),
            int(want_grad), threads)
    if rc != 0:
        raise RuntimeError(_failed("attention kernel", rc, f"D = {D} must be ≤ 16, n ≥ 1"))
    return loss.reshape(lead), gP.reshape(lead + P.shape[1:]), gQ.reshape(lead + Q.shape[1:])


def sample_moments_np(sigma_sqrt: np.ndarray, w_sqrt: np.ndarray, noise_std, key: np.ndarray, batch: int,
                      n: int, threads: int = 1, columns: bool = False) -> tuple[np.ndarray, ...]:
    """Fresh Gaussian prompts reduced to (Ŝ, z_q, y_q) as they are drawn (Philox4x32-10, Box-Muller):
    the law of :func:`icldyn.components.prompts.sample_prompts` followed by ``moments``. ``key``: (..., 2)
    uint32; leading axes (seeds) broadcast. ``columns``: the same prompts as (Z_0, y_q) instead, Z_0 the prompt
    matrix (…, batch, d+1, n+1) of ``data.prompt_matrix``."""
    dtype = np.float64 if sigma_sqrt.dtype == np.float64 else np.float32
    lib = library(sigma_sqrt.shape[-1] + 1)
    fn = lib.sample_f64 if dtype == np.float64 else lib.sample_f32
    key = np.asarray(key, np.uint32)
    lead, (Ssq, Wsq, sig) = _seeds([sigma_sqrt, w_sqrt, np.asarray(noise_std)], [2, 2, 0], dtype)
    lead = np.broadcast_shapes(lead, key.shape[:-1])
    ns = int(np.prod(lead))
    Ssq, Wsq, sig = (np.ascontiguousarray(np.broadcast_to(a, (ns,) + a.shape[1:])) for a in (Ssq, Wsq, sig))
    keys = np.ascontiguousarray(np.broadcast_to(key, lead + (2,)).reshape(ns, 2))
    d = Ssq.shape[-1]
    S = np.empty((ns, batch, d + 1, n + 1 if columns else d + 1), dtype)
    zq = np.empty((ns, batch, d + 1), dtype) if not columns else np.empty((ns, 0, 0), dtype)
    yq = np.empty((ns, batch), dtype)
    rc = fn(ns, d, n, batch, _ptr(Ssq), _ptr(Wsq), _ptr(sig), keys.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
            _ptr(S), _ptr(zq), _ptr(yq), int(columns), threads)
    if rc != 0:
        raise RuntimeError(_failed("prompt sampler", rc, f"d = {d} must be ≤ 15"))
    out = (S, yq) if columns else (S, zq, yq)
    return tuple(a.reshape(lead + a.shape[1:]) for a in out)


def sample_moments(task, key: jax.Array, batch: int, n: int, threads: int = 1, columns: bool = False):
    """JAX entry point of :func:`sample_moments_np`; ``key`` is a JAX PRNG key (its bits seed Philox).
    Under ``vmap`` over seeds, every seed is drawn in one call."""
    bits = jax.random.bits(key, (2,), jnp.uint32)
    dtype = task.sigma_sqrt.dtype
    d = task.sigma_sqrt.shape[0]
    shapes = ((batch, d + 1, n + 1), (batch,)) if columns else ((batch, d + 1, d + 1), (batch, d + 1), (batch,))
    shapes = tuple(jax.ShapeDtypeStruct(s, dtype) for s in shapes)

    def f(s, w, e, k):
        out = sample_moments_np(np.asarray(s), np.asarray(w), np.asarray(e), np.asarray(k), batch, n, threads,
                                columns)
        return tuple(o.reshape(np.broadcast_shapes(s.shape[:-2], k.shape[:-1]) + o.shape[o.ndim - c:])
                     for o, c in zip(out, (3, 1) if columns else (3, 2, 1)))

    return jax.pure_callback(f, shapes, task.sigma_sqrt, task.w_sqrt, task.noise_std, bits, vmap_method="expand_dims")


def _callback(P, Q, S, zq, y, want_grad: bool, threads: int, trained):
    shapes = (jax.ShapeDtypeStruct((), S.dtype), jax.ShapeDtypeStruct(P.shape, S.dtype),
              jax.ShapeDtypeStruct(Q.shape, S.dtype))

    def f(*args):
        args = [np.asarray(a) for a in args]
        lead = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip(args, (4, 4, 3, 2, 1))))
        masks = None if trained is None else tuple(np.asarray(m, bool) for m in trained)
        loss, gP, gQ = value_and_grad_np(*args, want_grad=want_grad, threads=threads, trained=masks)
        return loss.reshape(lead), gP.reshape(lead + gP.shape[-4:]), gQ.reshape(lead + gQ.shape[-4:])

    return jax.pure_callback(f, shapes, P, Q, S, zq, y, vmap_method="expand_dims")


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6))
def loss(P, Q, S, zq, y, threads: int = 1, trained=None):
    """Mean squared readout error of the moment-form forward, differentiable in P and Q. ``trained``:
    optional hashable (P mask, Q mask), nested tuples of bools, of the entries a parameterisation trains;
    the gradient of the other entries is returned as 0 and not computed."""
    return _callback(P, Q, S, zq, y, False, threads, trained)[0]


def _fwd(P, Q, S, zq, y, threads, trained):
    value, gP, gQ = _callback(P, Q, S, zq, y, True, threads, trained)
    return value, (gP, gQ, S, zq, y)


def _bwd(threads, trained, res, g):
    gP, gQ, S, zq, y = res
    return g * gP, g * gQ, jnp.zeros_like(S), jnp.zeros_like(zq), jnp.zeros_like(y)


loss.defvjp(_fwd, _bwd)


def _attn_callback(P, Q, Z, y, activation: str, want_grad: bool, threads: int):
    shapes = (jax.ShapeDtypeStruct((), Z.dtype), jax.ShapeDtypeStruct(P.shape, Z.dtype),
              jax.ShapeDtypeStruct(Q.shape, Z.dtype))

    def f(*args):
        args = [np.asarray(a) for a in args]
        lead = np.broadcast_shapes(*(a.shape[: a.ndim - k] for a, k in zip(args, (4, 4, 3, 1))))
        loss, gP, gQ = attn_value_and_grad_np(*args, activation, want_grad=want_grad, threads=threads)
        return loss.reshape(lead), gP.reshape(lead + gP.shape[-4:]), gQ.reshape(lead + gQ.shape[-4:])

    return jax.pure_callback(f, shapes, P, Q, Z, y, vmap_method="expand_dims")


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def attn_loss(P, Q, Z, y, activation: str = "softmax", threads: int = 1):
    """Mean squared readout error of the column form with ``activation``, its loss and gradient fused in C."""
    return _attn_callback(P, Q, Z, y, activation, False, threads)[0]


def _attn_fwd(P, Q, Z, y, activation, threads):
    value, gP, gQ = _attn_callback(P, Q, Z, y, activation, True, threads)
    return value, (gP, gQ, Z, y)


def _attn_bwd(activation, threads, res, g):
    gP, gQ, Z, y = res
    return g * gP, g * gQ, jnp.zeros_like(Z), jnp.zeros_like(y)


attn_loss.defvjp(_attn_fwd, _attn_bwd)
