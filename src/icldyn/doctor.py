"""``icldyn doctor``: what a bug report needs — versions, the JAX backend and devices, the C kernel's status and
why, the cache folders, threads and the installed plug-ins (as ``jax.print_environment_info()`` or
``torch.utils.collect_env`` do)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from typing import Any

PACKAGES = ("jax", "jaxlib", "optax", "numpy", "scipy", "pydantic", "typer", "rich", "pyarrow", "duckdb", "pandas",
            "matplotlib", "ray", "tensorboardX", "wandb")  # the last two: the tracker extras


def collect() -> dict[str, Any]:
    """The environment as a nested dict, with what each installed plug-in reports (``Paper.doctor``)."""
    import jax

    from icldyn import __version__
    from icldyn.plugins import papers
    from icldyn.runtime import cache_root, jax_cache_dir

    def version(pkg: str) -> str:
        try:
            return importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    try:
        devices = [str(d) for d in jax.devices()]
    except RuntimeError as err:  # a backend that fails to start
        devices = [f"error: {err}"]
    return {
        "icldyn": {"version": __version__, "location": os.path.dirname(os.path.abspath(__file__))},
        "python": {"version": platform.python_version(), "executable": sys.executable, "platform": platform.platform()},
        "packages": {p: version(p) for p in PACKAGES},
        "jax": {"backend": jax.default_backend(), "devices": devices, "x64": bool(jax.config.jax_enable_x64),
                "compilation cache": str(jax_cache_dir())},
        "plug-ins": {name: p.title for name, p in papers().items()},
        **{f"{name}: {key}": value for name, p in papers().items() if p.doctor for key, value in p.doctor().items()},
        "threads": {"cpu_count": os.cpu_count(),
                    "usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                    **{k: os.environ.get(k, "") for k in ("OMP_NUM_THREADS", "XLA_FLAGS")}},
        "environment": {"cache root": str(cache_root()),
                        **{k: v for k, v in sorted(os.environ.items()) if k.startswith("ICLDYN_") or k in ("CC",)}},
    }
