"""icldyn: training dynamics of attention for in-context regression, held against closed-form theory.

From Python (``docs/python.md``): :func:`run`, :func:`sweep`, :func:`load`, :func:`show`, :func:`compare`,
:func:`query`, :func:`runs`, :func:`recipes`, :func:`verify`, :func:`check`, :func:`export`, :func:`doctor`,
:func:`evaluate` (a finished run on shifted prompts), the
:class:`Run` and :class:`Sweep` they return, and the errors they raise: :class:`ConfigError` (bad input),
:class:`StoreError` (a run or store that cannot be used), :class:`RunDamaged` (a run's file missing or changed),
:class:`RunCrashed` and :class:`RunInterrupted` (a run stopped; it resumes with ``icldyn.run(resume=...)``). The
core names no paper: :mod:`icldyn.config` (sections and their kinds), :mod:`icldyn.plugins` (papers registered under
the ``icldyn.papers`` entry points; ``docs/plugins.md``),
:mod:`icldyn.recipe` (recipes and the runner's shared pieces), :mod:`icldyn.train` (optax + lax.scan loop),
:mod:`icldyn.runner` (one run: directory, summary, report), :mod:`icldyn.store` (run directories, DuckDB),
:mod:`icldyn.plots` (figure helpers), :mod:`icldyn.claims` (the claim table), :mod:`icldyn.sweep`,
:mod:`icldyn.comparison`, :mod:`icldyn.trackers` and :mod:`icldyn.cli`. Each paper's data law, model, theory, recipes,
claims and figures: :mod:`icldyn.papers`.
"""

import sys
import types

__version__ = "0.1.0"

from icldyn.api import (  # noqa: E402
    Run,
    Sweep,
    check,
    compare,
    doctor,
    evaluate,
    export,
    load,
    query,
    recipes,
    run,
    runs,
    show,
    sweep,
    verify,
)
from icldyn.errors import ConfigError  # noqa: E402

__all__ = [
    "ConfigError",
    "Run",
    "RunCrashed",
    "RunDamaged",
    "RunInterrupted",
    "StoreError",
    "Sweep",
    "__version__",
    "check",
    "compare",
    "doctor",
    "evaluate",
    "export",
    "load",
    "query",
    "recipes",
    "run",
    "runs",
    "show",
    "sweep",
    "verify",
]



class _Package(types.ModuleType):
    """``icldyn.sweep`` and ``icldyn.doctor`` stay the API's functions once the modules of those names are imported
    (the import system would rebind the package's attribute to the module); the modules are imported by their
    names as ever (``from icldyn.sweep import …``)."""

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and callable(self.__dict__.get(name)):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

_LAZY = {"RunDamaged": "icldyn.store", "StoreError": "icldyn.store", "RunCrashed": "icldyn.runner",
         "RunInterrupted": "icldyn.runner"}


def __getattr__(name: str):
    """The store's and runner's errors, imported on first use (they pull in DuckDB, pyarrow and JAX)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'icldyn' has no attribute {name!r}")
