import jax
import jax.numpy as jnp
import numpy as np
import pytest

from icldyn.components import draws


@pytest.mark.parametrize("shape", [(), (3,), (7, 13, 5), (300, 41)])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
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
