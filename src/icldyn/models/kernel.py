"""Fused C kernels for the moment-form linear transformer (CPU): loss + gradient, and a sampler
that draws Gaussian prompts straight into their moments.

``_lsa_kernel.c`` is compiled on first use with the system C compiler (``-O3 -march=native``,
OpenMP when available), once per token dimension D = d + 1 (a compile-time constant, so the register-blocked
small products unroll), into a cache directory and called through :func:`jax.pure_callback`
inside a ``custom_vjp``: one call per training step returns the loss and the exact gradient with
respect to every P and Q (batch innermost, so the tiny products run as vector FMAs). Where no
compiler is found, :func:`available` is False and models fall back to the pure-JAX moment form,
which is also the reference the tests compare this kernel against.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SOURCE = Path(__file__).with_name("_lsa_kernel.c")
# fast-math reassociation vectorises the reductions; -fno-finite-math-only keeps NaN/Inf semantics so a
# diverging run shows NaN instead of a silently wrong loss
FLAGS = ["-O3", "-march=native", "-ffast-math", "-fno-finite-math-only", "-fopenmp", "-fPIC", "-std=c11"]
# Linked separately and without fast-math flags: linking with -ffast-math adds crtfastmath.o, which sets
# flush-to-zero for the whole process on load and silently changes every other library's arithmetic.
LINK = ["-shared", "-fopenmp"]
LIBS = ["-lmvec", "-lm"]  # glibc's vector math (vectorised log/cos in the sampler); after the objects
DMAX = 16  # largest D = d + 1 the kernels take (DMAX in the C source)


def _cpu_id() -> str:
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = ""
    return platform.machine() + flags


def _cache_dir() -> Path:
    return Path(os.environ.get("ICLDYN_KERNEL_CACHE", Path.home() / ".cache" / "icldyn" / "kernels"))


@functools.cache
def library(D: int) -> ctypes.CDLL | None:
    """The kernel compiled for token dimension D = d + 1 (a constant, so its small products unroll into
    registers; ≈ 2 s once per machine and D), building it if needed; None where no C compiler works."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None or os.environ.get("ICLDYN_NO_KERNEL") or not 2 <= D <= DMAX:
        return None
    flags = FLAGS + [f"-DDCONST={D}"]
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join(flags + LINK + LIBS).encode() + _cpu_id().encode())
    key = key.hexdigest()[:16]
    out = _cache_dir() / f"lsa{D}_{key}.so"
    for _ in range(2):  # a cached build that no longer loads is rebuilt once
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            tmp, obj = out.with_suffix(f".{os.getpid()}.tmp"), out.with_suffix(f".{os.getpid()}.o")
            steps = ([cc, *flags, "-c", str(SOURCE), "-o", str(obj)], [cc, *LINK, str(obj), "-o", str(tmp), *LIBS])
            ok = all(subprocess.run(cmd, capture_output=True).returncode == 0 for cmd in steps)
            obj.unlink(missing_ok=True)
            if not ok:
                return None
            os.replace(tmp, out)  # atomic: concurrent builders agree
        try:
            lib = ctypes.CDLL(str(out))
            break
        except OSError:
            out.unlink(missing_ok=True)
    else:
        return None
    i32, i64, u32p = ctypes.c_int, ctypes.c_long, ctypes.POINTER(ctypes.c_uint32)
    for suffix, real in (("f32", ctypes.c_float), ("f64", ctypes.c_double)):
        ptr = ctypes.POINTER(real)
        u8p = ctypes.POINTER(ctypes.c_uint8)
        fn = getattr(lib, f"lsa_{suffix}")  # (NS, L, H, D, B, P, Q, S, zq, y, loss, gP, gQ, mP, mQ, grad, threads)
        fn.restype, fn.argtypes = i32, [i32, i32, i32, i32, i64] + [ptr] * 8 + [u8p, u8p, i32, i32]
        fn = getattr(lib, f"sample_{suffix}")  # (NS, d, n, B, Ssq, Wsq, sigma, keys, S, zq, yq, threads)
        fn.restype, fn.argtypes = i32, [i32, i32, i32, i64, ptr, ptr, ptr, u32p, ptr, ptr, ptr, i32]
    return lib


def available(D: int) -> bool:
    """Whether the kernel for token dimension D = d + 1 builds here (and is built, on first call)."""
    return library(D) is not None


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
        raise RuntimeError(f"lsa kernel failed (code {rc}; D = {D} must be ≤ 16)")
    return loss.reshape(lead), gP.reshape(lead + P.shape[1:]), gQ.reshape(lead + Q.shape[1:])


def sample_moments_np(sigma_sqrt: np.ndarray, w_sqrt: np.ndarray, noise_std, key: np.ndarray, batch: int,
                      n: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fresh Gaussian prompts reduced to (Ŝ, z_q, y_q) as they are drawn (Philox4x32-10, Box-Muller):
    the law of :func:`icldyn.data.gaussian.sample_prompts` followed by ``moments``. ``key``: (..., 2)
    uint32; leading axes (seeds) broadcast."""
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
    S, zq = np.empty((ns, batch, d + 1, d + 1), dtype), np.empty((ns, batch, d + 1), dtype)
    yq = np.empty((ns, batch), dtype)
    rc = fn(ns, d, n, batch, _ptr(Ssq), _ptr(Wsq), _ptr(sig), keys.ctypes.data_as(ctypes.POINTER(ctypes.c_uint32)),
            _ptr(S), _ptr(zq), _ptr(yq), threads)
    if rc != 0:
        raise RuntimeError(f"prompt sampler failed (code {rc}; d = {d} must be ≤ 15)")
    return S.reshape(lead + S.shape[1:]), zq.reshape(lead + zq.shape[1:]), yq.reshape(lead + yq.shape[1:])


def sample_moments(task, key: jax.Array, batch: int, n: int, threads: int = 1):
    """JAX entry point of :func:`sample_moments_np`; ``key`` is a JAX PRNG key (its bits seed Philox).
    Under ``vmap`` over seeds, every seed is drawn in one call."""
    bits = jax.random.bits(key, (2,), jnp.uint32)
    dtype = task.sigma_sqrt.dtype
    d = task.sigma_sqrt.shape[0]
    shapes = (jax.ShapeDtypeStruct((batch, d + 1, d + 1), dtype), jax.ShapeDtypeStruct((batch, d + 1), dtype),
              jax.ShapeDtypeStruct((batch,), dtype))

    def f(s, w, e, k):
        out = sample_moments_np(np.asarray(s), np.asarray(w), np.asarray(e), np.asarray(k), batch, n, threads)
        return tuple(o.reshape(np.broadcast_shapes(s.shape[:-2], k.shape[:-1]) + o.shape[o.ndim - c:])
                     for o, c in zip(out, (3, 2, 1)))

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
