"""icldyn command line (typer + rich). Parses, validates, dispatches; no science here.

Exit codes: 0 success, 1 a check or run failed, 2 bad input (one line on stderr).
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from icldyn.config import ConfigError, apply_sets, load_toml

app = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="Train attention on in-context regression and hold it against closed-form theory.")
out_console = Console(width=None if sys.stdout.isatty() else 200)  # no wrapping into files
err_console = Console(stderr=True)
DEFAULT_STORE = "runs"


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def cells(*values) -> list[Text]:
    """Table cells as plain text: data (paths, ids, query values, claim text) is never read as rich markup."""
    return [v if isinstance(v, Text) else Text(str(v)) for v in values]


def say(console: Console, line: str) -> None:
    """One line of data, printed as it is (no markup, no highlighting, no wrapping)."""
    console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def bad_input() -> Iterator[None]:
    from icldyn.store import StoreError

    try:
        yield
    except (ConfigError, StoreError) as err:
        fail(str(err))


def _finite_mean(values) -> float:
    """Mean over the seeds still finite (a diverged seed or learning rate does not blank the bar)."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else float("nan")


class RichReporter:
    """One progress bar per training, showing the latest losses; when stderr is not a terminal
    (a log file, a batch job), a plain line every 10% instead."""

    def __init__(self, progress: Progress, metric: str = "test_loss"):
        self.progress, self.metric = progress, metric  # metric: the recipe's main metric, shown beside train_loss

    def start(self, description: str, total: int) -> Callable[[int, dict], None]:
        task = self.progress.add_task(escape(description), total=total, info="compiling…")
        plain = not err_console.is_terminal
        shown = [-1]

        def tick(step: int, metrics: dict) -> None:
            info = "  ".join(f"{k} {_finite_mean(metrics[k]):.4g}" for k in ("train_loss", self.metric)
                             if k in metrics)
            self.progress.update(task, completed=step, info=escape(info))
            if plain and (10 * step) // total > shown[0]:
                shown[0] = (10 * step) // total
                print(f"{description}: step {step}/{total}  {info}", file=sys.stderr, flush=True)

        return tick


@contextmanager
def progress_bars(enabled: bool, metric: str = "test_loss") -> Iterator[RichReporter | None]:
    if not enabled:
        yield None
        return
    cols = [TextColumn("{task.description}"), BarColumn(bar_width=24), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[info]}")]
    with Progress(*cols, console=err_console, transient=False, disable=not err_console.is_terminal) as progress:
        yield RichReporter(progress, metric)


def _setup() -> None:
    from icldyn.runtime import setup_jax

    setup_jax()


@app.command()
def run(
    target: Optional[str] = typer.Argument(None, help="experiment name (see `icldyn list`) or a CONFIG.toml "
                                           "(default: the installed papers' default recipe)"),
    set_: list[str] = typer.Option([], "--set", "-s", help="override, e.g. --set data.n=10 (repeatable)"),
    quick: bool = typer.Option(False, "--quick", help="the recipe's small size (under a minute on CPU)"),
    out: Path = typer.Option(Path(DEFAULT_STORE), "--out", help="run store directory"),
    as_json: bool = typer.Option(False, "--json", help="print summary.json to stdout"),
    resume: Optional[Path] = typer.Option(None, "--resume", help="continue an interrupted RUN_DIR from its "
                                          "checkpoints (its own config; no other arguments)"),
    log: Optional[str] = typer.Option(None, "--log", help="tensorboard or wandb: the finished run exported there "
                                      "(as `icldyn export`; wandb offline unless WANDB_MODE says otherwise)"),
) -> None:
    """Run an experiment; writes one run directory."""
    from icldyn import plugins
    from icldyn.config import build
    from icldyn.runner import execute, process_start
    from icldyn.store import RunDir

    with bad_input():
        if log is not None:
            from icldyn.trackers import check_tracker

            check_tracker(log)  # before anything trains
        if resume is not None:
            if set_ or quick or target is not None:
                fail("--resume continues a run with its own config.toml: --set, --quick and a recipe would be "
                     "ignored, so they are refused; to change the run, start a new one")
            rd_resume = RunDir.open(resume)
            cfg = build(load_toml(str(resume / "config.toml")))
            plugins.get(cfg.experiment)
        else:
            rd_resume = None
            raw = load_toml(target) if target and target.endswith(".toml") else {"experiment": target} if target else {}
            raw = apply_sets(raw, set_)
            cfg = plugins.recipe_of(raw).config(raw, quick=quick)
    _setup()
    with bad_input(), stopped_runs(), progress_bars(not as_json, plugins.get(cfg.experiment).metric) as reporter:
        rd, summary = execute(cfg, out, reporter, resume=rd_resume, started=process_start())
    if as_json:
        sys.stdout.write((rd.path / "summary.json").read_text())
        _print_divergence(summary, err_console)
        if log is not None:
            _export(rd.path, log, None, err_console)
        return
    _print_points(summary)
    _print_divergence(summary, out_console)
    say(out_console, f"run directory: {rd.path}")
    if log is not None:
        _export(rd.path, log, None)
    if summary["status"] != "finished":
        raise typer.Exit(1)


