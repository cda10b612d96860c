"""icldyn from Python (a notebook, a script): run a recipe, load a run, list runs and recipes, check a paper's
claims — the CLI's behaviour (validation, one-line :class:`~icldyn.config.ConfigError`, the run-directory
contract) with pandas DataFrames instead of tables. ``docs/python.md`` walks through it.

>>> import icldyn
>>> run = icldyn.run(icldyn.recipes().name[0], overrides={"train.steps": 200}, store="runs")
>>> run.metrics.query("metric == 'test_loss'").tail()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Run:
    """One run directory, read lazily: ``config`` (the resolved RunConfig), ``summary`` (summary.json; empty while
    the run is unfinished), ``result`` (the same, typed: the recipe's Result), ``metrics`` (long-format DataFrame:
    run_id, point, seed, step, metric, value —
    metrics.parquet plus the chunks an unfinished run has flushed), ``params`` (name → NumPy array), ``figures``
    (PNG paths), ``status``."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def status(self) -> str:
        from icldyn.store import run_status

        return run_status(self.path)

    @property
    def config(self):
        from icldyn.config import build, load_toml

        return build(load_toml(str(self.path / "config.toml")))

    @property
    def summary(self) -> dict[str, Any]:
        from icldyn.store import read_summary, verified

        if not (self.path / "summary.json").exists():
            return {}  # unfinished
        verified(self.path, "summary.json")  # changed since the run finished: RunDamaged
        return read_summary(self.path)

    @property
    def result(self):
        """The recipe's typed result (its Result subclass: ``.points[0].test_loss``, …); None while unfinished."""
        from icldyn.runner import typed

        summary = self.summary
        return typed(summary) if summary else None

    @property
    def metrics(self):
        import pyarrow as pa
        import pyarrow.parquet as pq

        from icldyn.store import METRICS_SCHEMA, RunDamaged, verified

        verified(self.path, "metrics.parquet")  # a finished run's file missing or changed: RunDamaged, never empty
        files = [self.path / "metrics.parquet"] if (self.path / "metrics.parquet").is_file() else []
        files += sorted((self.path / "metrics.parts").glob("*.parquet")) if (self.path / "metrics.parts").is_dir() \
            else []
        try:
            tables = [pq.read_table(f) for f in files] or [METRICS_SCHEMA.empty_table()]
        except Exception as err:  # pyarrow's errors: a file changed since it was checked
            raise RunDamaged(self.run_id, "metrics", f"unreadable ({type(err).__name__})") from None
        return pa.concat_tables(tables).to_pandas()

    @property
    def params(self) -> dict[str, Any]:
        import numpy as np

        from icldyn.store import RunDamaged, verified

        f = verified(self.path, "params.npz")  # a finished run's file missing or changed: RunDamaged, never {}
        if not f.is_file():
            return {}
        try:
            with np.load(f, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception as err:  # a bad zip, CRC or member
            raise RunDamaged(self.run_id, "params.npz", f"unreadable ({type(err).__name__}: {err})") from None

    @property
    def figures(self) -> list[Path]:
        return sorted((self.path / "figures").glob("*.png"))

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, status={self.status!r})"


class _NotebookReporter:
    """One rich progress bar per training (rich renders in Jupyter as in a terminal)."""

    def __init__(self, progress):
        self.progress = progress

    def start(self, description: str, total: int):
        task = self.progress.add_task(description, total=total)
        return lambda step, metrics: self.progress.update(task, completed=step)


def run(recipe: str, quick: bool = False, overrides: dict[str, Any] | None = None, store: str | Path = "runs",
        progress: bool = True) -> Run:
    """Run a recipe (a name from :func:`recipes`, or a TOML file of overrides) into a new run directory of
    ``store``. ``overrides``: dotted keys, as ``--set`` (``{"train.steps": 500, "grid.model.layers": [2]}``).
    Bad input raises :class:`icldyn.ConfigError` (one line) before anything is written."""
    from icldyn import plugins
    from icldyn.config import load_toml, set_dotted
    from icldyn.runner import execute
    from icldyn.runtime import setup_jax

    raw: dict[str, Any] = load_toml(recipe) if str(recipe).endswith(".toml") else {"experiment": recipe}
    for key, value in (overrides or {}).items():
        set_dotted(raw, key, value)
    cfg = plugins.recipe_of(raw).config(raw, quick=quick)
    setup_jax()
    if not progress:
        return Run(execute(cfg, store)[0].path)
    from rich.progress import Progress

    with Progress() as bars:
        return Run(execute(cfg, store, _NotebookReporter(bars))[0].path)


