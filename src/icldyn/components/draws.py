"""Gaussian and uniform draws that compile once per size class, not once per shape.

An eager ``jax.random.normal(key, shape)`` (a held-out set, a Monte-Carlo sample, a model's initialisation) is a
program of its own for every shape it is asked for, and XLA takes 0.2-0.5 s on a CPU core to compile one (the
threefry hash; measured: 111 of them, 63 s, in the test suite's inner loop). With JAX's partitionable threefry
(``jax_threefry_partitionable``, the default since JAX 0.5) element i of a draw depends on the key and i alone, so
the first ``size`` values of a longer flat draw, reshaped, *are* the draw of that shape, bit for bit. :func:`normal`
and :func:`uniform` draw a flat array of the next size class (:func:`size_class`) and take the shape from it; called
inside a trace (``jit``, ``vmap``, ``grad``), or with another generator than partitionable threefry (``rbg``), they
are ``jax.random.normal`` / ``jax.random.uniform`` themselves.
The same key gives the same draws on every path.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np

from icldyn.runtime import jit_once

SMALLEST = 256  # one size class for every draw up to this many values
COARSE = 2**20  # up to here a class per power of two: under twice the values asked, ≈ 20 ms at most to draw


def size_class(size: int) -> int:
    """The flat size drawn for ``size`` values: ``SMALLEST`` for up to ``SMALLEST`` values; up to ``COARSE``, the
    least power of two ≥ size (a draw costs 15-20 ns a value on a CPU core, a compiled class 0.2-0.3 s, so one
    class per octave); above it the least m · 2^k ≥ size with m ∈ {4, 5, 6, 7} (at most a quarter more)."""
    if size <= SMALLEST:
        return SMALLEST
    if size <= COARSE:
        return 1 << (size - 1).bit_length()
    k = size.bit_length() - 3
    return -(-size // 2**k) * 2**k


@functools.partial(jax.jit, static_argnums=1)
def _take_compiled(flat: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return flat[:math.prod(shape)].reshape(shape)


def _take(flat: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """The first ``prod(shape)`` values of ``flat`` in ``shape``, where ``flat`` was placed: from one CPU device a NumPy
    view copied into a new array and put there (an eager slice, or ``jnp.asarray``, would be a program per shape, 10-30
    ms to compile; measured: 131 slices in the suite's inner loop, 210 copies in the whole suite), otherwise (another platform, a sharded array) a compiled slice."""
    devices = flat.devices()
    if flat.is_fully_addressable and len(devices) == 1 and next(iter(devices)).platform == "cpu":
        host = np.asarray(flat)[:math.prod(shape)].reshape(shape)
        return jax.device_put(host, flat.sharding) if flat.committed else jax.device_put(np.array(host))
    return _take_compiled(flat, shape)


def _prefix_stable(key) -> bool:
    """Whether a draw from ``key`` is a prefix of a longer one: an eager threefry key, partitionable."""
    if isinstance(key, jax.core.Tracer) or not jax.config.jax_threefry_partitionable:
        return False
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    return str(jax.random.key_impl(key) if typed else jax.config.jax_default_prng_impl) == "threefry2x32"


# a size class's draw runs once per call: compiled at runtime.RUN_ONCE (the same bits, tested), in about half the time
_class_draw = jit_once(lambda draw, key, size, dtype, *args: draw(key, (size,), dtype, *args), static_argnums=(0, 2, 3))


def _bucketed(draw, key, shape, dtype, *args) -> jax.Array:
    if not _prefix_stable(key):
        return draw(key, shape, dtype, *args)
    shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
    return _take(_class_draw(draw, key, size_class(math.prod(shape)), dtype, *args), shape)


def normal(key: jax.Array, shape=(), dtype=float) -> jax.Array:
    """``jax.random.normal(key, shape, dtype)``, bit for bit, compiled once per size class when called eagerly."""
    return _bucketed(jax.random.normal, key, shape, dtype)


def uniform(key: jax.Array, shape=(), dtype=float, minval=0.0, maxval=1.0) -> jax.Array:
    """``jax.random.uniform(key, shape, dtype, minval, maxval)``, bit for bit, compiled once per size class when
    called eagerly (scalar bounds)."""
    return _bucketed(jax.random.uniform, key, shape, dtype, minval, maxval)
