import jax
import jax.numpy as jnp
import numpy as np
import pytest

from icldyn.components import draws


# each dtype at two size classes (float32: a scalar, 455 values; float64: 3, 12 300): a case per pair, as each case
# compiles jax.random's own programs for its shape
@pytest.mark.parametrize("shape, dtype", [((), jnp.float32), ((7, 13, 5), jnp.float32), ((3,), jnp.float64),
                                          ((300, 41), jnp.float64)])
def test_draws_are_jax_random_bit_for_bit_from_one_program_per_size_class(shape, dtype):
    key = jax.random.PRNGKey(5)
    assert np.array_equal(draws.normal(key, shape, dtype), jax.random.normal(key, shape, dtype))
    assert np.array_equal(draws.uniform(key, shape, dtype, -0.5, 2.0), jax.random.uniform(key, shape, dtype, -0.5, 2.0))
    # the prefix taken on the host (a CPU) and by the compiled slice (another device) is the same
    flat = jax.random.normal(key, (draws.size_class(int(np.prod(shape))),), dtype)
    host, compiled = draws._take(flat, shape), draws._take_compiled(flat, shape)
    assert np.array_equal(host, compiled) and host.dtype == compiled.dtype == jnp.dtype(dtype) and not host.committed
    placed = draws._take(jax.device_put(flat, jax.devices()[0]), shape)  # a committed draw stays where it was put
    assert placed.committed and placed.devices() == {jax.devices()[0]}
    # traced (the trainer's samplers): jax.random itself
    assert np.array_equal(jax.jit(lambda k: draws.normal(k, shape, dtype))(key), jax.random.normal(key, shape, dtype))
    for typed in (jax.random.key(5), jax.random.key(5, impl="rbg")):  # typed keys; rbg draws are not prefixes: direct
        assert np.array_equal(draws.normal(typed, shape, dtype), jax.random.normal(typed, shape, dtype))


def test_size_classes_draw_at_most_twice_up_to_coarse_and_a_quarter_more_above():
    sizes = np.unique(np.geomspace(1, 2**24, 20_000).astype(int))
    got = np.array([draws.size_class(int(n)) for n in sizes])
    small, large = sizes <= draws.COARSE, sizes > draws.COARSE
    assert (got >= sizes).all() and (got[small] < 2 * np.maximum(sizes[small], draws.SMALLEST)).all()
    assert all(c & (c - 1) == 0 for c in got[small].tolist()) and (got[large] <= 1.25 * sizes[large]).all()
    assert len(set(got[small])) == 13 and len(set(got[large])) == 4 * 4  # one per octave 2^8…2^20, four above


def test_an_initialisation_compiled_to_run_once_has_the_default_levels_bits(monkeypatch):
    """``runtime.jit_once`` (a run's initialisation, a test's reference draw) compiles at XLA's CPU O1 with the
    classic elementwise emitter (``runtime.RUN_ONCE``, about half the compile time of its hashes): threefry, the
    normal and uniform transforms and the scales give the default level's bits; inside a trace it is a plain nested
    program; where the jaxlib lacks one of the options, a plain program."""
    from icldyn import runtime
    from icldyn.runtime import jit_once

    def init(key):  # as the models draw: scaled normals and uniforms (a GPT's read-in), float32 and float64
        k1, k2, k3 = jax.random.split(key, 3)
        return (0.02 * draws.normal(k1, (4, 6), jnp.float32), draws.uniform(k2, (6,), jnp.float32, -0.4, 0.4),
                1e-3 * draws.normal(k3, (5, 3), jnp.float64))

    keys = jax.random.split(jax.random.PRNGKey(9), 2)  # vmapped over the seeds, as train.loop.init_states
    default = jax.jit(jax.vmap(init))(keys)
    once = jit_once(jax.vmap(init))(keys)
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(default, once, strict=True))
    nested = jax.jit(jax.vmap(jit_once(init)))(keys)
    assert all(np.array_equal(a, b) for a, b in zip(default, nested, strict=True))
    closed = jax.jit(lambda: jit_once(init)(jax.random.PRNGKey(9)))()  # inside a trace, concrete arguments only
    assert all(np.array_equal(a, b) for a, b in zip(jax.jit(init)(jax.random.PRNGKey(9)), closed, strict=True))
    monkeypatch.setattr(runtime, "RUN_ONCE", {**runtime.RUN_ONCE, "xla_no_such_option": True})  # an older jaxlib
    with pytest.raises(RuntimeError, match="No such compile option"):
        jax.jit(init, compiler_options=runtime.RUN_ONCE)(keys[0])
    older = jit_once(jax.vmap(init))
    for _ in range(2):  # the first call finds the option unknown; each gives the plain program's bits
        assert all(np.array_equal(a, b) for a, b in zip(default, older(keys), strict=True))
