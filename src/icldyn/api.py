"""icldyn from Python (a notebook, a script): run a recipe or a sweep, load, show and compare runs, query the
store, check a paper's claims, export to a tracker — the CLI's behaviour (validation, one-line errors, the
run-directory contract) with pandas DataFrames instead of tables, and objects a notebook displays (a run's
measured-vs-theory table and figures). ``docs/python.md`` walks through it.

>>> import icldyn
>>> run = icldyn.run(icldyn.recipes().name[0], overrides={"train.steps": 200}, store="runs")
>>> run.table()
"""

from __future__ import annotations

import base64
import html
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Run:
    """One run directory, read lazily: ``config`` (the resolved RunConfig), ``summary`` (summary.json; empty while
    the run is unfinished), ``result`` (the same, typed: the recipe's Result), ``metrics`` (long-format DataFrame:
    run_id, point, seed, step, metric, value —
    metrics.parquet plus the chunks an unfinished run has flushed), ``params`` (name → NumPy array), ``figures``
    (PNG paths), ``status``; :meth:`table` (measured beside theory) and :meth:`points` (every point's and seed's
    numbers) as DataFrames. A notebook displays it as its table and figures."""

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
        from icldyn.store import read_metrics

        return read_metrics(self.path)

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

    def table(self, numbers: bool = True):
        """The report's table — each point's measured value beside the theory — as a DataFrame (empty while the run
        is unfinished). ``numbers``: cells parsed as floats (``—`` as NaN; ``mean ± sd`` split into the column and
        a ``<column> sd`` column); False: the cells as the report prints them."""
        return _frame(self.summary.get("table"), numbers)

    def points(self):
        """One row per point and seed, every number the run recorded for them at full precision: the point's
        overrides and scalar fields, then the seed's (nested mappings as dotted names: ``final.test_loss``,
        ``theory.optimal_loss``; a seed's field named as its point's one is ``seed.<name>``). Matrices are left
        out (:attr:`params`)."""
        import pandas as pd

        rows = []
        for p in self.summary.get("points", []):
            base = {**p.get("overrides", {}),
                    **_scalars({k: v for k, v in p.items() if k not in ("seeds", "grid", "overrides")})}
            for s in p.get("seeds") or [{}]:
                own = _scalars(s)
                rows.append({**base, **{f"seed.{k}" if k in base else k: v for k, v in own.items()}})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, status={self.status!r})"

    def _repr_html_(self) -> str:
        return _html(*_view(self))

    def __rich__(self):
        return _rich(*_view(self))


def _view(run: Run) -> tuple[str, list[str], dict | None, list[str], list[Path]]:
    """What a notebook shows of a run: a title, lines under it, its table (columns and rows), notes, figures."""
    from icldyn.store import StoreError, last_step

    try:
        status, summary = run.status, run.summary
    except StoreError as err:
        return f"run {run.run_id}", [f"damaged: {_python(str(err))}"], None, [], []
    if not summary:
        step = last_step(run.path)
        lines = [f"{status}" + (f" after step {step}" if step is not None else "")
                 + ("" if status == "running" else f"; continue it with: icldyn.run(resume={str(run.path)!r})")]
        return f"run {run.run_id}", lines, None, [], []
    wall = summary.get("wall_s") or 0
    lines = [f"{summary.get('experiment')} [{summary.get('paper')}]: {status}, wall time {wall:.1f} s",
             summary.get("description", "")]
    lines += [f"outside the paper's assumptions: {a}" for a in summary.get("assumptions_not_met", [])]
    notes = list(summary.get("headline", [])) + list(summary.get("report_lines", []))
    return f"run {run.run_id}", lines, summary.get("table"), notes, run.figures


