"""Execute one run: create its directory, write the resolved config, run the recipe, then write
summary.json (measured beside theory, versions) and report.md."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any

import jax

from icldyn import __version__, plots
from icldyn.config import ConfigError, RunConfig, with_overrides
from icldyn.plugins import get
from icldyn.recipe import Recipe, Reporter, Result, SilentReporter, Table, Trained
from icldyn.store import RunDir, writing
from icldyn.train.loop import local_devices

_IMPORTED = time.time()
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")
_compile_s = [0.0]  # seconds JAX has spent tracing, lowering and compiling in this process (a monitoring listener)


def _on_duration(event: str, duration: float, **_: object) -> None:
    if event in COMPILE_EVENTS:
        _compile_s[0] += duration


jax.monitoring.register_event_duration_secs_listener(_on_duration)


def process_start() -> float:
    """When this process started (epoch seconds; Linux /proc), else when icldyn's runner was imported: a CLI run's
    wall time counts from here (interpreter, imports, config)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _IMPORTED


def versions() -> dict[str, str]:
    out = {"icldyn": __version__, "python": platform.python_version()}
    for pkg in ("jax", "jaxlib", "optax", "numpy"):
        out[pkg] = importlib.metadata.version(pkg)
    out["backend"] = jax.default_backend()
    return out


def points(exp: Recipe, cfg: RunConfig) -> list[tuple[str, RunConfig]]:
    """(label, config) of every grid point, as the recipe derives it (e.g. N = K³ per K)."""
    from icldyn.recipe import grid_points

    return [(label, with_overrides(cfg, {**over, **(exp.derive(over, cfg) if exp.derive and over else {})}))
            for label, over in grid_points(cfg)]


def execution(exp: Recipe, cfg: RunConfig) -> dict[str, Any]:
    """What runs ``cfg`` on this machine — backend, devices, threads and what the model reports
    (:meth:`~icldyn.config.ModelSection.execution`: e.g. a C kernel's status and its ``threads``) — for
    summary.json. Every grid point is checked: a setting this machine cannot honour raises ConfigError before any
    work."""
    try:
        n = min(local_devices(p.train.devices) for _, p in points(exp, cfg))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    out: dict[str, Any] = {"backend": jax.default_backend(), "devices": n,
                           "device_names": [str(d) for d in jax.local_devices()[:n]], "threads": 1}
    per = [p.model.execution(p) for _, p in points(exp, cfg)]
    per = [e for e in per if e]
    if per:
        out.update(per[0])
        if any(p != per[0] for p in per):
            out["points"] = per
    return out


def assumptions_not_met(exp: Recipe, cfg: RunConfig) -> list[str]:
    """The recipe's assumption check at every grid point (as the point is derived), one line each."""
    if exp.assumptions is None:
        return []
    out = [f"{label}: {a}" if label else a for label, point in points(exp, cfg) for a in exp.assumptions(point)]
    return list(dict.fromkeys(out))


def execute(cfg: RunConfig, store: str | Path, reporter: Reporter | None = None,
            resume: RunDir | None = None, started: float | None = None) -> tuple[RunDir, dict[str, Any]]:
    """Run ``cfg`` into a new run directory, or continue the interrupted ``resume`` (its points restart from
    their checkpoints; finished points are restored, not retrained). ``started``: when the work began (the CLI: its
    process start), for the wall time's start-up part; default now."""
    return execute_group([cfg], store, reporter, [resume], started)[0]


