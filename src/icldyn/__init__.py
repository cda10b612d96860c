"""icldyn: training dynamics of attention for in-context regression, held against closed-form theory.

From Python (``docs/python.md``): :func:`run`, :func:`load`, :func:`runs`, :func:`recipes`, :func:`verify`,
:func:`check`, :func:`evaluate` (a run on shifted prompts), the :class:`Run` they return, :class:`ConfigError`,
:class:`StoreError` and :class:`RunDamaged`. The core names no paper: :mod:`icldyn.config` (sections and their kinds), :mod:`icldyn.plugins` (papers registered under
the ``icldyn.papers`` entry points; ``docs/plugins.md``),
:mod:`icldyn.recipe` (recipes and the runner's shared pieces), :mod:`icldyn.train` (optax + lax.scan loop),
:mod:`icldyn.runner` (one run: directory, summary, report), :mod:`icldyn.store` (run directories, DuckDB),
:mod:`icldyn.plots` (figure helpers), :mod:`icldyn.claims` (the claim table), :mod:`icldyn.sweep` and
:mod:`icldyn.cli`. Each paper's data law, model, theory, recipes, claims and figures: :mod:`icldyn.papers`.
"""

__version__ = "0.1.0"

from icldyn.api import Run, check, evaluate, load, recipes, run, runs, verify  # noqa: E402
from icldyn.config import ConfigError  # noqa: E402

__all__ = ["ConfigError", "Run", "RunDamaged", "StoreError", "check", "evaluate", "load", "recipes", "run", "runs",
           "verify", "__version__"]


def __getattr__(name: str):
    """The store's errors, imported on first use (the store pulls in DuckDB and pyarrow)."""
    if name in ("RunDamaged", "StoreError"):
        from icldyn import store

        return getattr(store, name)
    raise AttributeError(f"module 'icldyn' has no attribute {name!r}")