@contextmanager
def stopped_runs(sweeps: Path | None = None) -> Iterator[None]:
    """Ctrl-C (exit 130) or an error (exit 1) inside a run: one line naming the run, its last step and the
    command that resumes it (for a sweep in the store ``sweeps``, also the command that resumes the sweep)."""
    from icldyn.runner import RunCrashed, RunInterrupted

    try:
        yield
    except (RunInterrupted, RunCrashed) as err:
        records = sorted((sweeps / "sweeps").glob("*.json"), key=lambda f: f.stat().st_mtime) if sweeps else []
        more = f" | the sweep: icldyn sweep --resume {records[-1].stem} --out {sweeps}" if records else ""
        fail(f"{err}{more}", 130 if isinstance(err, RunInterrupted) else 1)


def _print_divergence(summary: dict, console: Console) -> None:
    """One line per diverged seed: which point, which seed, at which step. A setting tried while tuning (a learning
    rate of a grid the recipe searches) that diverges is a result — the grid's edge — and is worded as one."""
    from icldyn.runner import spike_lines, typed

    tuning = []
    points = typed(summary).points
    for line in spike_lines(points):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for p in points:
        gone = [s for s in p.seeds if s.status == "diverged"]
        if p.tuning and gone:
            steps = sorted(s.diverged_at for s in gone if s.diverged_at is not None)
            tuning.append(f"{p.point or 'the run'} ({len(gone)} of {len(p.seeds)} seeds, from step {steps[0]})"
                          if steps else p.point)
            continue
        for s in gone:
            where = f"point {p.point}, " if p.point else ""
            step = s.diverged_at
            console.print(f"diverged: {where}seed {s.seed}"
                          + (f" at step {step}" if step is not None else "")
                          + " (training loss NaN/Inf, or above train.max_loss for train.diverge_after logs in a "
                          "row; its rows stop there)", markup=False, highlight=False, soft_wrap=True)
    if tuning:
        console.print("unstable by design — the learning-rate grid's settings above the stable range, not failures "
                      "(the best rate of each method is the one reported): " + "; ".join(tuning),
                      markup=False, highlight=False, soft_wrap=True)


def _print_points(summary: dict) -> None:
    from icldyn.runner import typed

    result = typed(summary)
    if result.table:
        table = Table(title=Text(f"{summary['experiment']}: measured vs theory"))
        for col in result.table.columns:
            table.add_column(Text(col))
        for row in result.table.rows:
            table.add_row(*cells(*row))
        out_console.print(table)
    for line in result.headline:
        out_console.print(line, markup=False, highlight=False, soft_wrap=True)
    from icldyn.runner import wall_time

    for line in summary.get("assumptions_not_met") or []:
        out_console.print(f"outside the paper's assumptions: {line}", markup=False, highlight=False, soft_wrap=True)
    out_console.print(f"wall time {wall_time(summary.get('wall_s'), summary.get('timing'))}", markup=False,
                      highlight=False, soft_wrap=True)