def execute_group(cfgs: list[RunConfig], store: str | Path, reporter: Reporter | None = None,
                  resume: list[RunDir | None] | None = None,
                  started: float | None = None) -> list[tuple[RunDir, dict[str, Any]]]:
    """Run configs that differ only in ``train.lr`` as one program (the recipe's group runner), each into its
    own run directory (new, or the interrupted one given in ``resume``). The wall time counts from ``started``
    (default now) and is shown apart (``timing``): start-up (imports, config and machine checks, a kernel build)
    until training begins, then training and figures, of which JAX's tracing and XLA compilation."""
    from icldyn.runtime import setup_jax

    started = time.time() if started is None else started
    setup_jax()  # float64 available (as from the CLI and icldyn.run): float64 configs and theory would be float32
    exp = get(cfgs[0].experiment)
    if len(cfgs) > 1 and exp.group_runner is None:
        raise ValueError(f"{exp.name} has no group runner: run its configs one by one")
    ran = [execution(exp, cfg) for cfg in cfgs]  # before any directory is made: what cannot run here is refused
    for cfg in cfgs:
        held_out_fits(exp, cfg)
    unmet = [assumptions_not_met(exp, cfg) for cfg in cfgs]
    rds = []
    for cfg, rd in zip(cfgs, resume or [None] * len(cfgs)):
        if rd is None:
            rd = RunDir.create(store, cfg.experiment)
            with writing(f"store {str(store)!r}"):
                rd.write_config(cfg)
        rds.append(rd)
    reporter = reporter or SilentReporter()
    start, compiled = time.time(), _compile_s[0]
    try:
        trained = exp.group_runner(cfgs, rds, reporter) if len(cfgs) > 1 else [exp.runner(cfgs[0], rds[0], reporter)]
        # a sweep job's many runs draw their figures in a process pool (plots.draw_many)
        results = plots.draw_many(finish, [(exp, cfg, rd, t) for cfg, rd, t in zip(cfgs, rds, trained)])
    except KeyboardInterrupt:
        _release(rds)
        raise RunInterrupted(rds) from None
    except Exception as err:
        if _too_big(err):  # refused before training, or XLA could not allocate: bad input, no crashed run left
            _release(rds)
            for rd, old in zip(rds, resume or [None] * len(rds)):
                if old is None:
                    shutil.rmtree(rd.path, ignore_errors=True)
            raise ConfigError(_too_big(err)) from None
        for rd in rds:
            rd.mark_crashed(err)
        _release(rds)
        raise RunCrashed(rds, err) from err
    end = time.time()
    wall = end - started
    timing = {"startup_s": start - started, "run_s": end - start, "compile_s": _compile_s[0] - compiled}
    out = []
    for cfg, rd, result, info, outside in zip(cfgs, rds, results, ran, unmet):
        result = result.model_copy(update={"status": result.seeds_status(), "wall_s": wall})
        meta = {"run_id": rd.run_id, "experiment": cfg.experiment, "paper": exp.paper,
                "description": exp.description, "versions": versions(), "execution": info,
                "assumptions_not_met": outside, "timing": timing}
        summary = {**meta, **result.model_dump(exclude_unset=True), "status": result.status, "wall_s": wall}
        rd.write_report(report(cfg, meta, result))
        rd.write_summary(summary)  # last: a run directory with summary.json is finished
        rd.finish()
        rd.release()
        out.append((rd, summary))
    return out


def finish(exp: Recipe, cfg: RunConfig, rd: RunDir, trained: Trained | Result) -> Result:
    """A runner's output as the recipe's typed result: a :class:`Trained` run's points (validated as the recipe's
    point type) through the recipe's ``combine``; a Result as it is."""
    if isinstance(trained, Result):
        return exp.result.model_validate(trained)
    if exp.combine is None:
        raise TypeError(f"{exp.name}'s runner returned trained points but the recipe has no combine()")
    points = [exp.result.point_type().model_validate(p) for p in trained.points]
    return exp.result.model_validate(exp.combine(cfg, points, trained.rows, rd))

def held_out_fits(exp: Recipe, cfg: RunConfig) -> None:
    """Refuse, before any work, a run whose held-out sets alone (:meth:`~icldyn.config.DataSection.held_out_bytes`,
    its largest grid point) do not fit in the memory available: one line with the estimate and the limit."""
    from icldyn.runtime import TooBig, check_fits

    need, where = max((p.data.held_out_bytes(p), label) for label, p in points(exp, cfg))
    try:
        check_fits(f"drawing the held-out sets ({cfg.seeds} seed(s) × 2 × data.test_size prompts of data.n + 1 points"
                   + (f"; grid point {where}" if where else "") + ")", need,
                   "lower data.test_size, data.n or seeds (or run on a larger machine)")
    except TooBig as err:
        raise ConfigError(str(err)) from None


def _too_big(err: Exception) -> str | None:
    """One line where ``err`` says the program does not fit in memory (our estimate, or XLA's allocator)."""
    from icldyn.runtime import TooBig

    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    if isinstance(err, TooBig):
        return first
    if isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in first or "Out of memory" in first:
        return f"the program does not fit in memory ({first[:200]}); lower train.batch, data.n, data.test_size or seeds"
    return None


