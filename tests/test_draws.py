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
    # traced (the trainer's samplers): jax.random itself
    assert np.array_equal(jax.jit(lambda k: draws.normal(k, shape, dtype))(key), jax.random.normal(key, shape, dtype))
    for typed in (jax.random.key(5), jax.random.key(5, impl="rbg")):  # typed keys; rbg draws are not prefixes: direct
        assert np.array_equal(draws.normal(typed, shape, dtype), jax.random.normal(typed, shape, dtype))


def test_size_classes_draw_at_most_a_quarter_more():
    sizes = np.arange(1, 100_000)
    got = np.array([draws.size_class(int(n)) for n in sizes])
    assert (got >= sizes).all() and (got[sizes > draws.SMALLEST] <= 1.25 * sizes[sizes > draws.SMALLEST]).all()
    assert len(set(got)) <= 4 * 9 + 1  # four per octave from 256 to 100 000