@app.command("sweep")
def sweep_(
    target: Optional[str] = typer.Argument(None, help="experiment name or a CONFIG.toml (default: the installed "
                                           "papers' default recipe)"),
    grid: list[str] = typer.Option([], "--grid", "-g", help="axis, e.g. --grid train.lr=0.01,0.02 (repeatable)"),
    set_: list[str] = typer.Option([], "--set", "-s", help="override every point, e.g. --set train.steps=500"),
    quick: bool = typer.Option(False, "--quick", help="the recipe's small size"),
    backend: str = typer.Option("local", "--backend", help="local, or ray (one Ray task per job)"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local "
                                          "instance)"),
    out: Path = typer.Option(Path(DEFAULT_STORE), "--out", help="run store directory"),
    resume: Optional[str] = typer.Option(None, "--resume", help="SWEEP_ID: rerun only its unfinished points"),
    group: bool = typer.Option(True, "--group/--no-group", help="points that differ only in learning rate, "
                               "seeds or data law as one program (default), or each point alone"),
) -> None:
    """Run every point of a grid as its own run directory, with a sweep record in <out>/sweeps/. Without
    --grid, the recipe's own grid (its paper figure) is swept, and its combined report written beside the record."""
    from icldyn import plugins
    from icldyn.sweep import parse_axes, point_configs, recipe_axes, sweep

    if backend not in ("local", "ray"):
        fail(f"--backend = {backend!r} is not allowed: must be one of 'local', 'ray'")
    with bad_input():
        raw, axes = None, None
        if resume is None:
            raw = load_toml(target) if target and target.endswith(".toml") else {"experiment": target} if target else {}
            raw = apply_sets(raw, set_)
            plugins.recipe_of(raw)
            axes = parse_axes(grid)  # none: the recipe's own grid, and its combined report at the end
            point_raw, point_axes = (raw, axes) if axes else recipe_axes(raw, quick)
            point_configs(point_raw, quick, point_axes)  # every point validated before anything trains
    _setup()
    with bad_input(), stopped_runs(out), progress_bars(True) as reporter:
        record = sweep(raw, quick, axes, out, reporter, resume=resume, backend=backend, address=address,
                       group=group)
    _print_sweep(out, record)
    if record.get("report"):
        out_console.print(f"report: {out / record['report']}", markup=False, highlight=False, soft_wrap=True)
    if any(p["status"] != "finished" for p in record["points"]):
        raise typer.Exit(1)


def _print_sweep(out: Path, record: dict) -> None:
    """A sweep's points: overrides, run id, status and the final main loss (mean ± sd over seeds)."""
    from icldyn.sweep import final_losses

    finals = final_losses(out, record)
    table = Table(title=Text(f"sweep {record['sweep_id']} ({record['target'].get('experiment')})"))
    for col in ("point", "run_id", "status", "final loss (mean ± sd over seeds)"):
        table.add_column(col)
    for p in record["points"]:
        table.add_row(*cells(", ".join(f"{k}={v}" for k, v in p["overrides"].items()), p["run_id"] or "—",
                             p["status"], finals.get(p["run_id"], "—")))
    out_console.print(table)


