"""The prompt samplers side by side, 20 000 fresh prompts (d = 5, n = 20, float32) reduced to moments, one thread:
JAX threefry (`sample_prompts`, held-out sets), the pure-JAX Philox4x32-10 twin (the training sampler without the
kernel, and on a GPU) and the C sampler; then the gamma radii of one `linattn` batch with gamma covariates (1000
prompts × 21 tokens, shape_k = 0.1), `jax.random.gamma` against `linattn.data.log_gamma`, for one seed and six
(vmapped). `python -m benchmarks.sampler` (≈ 40 s); median and min of 15 calls."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import lsa_kernel as kernel
from icldyn.components.laws import log_gamma
from icldyn.components.linear_attention import moments
from icldyn.components.prompts import PromptsData, make_task, sample_prompts, sample_prompts_philox
from icldyn.runtime import setup_jax


def main(batch: int = 20_000, n: int = 20, repeats: int = 15) -> None:
    setup_jax()
    t = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), make_task(PromptsData(covariance="official"), 0))
    key = jax.random.PRNGKey
    fns = {"JAX threefry": (jax.jit(lambda k: moments(sample_prompts(t, key=k, batch=batch, n=n))), key),
           "JAX Philox twin": (jax.jit(lambda k: moments(sample_prompts_philox(t, key=k, batch=batch, n=n))), key)}
    if kernel.available(t.sigma.shape[0] + 1):
        fns["C sampler"] = (jax.jit(lambda k: kernel.sample_moments(t, k, batch, n)), key)
    shape, k = (1000, 21), 0.1
    for seeds in (1, 6):  # one key per seed, vmapped
        keys = lambda i, seeds=seeds: jax.random.split(jax.random.PRNGKey(i), seeds)  # noqa: E731
        fns[f"gamma radii, {seeds} seed(s): jax.random.gamma"] = (
            jax.jit(jax.vmap(lambda key: jnp.log(jax.random.gamma(key, k, shape)))), keys)
        fns[f"gamma radii, {seeds} seed(s): log_gamma"] = (jax.jit(jax.vmap(lambda key: log_gamma(key, k, shape))),
                                                           keys)
    for name, (f, key) in fns.items():
        jax.block_until_ready(f(key(0)))
        ts = []
        for i in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(f(key(i + 1)))
            ts.append(time.perf_counter() - t0)
        print(f"{name:44s} {1e3 * np.median(ts):7.1f} ms  (min {1e3 * min(ts):.1f})")


if __name__ == "__main__":
    main()
