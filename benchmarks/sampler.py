"""The prompt samplers side by side, 20 000 fresh prompts (d = 5, n = 20, float32) reduced to moments, one thread:
JAX threefry (`sample_prompts`, held-out sets), the pure-JAX Philox4x32-10 twin (the training sampler without the
kernel, and on a GPU) and the C sampler. `python -m benchmarks.sampler` (≈ 30 s); median and min of 15 calls."""

import time

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.papers.ahn.config import PromptsData
from icldyn.papers.ahn.data import make_task, sample_prompts, sample_prompts_philox
from icldyn.papers.ahn import kernel
from icldyn.papers.ahn.model import moments
from icldyn.runtime import setup_jax


def main(batch: int = 20_000, n: int = 20, repeats: int = 15) -> None:
    setup_jax()
    t = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), make_task(PromptsData(covariance="official"), 0))
    fns = {"JAX threefry": jax.jit(lambda k: moments(sample_prompts(t, key=k, batch=batch, n=n))),
           "JAX Philox twin": jax.jit(lambda k: moments(sample_prompts_philox(t, key=k, batch=batch, n=n)))}
    if kernel.available(t.sigma.shape[0] + 1):
        fns["C sampler"] = jax.jit(lambda k: kernel.sample_moments(t, k, batch, n))
    for name, f in fns.items():
        jax.block_until_ready(f(jax.random.PRNGKey(0)))
        ts = []
        for i in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(f(jax.random.PRNGKey(i + 1)))
            ts.append(time.perf_counter() - t0)
        print(f"{name:16s} {1e3 * np.median(ts):7.1f} ms  (min {1e3 * min(ts):.1f})")


if __name__ == "__main__":
    main()