@app.command("sweeps")
def sweeps_(out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """List the sweeps in the store."""
    from icldyn.sweep import list_sweeps

    table = Table()
    for col in ("sweep_id", "experiment", "axes", "points", "finished", "report"):
        table.add_column(col)
    with bad_input():
        rows = list_sweeps(out)
    for r in rows:
        table.add_row(*cells(r["sweep_id"], r["experiment"], r["axes"], r["points"], r["finished"], r["report"] or "—"))
    out_console.print(table)


@app.command("list")
def list_() -> None:
    """List the installed papers and their recipes, one line each."""
    from icldyn.plugins import papers

    for paper in papers().values():
        out_console.print(f"[bold]{escape(paper.name)}[/bold]: {escape(paper.title)}", highlight=False, soft_wrap=True)
        for exp in paper.recipes:
            line = f"  [bold]{exp.name:24s}[/bold] {escape(f'[{exp.paper}]'):11s} {escape(exp.description)}"
            out_console.print(line, highlight=False, soft_wrap=True)


@app.command()
def runs(out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """List the runs in the store."""
    from icldyn.store import list_runs

    with bad_input():
        rows = list_runs(out)
    table = Table()
    for col in ("run_id", "experiment", "status", "started", "wall_s", "last step / resume"):
        table.add_column(col)
    for r in rows:
        more = " ".join(x for x in (f"step {r['last_step']}" if r["last_step"] is not None else "", r["resume"] or "")
                        if x)
        status = f"damaged: {r['damage']}" if r["damage"] else r["status"]
        table.add_row(*cells(r["run_id"], r["experiment"], status, r["started"],
                             f"{r['wall_s']:.1f}" if r["wall_s"] else "", more))
    out_console.print(table)


@app.command()
def show(runs_: list[str] = typer.Argument(..., metavar="RUN"),
         out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """Print a run's (or a sweep's) report (a damaged run: what is missing or changed, exit 1)."""
    from icldyn.store import StoreError, damage, last_step, resolve_run, run_status
    from icldyn.sweep import load_record

    if len(runs_) > 1:
        fail(f"show prints one run's report; to put runs side by side: icldyn compare {' '.join(runs_)}")
    run_ = runs_[0]
    with bad_input():
        try:
            path = resolve_run(out, run_)
        except StoreError:
            if not (out / "sweeps" / f"{run_}.json").is_file():
                raise
            record = load_record(out, run_)
            _print_sweep(out, record)
            if record.get("report") and (out / record["report"]).is_file():
                out_console.print((out / record["report"]).read_text(errors="replace"), markup=False, highlight=False)
            return
        hurt = damage(path)
        if hurt:
            fail(f"run {path.name} is damaged: {hurt}; `icldyn check {path.name}` verifies every file", 1)
        if not (path / "report.md").is_file():
            step, status = last_step(path), run_status(path)
            raise StoreError(f"run {path.name} is {status}" + (f" (last logged step {step})" if step else "")
                             + ": its report is written when it finishes"
                             + ("" if status == "running" else f"; continue it with: icldyn run --resume {path}"))
    say(out_console, f"{path}\n")
    out_console.print((path / "report.md").read_text(errors="replace"), markup=False, highlight=False)


@app.command()
def compare(runs_: list[str] = typer.Argument(..., metavar="RUN RUN …", help="two runs or more (ids, unique parts "
                                             "of ids, or directories)"),
            out: Path = typer.Option(Path(DEFAULT_STORE), "--out"),
            figure: Optional[Path] = typer.Option(None, "--figure", help="where the figure goes (PNG, a PDF beside "
                                                  "it; default <out>/compare/<runs>.png)"),
            metric: Optional[list[str]] = typer.Option(None, "--metric", help="a metric to draw (repeat the "
                                                       "option; default: every metric the runs share)")) -> None:
    """Runs side by side: the config keys that differ, each point's and metric's final value (mean ± sd over
    seeds), and a figure of the metrics they all logged, over training."""
    from icldyn.comparison import Comparison

    with bad_input():
        c = Comparison.of(runs_, out)
        path = (c.figure(figure or out / "compare" / ("_vs_".join(c.names) + ".png"), metric)
                if c.shared_metrics() else None)
    table = Table(title=Text("config: the keys that differ"))
    for col in ("key", *c.names):
        table.add_column(Text(col))
    for key, row in c.config.iterrows():
        table.add_row(*cells(key, *row))
    out_console.print(table if len(c.config) else Text("config: the same in every run"))
    table = Table(title=Text("final values (mean ± sd over seeds of the last logged value)"))
    finals = c.table()
    for col in finals.columns:
        table.add_column(Text(col))
    for row in finals.itertuples(index=False):
        table.add_row(*cells(*row))
    out_console.print(table)
    if path is not None:
        say(out_console, f"figure: {path}")


@app.command()
def export(run_: str = typer.Argument(..., metavar="RUN"),
           to: str = typer.Option(..., "--to", help="tensorboard (event files; the tensorboard extra) or wandb "
                                  "(offline unless WANDB_MODE says otherwise; the wandb extra)"),
           logdir: Optional[Path] = typer.Option(None, "--dir", help="where to write (default <out>/<tracker>)"),
           out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """Export a finished run to a tracker: every metric per point and seed as scalars, the config as
    hyperparameters, the figures as images."""
    from icldyn.store import RunDamaged, problems, resolve_run

    with bad_input():
        path = resolve_run(out, run_)
        found = problems(path)
        if found:
            raise RunDamaged(path.name, *found[0])
    _export(path, to, logdir)


def _export(path: Path, to: str, logdir: Path | None, console: Console | None = None) -> None:
    from icldyn import trackers

    with bad_input():
        where = trackers.export(path, to, logdir)
    hint = (f"tensorboard --logdir {where.parent}" if to == "tensorboard" else
            f"upload: wandb sync {where}/wandb/offline-run-*" if os.environ.get("WANDB_MODE") == "offline" else "W&B")
    say(console or out_console, f"{to}: {where} ({hint})")


@app.command()
def query(sql: str = typer.Argument(..., help="one SELECT over the views metrics, finals, runs, sweeps and shifts"),
          out: Path = typer.Option(Path(DEFAULT_STORE), "--out"),
          as_json: bool = typer.Option(False, "--json"),
          timeout: float = typer.Option(60.0, "--timeout", help="seconds before the query is stopped"),
          memory: str = typer.Option("2GB", "--memory", help="DuckDB's memory limit for the query, e.g. 500MB, 8GB")
          ) -> None:
    """Read-only DuckDB SQL over the store: metrics (long format), finals (each run's, point's and seed's last
    logged value per metric), runs and sweeps. Damaged runs are left out, each named in one line on stderr."""
    from icldyn.store import query as run_query

    notes: list[str] = []
    with bad_input():
        cols, rows = run_query(out, sql, timeout_s=timeout, memory=memory, notes=notes)
    for note in notes:
        say(err_console, f"note: {note} (left out of every view; `icldyn check` lists every problem)")
    if as_json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], default=str))
        return
    table = Table()
    for c in cols:
        table.add_column(Text(c))
    for r in rows:
        table.add_row(*cells(*(f"{v:.6g}" if isinstance(v, float) else v for v in r)))
    out_console.print(table)


@app.command("eval")
def eval_(run_: str = typer.Argument(..., metavar="RUN", help="a finished run (directory, id or unique part of it)"),
          shift: list[str] = typer.Option([], "--shift", help="a shift to evaluate on (repeatable; default: every "
                                          "shift; an unknown name lists them)"),
          prompts: int = typer.Option(2000, "--prompts", help="prompts per shift and prompt length"),
          key: int = typer.Option(0, "--key", help="PRNG key of the prompts (folded with each seed and shift)"),
          dtype: Optional[str] = typer.Option(None, "--dtype", help="the model's precision: float32 or float64 "
                                              "(default: the run's train.dtype)"),
          out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """A finished run's models on shifted prompts at every prompt length, with the baselines on the same prompts:
    rows in the run's shifts.parquet (`icldyn query "SELECT * FROM shifts"`) and figures/shifts.png."""
    from icldyn.evaluation import evaluate_run
    from icldyn.store import resolve_run

    with bad_input():
        path = resolve_run(out, run_)
        _setup()
        skipped: set[str] = set()
        if dtype not in (None, "float32", "float64"):
            raise ConfigError(f"--dtype = {dtype!r} is not allowed: must be float32 or float64")
        rows = evaluate_run(path, shift, prompts=prompts, key=key, skipped=skipped, dtype=dtype)
    if skipped:
        say(out_console, f"left out (prompts longer than the model reads): {', '.join(sorted(skipped))}")
    methods = list(dict.fromkeys(r["method"] for r in rows))
    table = Table(title=f"{path.name}: E[(ŷ − y_q)²] at the largest k, mean over seeds")
    for col in ("shift", "point", "k", *methods):
        table.add_column(col)
    for name, point in dict.fromkeys((r["shift"], r["point"]) for r in rows):
        sel = [r for r in rows if r["shift"] == name and r["point"] == point]
        k = max(r["k"] for r in sel)
        err = {m: sum(r["error"] for r in sel if r["k"] == k and r["method"] == m)
               / sum(1 for r in sel if r["k"] == k and r["method"] == m) for m in methods}
        table.add_row(*cells(name, point or "—", k, *(f"{err[m]:.4g}" for m in methods)))
    out_console.print(table)
    say(out_console, f"{len(rows)} rows in {path / 'shifts.parquet'}; figure {path / 'figures' / 'shifts.png'}")


@app.command()
def check(run_: Optional[str] = typer.Argument(None, metavar="[RUN]", help="one run (default: the whole store)"),
          out: Path = typer.Option(Path(DEFAULT_STORE), "--out")) -> None:
    """Verify the store's runs and sweep records (or one run) against the manifests written when each run finished:
    every file there, at its size and SHA-256, each checkpoint's hash. One line per problem; exit 1 if any."""
    from icldyn.store import check as verify_store

    with bad_input():
        rows = verify_store(out, run_)
    for r in rows:
        for problem in r["problems"]:
            say(out_console, f"damaged: {r['kind']} {r['id']}: {problem}")
    bad = [r for r in rows if not r["ok"]]
    say(out_console, f"{len(rows) - len(bad)} of {len(rows)} checked ({sum(r['kind'] == 'run' for r in rows)} runs, "
        f"{sum(r['kind'] == 'sweep' for r in rows)} sweep records) sound" + (f"; {len(bad)} damaged" if bad else ""))
    if bad:
        raise typer.Exit(1)


@app.command()
def verify(paper: Optional[str] = typer.Option(None, "--paper", help="an installed paper (see `icldyn list`; "
                                              "default: all)"),
           quick: bool = typer.Option(False, "--quick"),
           out: Path = typer.Option(Path(DEFAULT_STORE), "--out", help="store for the runs verify trains"),
           as_json: bool = typer.Option(False, "--json")) -> None:
    """Run every computable claim and print claim / theory / measured / tolerance / pass."""
    from icldyn import claims as v
    from icldyn.plugins import papers

    with_claims = [p.name for p in papers().values() if p.claims is not None]
    if paper is not None and paper not in with_claims:
        fail(f"--paper = {paper!r} is not allowed: must be one of {', '.join(with_claims)}")
    _setup()
    with bad_input(), stopped_runs(), progress_bars(not as_json) as reporter:
        claims = v.verify(paper, quick, out, reporter)
    if as_json:
        print(json.dumps([c.asdict() for c in claims], indent=2))  # numbers (NaN as null): diffable across versions
    else:
        table = Table(title="icldyn verify")
        for col in ("paper", "claim", "theory", "measured", "tolerance", "pass"):
            table.add_column(col)
        for c in claims:
            table.add_row(*cells(c.paper, c.claim, *c.display(),
                                 Text("pass", "green") if c.passed else Text("FAIL", "red")))
        out_console.print(table)
    if not all(c.passed for c in claims):
        raise typer.Exit(1)


@app.command()
def doctor(as_json: bool = typer.Option(False, "--json", help="print the report as JSON")) -> None:
    """Versions, JAX backend and devices, the C kernel's status and why, caches, threads: paste it into a bug report."""
    from icldyn.doctor import collect

    _setup()
    info = collect()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for section, items in info.items():
        out_console.print(Text(section, "bold"), highlight=False)
        for key, value in items.items():
            shown = ", ".join(value) if isinstance(value, list) else value
            out_console.print(f"  {key:22s} {shown}", markup=False, highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: usage errors (unknown option, missing value) become one line and exit code 2."""
    try:
        from typer._click.exceptions import UsageError  # typer vendors click (private path)
    except ImportError:  # older typer
        from click.exceptions import UsageError

    try:
        code = typer.main.get_command(app).main(standalone_mode=False)
    except UsageError as err:
        hint = f" (see `icldyn {err.ctx.info_name} --help`)" if err.ctx and err.ctx.info_name != "icldyn" else ""
        err_console.print(f"error: {err.format_message()}{hint}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False, highlight=False)
        sys.exit(130)
    except OSError as err:  # a file the system refused (no permission, a read-only or full disk): named in one line
        if os.environ.get("ICLDYN_DEBUG"):
            raise
        err_console.print(f"error: {err.filename + ': ' if err.filename else ''}{err.strerror or err}",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    except Exception as err:  # a bug: still one line (ICLDYN_DEBUG=1 shows the traceback)
        if os.environ.get("ICLDYN_DEBUG"):
            raise
        first = str(err).splitlines()[0] if str(err) else ""
        err_console.print(f"error: internal error ({type(err).__name__}: {first})"
                          "; rerun with ICLDYN_DEBUG=1 for the traceback and please report it",
                          markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