def _release(rds: list[RunDir]) -> None:
    for rd in rds:
        rd.release()


class RunInterrupted(Exception):
    """Ctrl-C stopped these runs; their directories keep every flushed chunk and checkpoint (``--resume``)."""

    def __init__(self, rds: list[RunDir]):
        self.rds = rds
        super().__init__(resume_hint(rds, "interrupted"))


class RunCrashed(Exception):
    """An error stopped these runs (recorded as crash.json in each directory)."""

    def __init__(self, rds: list[RunDir], err: BaseException):
        self.rds, self.err = rds, err
        super().__init__(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}; "
                         + resume_hint(rds, "crashed"))


def resume_hint(rds: list[RunDir], what: str) -> str:
    """One line naming the runs, their last logged step and the command that continues each."""
    from icldyn.store import last_step

    parts = []
    for rd in rds:
        step = last_step(rd.path)
        parts.append(f"run {rd.run_id} {what}" + (f" after step {step}" if step is not None else "")
                     + f"; continue it with: icldyn run --resume {rd.path}")
    return " | ".join(parts)


def markdown_table(table: Table) -> list[str]:
    return ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)] + [
        "| " + " | ".join(str(c) for c in row) + " |" for row in table.rows]


def typed(summary: dict[str, Any]) -> Result:
    """The typed result of a summary (summary.json, or what :func:`execute` returns): its recipe's Result type."""
    return get(summary["experiment"]).result.model_validate(summary)


def wall_time(wall_s: float | None, timing: dict[str, float] | None) -> str:
    """``45.2 s (start-up 3.1 s; training and figures 42.1 s, of which JAX tracing and XLA compilation 12.0 s)``."""
    if wall_s is None:
        return "—"
    if not timing:
        return f"{wall_s:.1f} s"
    return (f"{wall_s:.1f} s (start-up {timing['startup_s']:.1f} s; training and figures {timing['run_s']:.1f} s, of "
            f"which JAX tracing and XLA compilation {timing['compile_s']:.1f} s)")


def spike_lines(points) -> list[str]:
    """One line per seed whose held-out loss spiked (non-finite or above ``train.max_loss``) while its training went
    on: recorded, not a divergence (divergence is judged on the training loss)."""
    return [f"held-out spike: {'point ' + p.point + ', ' if p.point else ''}seed {s.seed} at step"
            f"{'s' if len(s.spikes) > 1 else ''} {', '.join(map(str, s.spikes))} (non-finite or above "
            "train.max_loss; recorded, training went on)" for p in points for s in p.seeds if s.spikes]


def report(cfg: RunConfig, meta: dict[str, Any], result: Result) -> str:
    """report.md: what ran, the recipe's table of measured beside predicted, its notes, the figures."""
    outside = meta.get("assumptions_not_met")
    lines = [f"# {meta['experiment']} — {meta['run_id']}", "", meta["description"]
             + (" — *the recipe's aim; this run is outside the assumptions it rests on (below)*" if outside else ""),
             "", f"Status: **{result.status}**; wall time {wall_time(result.wall_s, meta.get('timing'))}; "
             f"{cfg.seeds} seed(s); dtype {cfg.train.dtype}; versions: "
             + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), ""]
    ex = meta.get("execution", {})
    if ex:
        names = ex.get("device_names", ex["devices"])  # runs before 2026-12: "devices" listed the names
        share = (f", each program's {cfg.seeds} seed(s) split over {ex['devices']} devices, "
                 f"{-(-cfg.seeds // ex['devices'])} per device (padded to a multiple of them)"
                 if isinstance(ex["devices"], int) and ex["devices"] > 1 else "")
        lines += [f"Ran on {ex['backend']} ({', '.join(names)}){share}, {ex['threads']} thread(s)"
                  + (f": {ex['note']}" if ex.get("note") else "") + ".", ""]
    if outside:
        lines += ["**Outside the paper's assumptions** (the run went on; what needs them is not shown):", ""]
        lines += [f"- {a}" for a in outside] + [""]
    spikes = spike_lines(getattr(result, "points", None) or [])
    if spikes:
        lines += [f"- {line}" for line in spikes] + [""]
    if result.table:
        lines += markdown_table(result.table) + [""]
    lines += result.report_lines
    for fig in result.figures:
        lines += [f"![{Path(fig).stem}]({fig})", ""]
    return "\n".join(lines)
