"""icldyn: training dynamics of attention for in-context regression, held against closed-form theory.

From Python (``docs/python.md``): :func:`run`, :func:`load`, :func:`runs`, :func:`recipes`, :func:`verify`, the
:class:`Run` they return, and :class:`ConfigError`. Rooms: :mod:`icldyn.data` (prompt distributions),
:mod:`icldyn.models`, :mod:`icldyn.train` (optax + lax.scan loop), :mod:`icldyn.theory` (closed forms, float64),
:mod:`icldyn.experiments` (named recipes), :mod:`icldyn.runner` (one run: directory, summary, report),
:mod:`icldyn.store` (run directories, DuckDB), :mod:`icldyn.plots`, :mod:`icldyn.claims` (the claim table),
:mod:`icldyn.sweep` and :mod:`icldyn.cli`.
"""

__version__ = "0.1.0"

from icldyn.api import Run, load, recipes, run, runs, verify  # noqa: E402
from icldyn.config import ConfigError  # noqa: E402

__all__ = ["ConfigError", "Run", "load", "recipes", "run", "runs", "verify", "__version__"]