@dataclass(frozen=True)
class Sweep:
    """A sweep in ``store`` (``<store>/sweeps/<sweep_id>.json``): its ``record``, its points' :class:`Run` s, a
    :meth:`table` of its points, and its combined report (``summary``, ``figures``); a notebook displays it as
    its tables and figures."""

    store: Path
    sweep_id: str

    @property
    def record(self) -> dict[str, Any]:
        from icldyn.sweep import load_record

        return load_record(self.store, self.sweep_id)

    @property
    def runs(self) -> list[Run]:
        return [Run(self.store / p["run_id"]) for p in self.record["points"] if p["run_id"]]

    @property
    def summary(self) -> dict[str, Any]:
        """The combined report's summary.json (empty until every point has run)."""
        import json

        f = self.store / "sweeps" / self.sweep_id / "summary.json"
        return json.loads(f.read_text()) if f.is_file() else {}

    @property
    def figures(self) -> list[Path]:
        return sorted((self.store / "sweeps" / self.sweep_id / "figures").glob("*.png"))

    def table(self):
        """One row a point: its overrides, run_id, status and the final main metric (mean ± sd over seeds)."""
        import pandas as pd

        from icldyn.sweep import final_losses

        record = self.record
        finals = final_losses(self.store, record)
        return pd.DataFrame([{**p["overrides"], "run_id": p["run_id"], "status": p["status"],
                              "final": finals.get(p["run_id"], "")} for p in record["points"]])

    def __repr__(self) -> str:
        return f"Sweep({self.sweep_id!r}, points={len(self.record['points'])})"

    def _repr_html_(self) -> str:
        return _html(*self._view())

    def __rich__(self):
        return _rich(*self._view())

    def _view(self):
        points = self.table().astype(str)
        summary = self.summary
        lines = [f"{self.record['target'].get('experiment')}: {len(points)} point(s), axes "
                 + ", ".join(self.record["axes"])]
        notes = list(summary.get("report_lines", []))
        table = summary.get("table") or {"columns": list(points.columns), "rows": points.values.tolist()}
        return f"sweep {self.sweep_id}", lines, table, notes, self.figures


def _scalars(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The scalar entries of a mapping, nested mappings flattened to dotted names (lists and matrices left out)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_scalars(v, f"{prefix}{k}."))
        elif v is None or isinstance(v, (bool, int, float, str)):
            out[f"{prefix}{k}"] = v
    return out


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"


def _cell(c: Any) -> tuple[float, float | None] | None:
    """A table cell as (value, sd): a number, ``—`` (NaN), ``mean ± sd``; None for text."""
    if isinstance(c, bool):
        return None
    if isinstance(c, (int, float)):
        return float(c), None
    text = str(c).strip().replace("−", "-").replace("×10", "e")
    if text in ("—", "–", "-", "", "n/a"):
        return float("nan"), None
    m = re.fullmatch(rf"({_NUM})\s*±\s*({_NUM})", text, re.IGNORECASE)
    if m:
        return float(m[1]), float(m[2])
    return (float(text), None) if re.fullmatch(_NUM, text, re.IGNORECASE) else None


def _frame(table: dict | None, numbers: bool):
    import pandas as pd

    if not table:
        return pd.DataFrame()
    df = pd.DataFrame(table["rows"], columns=table["columns"])
    if not numbers:
        return df
    out: dict[str, Any] = {}
    for col in df.columns:
        cells = [_cell(c) for c in df[col]]
        if any(c is None for c in cells) or all(c[0] != c[0] for c in cells):  # text, or nothing but dashes
            out[col] = df[col]
            continue
        out[col] = [c[0] for c in cells]
        if any(c[1] is not None for c in cells):
            out[f"{col} sd"] = [float("nan") if c[1] is None else c[1] for c in cells]
    return pd.DataFrame(out)


def _html(title: str, lines: list[str], table: dict | None, notes: list[str], figures: list[Path]) -> str:
    esc = html.escape
    out = [f"<div><strong>{esc(title)}</strong>"] + [f"<div>{esc(line)}</div>" for line in lines if line]
    if table:
        out.append(_frame(table, numbers=False).to_html(index=False, escape=True, border=0))
    if notes:
        out.append("<details><summary>notes</summary><pre>" + esc("\n".join(notes)) + "</pre></details>")
    for f in figures:
        data = base64.b64encode(f.read_bytes()).decode()
        out.append(f'<img src="data:image/png;base64,{data}" alt="{esc(f.stem)}" title="{esc(f.name)}" '
                   'style="max-width:32em; display:inline-block; margin:2px">')
    return "\n".join(out) + "</div>"