def load(path_or_run_id: str | Path, store: str | Path = "runs") -> Run:
    """A run by its directory, its id, or a unique part of its id. A damaged run (a file missing, truncated or
    unreadable) raises :class:`icldyn.RunDamaged` naming the file; :func:`check` lists every problem."""
    from icldyn.store import RunDamaged, problems, resolve_run

    path = resolve_run(store, str(path_or_run_id))
    found = problems(path)
    if found:
        raise RunDamaged(path.name, *found[0])
    return Run(path)


def evaluate(run: str | Path, shifts: list[str] | None = None, store: str | Path = "runs", prompts: int = 2000,
             key: int = 0):
    """A finished run's models on shifted prompts (``icldyn eval``; :mod:`icldyn.components.shifts`: None, every
    shift) at every prompt length, with the baselines on the same prompts: the new rows as a DataFrame (run_id,
    point, seed, shift, k, method, error, se), also written into the run's ``shifts.parquet`` with a figure
    ``figures/shifts.png``. An unknown shift, or a run unfinished, damaged or without parameters, raises one line."""
    import pandas as pd

    from icldyn.evaluation import evaluate_run
    from icldyn.runtime import setup_jax
    from icldyn.store import resolve_run

    path = resolve_run(store, str(run))
    setup_jax()
    return pd.DataFrame(evaluate_run(path, shifts, prompts=prompts, key=key),
                        columns=["run_id", "point", "seed", "shift", "k", "method", "error", "se"])


def check(run: str | Path | None = None, store: str | Path = "runs"):
    """Verify the store (every run and sweep record) or one run against the manifests written when each run
    finished (every file's size and SHA-256, each checkpoint's hash): one row each — kind, id, status, problems
    (``<file>: <reason>``), ok."""
    import pandas as pd

    from icldyn.store import check as verify_store

    return pd.DataFrame(verify_store(store, None if run is None else str(run)),
                        columns=["kind", "id", "status", "problems", "ok"])


def runs(store: str | Path = "runs"):
    """One row a run: run_id, experiment, status, started, wall_s, last_step, resume, path, damage (a damaged
    run's ``<file>: <reason>``; status ``damaged``)."""
    import pandas as pd

    from icldyn.store import list_runs

    return pd.DataFrame(list_runs(store), columns=["run_id", "experiment", "status", "started", "wall_s",
                                                   "last_step", "resume", "path", "damage"])


def recipes():
    """One row a recipe: name, paper, description."""
    import pandas as pd

    from icldyn.plugins import recipes as installed

    return pd.DataFrame([(e.name, e.paper, e.description) for e in installed().values()],
                        columns=["name", "paper", "description"])


def verify(paper: str | None = None, quick: bool = False, store: str | Path = "runs", progress: bool = True):
    """Every computable claim of a paper (all papers when None) as a DataFrame: paper, claim, theory, measured,
    tolerance (float; theory NaN where there is no closed-form value), test, passed (bool), fmt, detail
    (:class:`icldyn.claims.Claim`). Trains what it needs into ``store``."""
    import pandas as pd

    from icldyn import claims as v
    from icldyn.plugins import paper as installed
    from icldyn.runtime import setup_jax

    if paper is not None:
        installed(paper)  # an unknown paper: ConfigError naming the installed ones
    setup_jax()
    if progress:
        from rich.progress import Progress

        with Progress() as bars:
            claims = v.verify(paper, quick, store, _NotebookReporter(bars))
    else:
        claims = v.verify(paper, quick, store)
    cols = ["paper", "claim", "theory", "measured", "tolerance", "test", "passed", "fmt", "detail"]
    df = pd.DataFrame([c.asdict() for c in claims], columns=cols)
    return df.astype({"theory": float, "measured": float, "tolerance": float, "passed": bool})
