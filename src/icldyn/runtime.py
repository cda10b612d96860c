"""JAX process set-up at the entry points (CLI, tests, benchmarks): float64 available on request
(every array's dtype is chosen explicitly by the code) and the persistent compilation cache, so a
second run of the same program shapes skips XLA compilation."""

from __future__ import annotations

import os
from pathlib import Path

import jax


def setup_jax(cache_dir: str | None = None) -> None:
    jax.config.update("jax_enable_x64", True)
    cache = cache_dir or os.environ.get("ICLDYN_JAX_CACHE") or str(Path.home() / ".cache" / "icldyn" / "jax")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