def _rich(title: str, lines: list[str], table: dict | None, notes: list[str], figures: list[Path]):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [Text(title, style="bold")] + [Text(line) for line in lines if line]
    if table:
        t = Table(title=Text("measured vs theory"))
        for col in table["columns"]:
            t.add_column(Text(str(col)))
        for row in table["rows"]:
            t.add_row(*(Text(str(c)) for c in row))
        parts.append(t)
    parts += [Text(line) for line in notes]
    if figures:
        parts.append(Text("figures: " + ", ".join(str(f) for f in figures)))
    return Group(*parts)


# -- the CLI's wording, spoken as Python: the same errors, told in the arguments a Python caller writes


def _py(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _override(m: re.Match) -> str:
    from icldyn.config import parse_value

    return f"overrides={{{_py(m['key'])}: {_py(parse_value(m['value']))}}}"


_WORDS: list[tuple[re.Pattern, Any]] = [
    (re.compile(r"--set '(?P<key>[\w.]+)=(?P<value>[^']*)'"), _override),
    (re.compile(r"(?:--set |(?<=e\.g\. ))(?P<key>[a-z_]+\.[\w.]+)=(?P<value>\[[^\]]*\]|[^\s,;)]+)"), _override),
    (re.compile(r"\bbad --set (?P<key>[\w.]+)"), lambda m: f"bad overrides[{_py(m['key'])}]"),
    (re.compile(r"\bin --set\b"), lambda m: "in overrides"),
    (re.compile(r"icldyn sweep --resume (?P<id>\S+) --out (?P<out>[^\s|;]+)"),
     lambda m: f"icldyn.sweep(resume={_py(m['id'])}, store={_py(m['out'])})"),
    (re.compile(r"icldyn run --resume (?P<path>[^\s|;]+)"), lambda m: f"icldyn.run(resume={_py(m['path'])})"),
    (re.compile(r"`icldyn run --resume` it"), lambda m: "continue it with icldyn.run(resume=...)"),
    (re.compile(r"--resume (?P<path>'[^']*')"), lambda m: f"resume={m['path']}"),
    (re.compile(r"`icldyn (?P<cmd>check|show) (?P<id>[^`]+)`"), lambda m: f"`icldyn.{m['cmd']}({_py(m['id'])})`"),
    (re.compile(r"`icldyn show`"), lambda m: "`icldyn.show(RUN)`"),
    (re.compile(r"`icldyn (?P<cmd>check|runs|sweeps|list)`"),
     lambda m: f"`icldyn.{ {'list': 'recipes', 'sweeps': 'query'}.get(m['cmd'], m['cmd'])}()`"),
    (re.compile(r"with --out\b"), lambda m: "as store="),
    (re.compile(r"with --(?P<flag>timeout|memory)\b"),
     lambda m: f"with {'timeout_s' if m['flag'] == 'timeout' else 'memory'}="),
    (re.compile(r"--set\b"), lambda m: "overrides"),
]


def _python(message: str) -> str:
    """A message worded for the command line (``--set 'grid.model.layers=[1]'``, ``icldyn run --resume DIR``),
    worded for Python (``overrides={"grid.model.layers": [1]}``, ``icldyn.run(resume="DIR")``)."""
    for pattern, repl in _WORDS:
        message = pattern.sub(repl, message)
    return message


@contextmanager
def _python_words() -> Iterator[None]:
    """icldyn's errors raised inside, reworded for Python (:func:`_python`); the same exception, type and
    attributes."""
    from icldyn.config import ConfigError
    from icldyn.store import StoreError

    try:
        yield
    except (ConfigError, StoreError) as err:
        err.args = (_python(str(err)),)
        raise
    except Exception as err:
        if type(err).__name__ in ("RunCrashed", "RunInterrupted") and err.args:
            err.args = (_python(str(err)),)
        raise


# -- progress: a live line in a notebook (no ipywidgets needed), rich's bars in a terminal, plain lines otherwise


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return getattr(ip, "kernel", None) is not None


def _finite_mean(values) -> float:
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


class _Line:
    """One training's progress as a notebook output (text and HTML), updated in place."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        return f"<pre style='margin:0'>{html.escape(self.text)}</pre>"


class NotebookProgress:
    """A progress line per training, updated in place through IPython's display handles (the Jupyter protocol's
    ``update_display_data``: no ipywidgets, nothing to install): a bar, step/total, the time and the current
    losses (the training loss and the recipe's main metric, mean over the seeds still finite)."""

    def __init__(self, metric: str = "test_loss", every_s: float = 0.25):
        self.metric, self.every_s = metric, every_s

    def start(self, description: str, total: int) -> Callable[[int, dict], None]:
        from IPython.display import display

        t0, shown = time.time(), [0.0]
        handle = display(_Line(f"{description}  compiling…"), display_id=True)

        def tick(step: int, metrics: dict) -> None:
            now = time.time()
            if step < total and now - shown[0] < self.every_s:
                return
            shown[0] = now
            done = round(24 * step / max(total, 1))
            info = "  ".join(f"{k} {_finite_mean(metrics[k]):.4g}" for k in dict.fromkeys(("train_loss", self.metric))
                             if k in metrics)
            handle.update(_Line(f"{description}  {'█' * done}{'·' * (24 - done)}  {step}/{total}  "
                                f"{now - t0:.1f} s  {info}"))

        return tick


@contextmanager
def progress_display(enabled: bool = True, metric: str = "test_loss") -> Iterator[Any]:
    """The Reporter a Python caller sees: None when disabled; in a Jupyter kernel a :class:`NotebookProgress`;
    elsewhere the CLI's (rich's live bars on a terminal, a plain line every 10% when stderr is a file)."""
    if not enabled:
        yield None
    elif _in_notebook():
        yield NotebookProgress(metric)
    else:
        from icldyn.cli import progress_bars

        with progress_bars(True, metric) as reporter:
            yield reporter


def run(recipe: str | None = None, quick: bool = False, overrides: dict[str, Any] | None = None,
        store: str | Path = "runs", progress: bool = True, resume: str | Path | None = None,
        log: str | None = None) -> Run:
    """Run a recipe (a name from :func:`recipes`, or a TOML file of overrides; None: the default recipe) into a new
    run directory of ``store``. ``overrides``: dotted keys, as ``--set`` (``{"train.steps": 500,
    "grid.model.layers": [2]}``). ``resume``: an interrupted run's directory, continued from its checkpoints (its
    own config: nothing else may be given). ``log``: ``"tensorboard"`` or ``"wandb"``, the finished run exported to
    that tracker (:func:`export`). Bad input raises :class:`icldyn.ConfigError` (one line) before anything is
    written."""
    from icldyn import plugins
    from icldyn.config import ConfigError, build, load_toml, set_dotted
    from icldyn.runner import execute
    from icldyn.runtime import setup_jax
    from icldyn.store import RunDir

    with _python_words():
        if log is not None:
            from icldyn.trackers import check_tracker

            check_tracker(log)  # an unknown tracker or its missing package: before anything trains
        if resume is not None:
            if recipe is not None or quick or overrides:
                raise ConfigError("resume= continues a run with its own config.toml: a recipe, quick and overrides "
                                  "would be ignored, so they are refused; to change the run, start a new one")
            rd = RunDir.open(resume)
            cfg = build(load_toml(str(Path(resume) / "config.toml")))
            plugins.get(cfg.experiment)
        else:
            rd = None
            raw = load_toml_or_name(recipe)
            for key, value in (overrides or {}).items():
                set_dotted(raw, key, value)
            cfg = plugins.recipe_of(raw).config(raw, quick=quick)
        setup_jax()
        with progress_display(progress, plugins.get(cfg.experiment).metric) as reporter:
            out = Run(execute(cfg, store, reporter, resume=rd)[0].path)
        if log is not None:
            export(out.path, log)
        return out


def sweep(recipe: str | None = None, grid: dict[str, list] | None = None, quick: bool = False,
          overrides: dict[str, Any] | None = None, store: str | Path = "runs", backend: str = "local",
          address: str | None = None, group: bool = True, resume: str | None = None, progress: bool = True) -> Sweep:
    """A sweep, as ``icldyn sweep``: one run per point of ``grid`` (``{"train.lr": [0.01, 0.02]}``; None: the
    recipe's own grid, its paper figure, with its combined report), ``overrides`` applied to every point;
    ``backend="ray"`` (``address``: a cluster) runs one Ray task per job; ``resume``: a sweep id, only its
    unfinished points rerun. Every point is validated before anything trains."""
    from icldyn import plugins
    from icldyn.config import ConfigError, known_field, set_dotted
    from icldyn.runtime import setup_jax
    from icldyn.sweep import TOP_LEVEL, point_configs, recipe_axes
    from icldyn.sweep import sweep as run_sweep

    with _python_words():
        if backend not in ("local", "ray"):
            raise ConfigError(f"backend = {backend!r} is not allowed: must be one of 'local', 'ray'")
        raw, axes = None, None
        if resume is not None:
            if recipe is not None or grid or overrides or quick:
                raise ConfigError("resume= reruns a sweep's unfinished points with its own record: a recipe, grid, "
                                  "quick and overrides would be ignored, so they are refused")
        else:
            raw = load_toml_or_name(recipe)
            for key, value in (overrides or {}).items():
                set_dotted(raw, key, value)
            plugins.recipe_of(raw)
            axes = {}
            for key, values in (grid or {}).items():
                section, _, name = key.partition(".")
                if key not in TOP_LEVEL and not known_field(section, name):
                    raise ConfigError(f"grid key {key!r} is not seeds, seed or a data.*, model.* or train.* field")
                if not isinstance(values, (list, tuple)) or not values:
                    raise ConfigError(f"grid[{key!r}] = {values!r} is not allowed: must be a non-empty list of "
                                      f"values, e.g. grid={{{key!r}: [1, 2]}}")
                axes[key] = list(values)
            point_raw, point_axes = (raw, axes) if axes else recipe_axes(raw, quick)
            point_configs(point_raw, quick, point_axes)
        setup_jax()
        with progress_display(progress) as reporter:
            record = run_sweep(raw, quick, axes or None, store, reporter, resume=resume, backend=backend,
                               address=address, group=group)
        return Sweep(Path(store), record["sweep_id"])


def load_toml_or_name(recipe: str | None) -> dict[str, Any]:
    from icldyn.config import load_toml

    return load_toml(recipe) if str(recipe).endswith(".toml") else {"experiment": recipe} if recipe else {}


def load(path_or_run_id: str | Path, store: str | Path = "runs") -> Run:
    """A run by its directory, its id, or a unique part of its id. A damaged run (a file missing, truncated or
    unreadable) raises :class:`icldyn.RunDamaged` naming the file; :func:`check` lists every problem."""
    from icldyn.store import RunDamaged, problems, resolve_run

    with _python_words():
        path = resolve_run(store, str(path_or_run_id))
        found = problems(path)
        if found:
            raise RunDamaged(path.name, *found[0])
        return Run(path)


def evaluate(run: str | Path, shifts: list[str] | None = None, store: str | Path = "runs", prompts: int = 2000,
             key: int = 0, dtype: str | None = None):
    """A finished run's models on shifted prompts (``icldyn eval``; :mod:`icldyn.components.shifts`: None, every
    shift the model reads: a GPT's runs leave out ``longer``) at every prompt length, with the baselines on the same
    prompts: the new rows as a DataFrame (run_id, point, seed, shift, k, method, error, se), also written into the
    run's ``shifts.parquet`` with a figure ``figures/shifts.png``. ``dtype``: the model's precision (None: the run's
    ``train.dtype``). An unknown shift, or a run unfinished, damaged or without parameters, raises one line."""
    import pandas as pd

    from icldyn.evaluation import evaluate_run
    from icldyn.runtime import setup_jax
    from icldyn.store import resolve_run

    path = resolve_run(store, str(run))
    setup_jax()
    return pd.DataFrame(evaluate_run(path, shifts, prompts=prompts, key=key, dtype=dtype),
                        columns=["run_id", "point", "seed", "shift", "k", "method", "error", "se"])


def check(run: str | Path | None = None, store: str | Path = "runs"):
    """Verify the store (every run and sweep record) or one run against the manifests written when each run
    finished (every file's size and SHA-256, each checkpoint's hash): one row each — kind, id, status, problems
    (``<file>: <reason>``), ok."""
    import pandas as pd

    from icldyn.store import check as verify_store

    with _python_words():
        rows = verify_store(store, None if run is None else str(run))
    return pd.DataFrame(rows, columns=["kind", "id", "status", "problems", "ok"])


def runs(store: str | Path = "runs"):
    """One row a run: run_id, experiment, status, started, wall_s, last_step, resume, path, damage (a damaged
    run's ``<file>: <reason>``; status ``damaged``)."""
    import pandas as pd

    from icldyn.store import list_runs

    with _python_words():
        rows = list_runs(store)
    return pd.DataFrame(rows, columns=["run_id", "experiment", "status", "started", "wall_s",
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

    with _python_words():
        if paper is not None:
            installed(paper)  # an unknown paper: ConfigError naming the installed ones
        setup_jax()
        with progress_display(progress) as reporter:
            claims = v.verify(paper, quick, store, reporter)
    cols = ["paper", "claim", "theory", "measured", "tolerance", "test", "passed", "fmt", "detail"]
    df = pd.DataFrame([c.asdict() for c in claims], columns=cols)
    return df.astype({"theory": float, "measured": float, "tolerance": float, "passed": bool})


def query(sql: str, store: str | Path = "runs", timeout_s: float = 60.0, memory: str = "2GB"):
    """Read-only DuckDB SQL over the store, as ``icldyn query``: one query (``SELECT``, ``WITH … SELECT``,
    ``PIVOT`` …) over the views ``metrics``, ``finals``, ``runs`` and ``sweeps``, as a DataFrame. Damaged runs
    are left out, each named in a warning."""
    import pandas as pd

    from icldyn.store import query as run_query

    notes: list[str] = []
    with _python_words():
        cols, rows = run_query(store, sql, timeout_s=timeout_s, memory=memory, notes=notes)
    for note in notes:
        warnings.warn(f"{note} (left out of every view; icldyn.check() lists every problem)", stacklevel=2)
    return pd.DataFrame(rows, columns=cols)


def show(*targets: str | Path, store: str | Path = "runs") -> Run | Sweep:
    """A run (its directory, id or a unique part of it) or a sweep id, to display: a notebook shows its
    measured-vs-theory table and figures (``print`` shows it as text). A damaged run shows what is damaged."""
    from icldyn.config import ConfigError
    from icldyn.store import StoreError, resolve_run

    with _python_words():
        if len(targets) != 1:
            raise ConfigError(f"show takes one run or sweep (got {len(targets)}); to put runs side by side: "
                              f"icldyn.compare({', '.join(_py(str(t)) for t in targets) or 'A, B'})")
        target = str(targets[0])
        try:
            return Run(resolve_run(store, target))
        except StoreError:
            if (Path(store) / "sweeps" / f"{target}.json").is_file():
                return Sweep(Path(store), target)
            raise


def compare(*targets: str | Path | Run, store: str | Path = "runs"):
    """Runs side by side (:class:`icldyn.comparison.Comparison`): ``config`` (the keys whose values differ, one
    column a run), ``finals`` (each shared point's and metric's final value, mean over seeds, one column a run)
    and :meth:`~icldyn.comparison.Comparison.figure` (the shared metrics over training); a notebook displays all
    three."""
    from icldyn.comparison import Comparison

    with _python_words():
        return Comparison.of([t.path if isinstance(t, Run) else t for t in targets], store)


def export(target: str | Path | Run, to: str = "tensorboard", logdir: str | Path | None = None,
           store: str | Path = "runs") -> Path:
    """A finished run to a tracker, as ``icldyn export RUN --to tensorboard|wandb``: every metric per point and
    seed as scalars at their steps, the config as hyperparameters, the figures as images. TensorBoard (the
    ``tensorboard`` extra: tensorboardX) writes event files under ``logdir`` (default ``<store>/tensorboard``);
    W&B (the ``wandb`` extra) logs offline unless ``WANDB_MODE`` says otherwise. Returns the directory written."""
    from icldyn import trackers

    with _python_words():
        path = target.path if isinstance(target, Run) else load(target, store).path
        return trackers.export(path, to, logdir)


def doctor() -> dict[str, Any]:
    """What ``icldyn doctor`` prints, as a nested dict: versions, the JAX backend and devices, the C kernel's
    status and why, caches, threads, the installed plug-ins."""
    from icldyn.doctor import collect
    from icldyn.runtime import setup_jax

    setup_jax()
    return collect()
