"""Sweeps: a grid of whole runs (``icldyn sweep NAME --grid key=v1,v2 … [--backend local|ray]``).

Every point of the grid's product is a normal run directory in the store; the sweep itself is a record,
``<store>/sweeps/<sweep_id>.json`` (the target, the axes, each point's overrides, run id and status),
rewritten atomically after every job, so a killed sweep resumed with ``--resume SWEEP_ID`` reruns only
the points without a finished run (on the local backend a job killed mid-training continues from its
checkpoints). Given no axes, a sweep runs the recipe's own grid — the points of its paper figure — and,
when all are finished, writes the recipe's combined report (figures, table, fitted slopes) built from
their run directories to ``<store>/sweeps/<sweep_id>/`` (:func:`report`): the figure of ``icldyn run
RECIPE``, with its points spread over jobs, processes or a Ray cluster.

Points are grouped into jobs: points whose configs differ only in fields that never change a program's
shapes (the recipe's ``group_fields``: for the linear-transformer recipes the learning rate, the seeds and the
data law's Σ, task prior and noise) are one job — one compiled program: points differing only in ``train.lr`` on a
learning-rate axis (:func:`icldyn.train.loop.train` with ``lrs``), the rates sharing every seed's batches,
held-out sets and baselines; points differing in seeds or data law stacked on the seed axis, each slot at
its point's rate (``slot_lrs``). Every other point is a job of its own. Jobs run in an order that keeps
equal shapes together, so later jobs reuse compiled programs through the persistent compilation cache.

With ``backend="ray"`` each job is a Ray task declaring its CPU (``train.threads``) and GPU needs; the
task runs the job into a private temporary store and returns its run directories' files, which the
driver writes into the store (each published by one rename). ``ray.init()`` starts a local instance
unless an ``address`` of an existing cluster is given.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import secrets
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from icldyn import plots
from icldyn.config import ConfigError, RunConfig, build, known_field, parse_value, set_dotted
from icldyn.plugins import GROUP, get, recipe_of
from icldyn.recipe import Point, Reporter, Result, SilentReporter
from icldyn.runner import execute_group, execution, versions
from icldyn.runner import report as report_md
from icldyn.store import RunDamaged, RunDir, StoreError, damage, read_record, write_json, write_text, writing

TOP_LEVEL = ("seeds", "seed")
MAX_JOB = 64  # points per job at most: a job's slots, states and held-out sets all live in memory at once


def parse_axes(items: list[str]) -> dict[str, list]:
    """``key=v1,v2,…`` items → ordered axes; values are TOML scalars (numbers, booleans, bare strings)."""
    axes: dict[str, list] = {}
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        vals = [parse_value(v.strip()) for v in values.split(",") if v.strip()]
        if not sep or not key or not vals:
            raise ConfigError(f"bad --grid {item!r}: expected key=v1,v2,…, e.g. --grid train.lr=0.01,0.02")
        section, _, field = key.partition(".")
        if key not in TOP_LEVEL and not known_field(section, field):
            raise ConfigError(f"--grid key {key!r} is not seeds, seed or a data.*, model.* or train.* field")
        axes[key] = vals
    return axes


def recipe_axes(raw: dict[str, Any], quick: bool) -> tuple[dict[str, Any], dict[str, list]]:
    """A sweep given no axes runs the recipe's own grid (its paper figure's points) as its points: the
    target without its grid, and that grid as the axes."""
    cfg = recipe_of(raw).config(raw, quick=quick)
    return {**raw, "grid": {}}, {key: list(values) for key, values in cfg.grid.items()}


def point_configs(raw: dict[str, Any], quick: bool, axes: dict[str, list]) -> list[tuple[dict, RunConfig]]:
    """Every point's overrides and validated config (all checked before anything trains); a recipe may
    derive further overrides from a point's (``Recipe.derive``: N = K³ of the phase-scaling figure)."""
    exp = recipe_of(raw)
    base = exp.config(raw, quick=quick) if exp.derive else None
    out = []
    for values in itertools.product(*axes.values()):
        over = dict(zip(axes, values))
        point_raw = copy.deepcopy(raw)
        for key, value in {**over, **(exp.derive(over, base) if exp.derive else {})}.items():
            set_dotted(point_raw, key, value)
        out.append((over, exp.config(point_raw, quick=quick)))
    return out


def _shape_key(cfg: RunConfig, ignore: tuple[str, ...] = ("train.lr",)) -> str:
    """The config without the keys ``ignore``: points with equal keys compile to the same programs."""
    dump = cfg.model_dump()
    for key in ignore:
        section, _, name = key.rpartition(".")
        (dump[section] if section else dump)[name] = None
    return json.dumps(dump, sort_keys=True)


def jobs(configs: list[RunConfig], todo: list[int], group: bool = True) -> list[list[int]]:
    """The points ``todo`` as jobs: points that differ only in the recipe's ``group_fields`` (learning rate,
    seeds, data law) are one job where it has a group runner (and ``group``), every other point is a job of
    its own; jobs of equal shapes are adjacent."""
    groups: dict[str, list[int]] = {}
    for i in sorted(todo, key=lambda i: _shape_key(configs[i])):
        exp = get(configs[i].experiment)
        together = group and exp.group_runner is not None
        key = _shape_key(configs[i], exp.group_fields) if together else f"{_shape_key(configs[i])}#{i}"
        groups.setdefault(key, []).append(i)
    return [job[k:k + MAX_JOB] for job in groups.values() for k in range(0, len(job), MAX_JOB)]


def _record_path(store: Path, sweep_id: str) -> Path:
    return store / "sweeps" / f"{sweep_id}.json"


def load_record(store: str | Path, sweep_id: str) -> dict[str, Any]:
    path = _record_path(Path(store), sweep_id)
    if not path.is_file():
        raise StoreError(f"no sweep {sweep_id!r} in {str(store)!r} (records are in {str(Path(store) / 'sweeps')})")
    return read_record(path)  # a damaged record: RunDamaged, one line


def list_sweeps(store: str | Path) -> list[dict[str, Any]]:
    """Every sweep record in the store: id, recipe, axes, points, finished points, report."""
    out = []
    for f in sorted(Path(store).glob("sweeps/*.json")):
        try:
            r = read_record(f)
        except RunDamaged as err:
            out.append({"sweep_id": f.stem, "experiment": "—", "axes": f"damaged: {err.file}: {err.reason}",
                        "points": 0, "finished": 0, "report": None})
            continue
        out.append({"sweep_id": r["sweep_id"], "experiment": r["target"].get("experiment"),
                    "axes": ", ".join(f"{k}={v}" for k, v in r["axes"].items()), "points": len(r["points"]),
                    "finished": sum(p["status"] == "finished" for p in r["points"]), "report": r.get("report")})
    return out


def final_values(rows: dict[str, list], metric: str, point: str = "point") -> dict[tuple[str, str], list[float]]:
    """(run_id, in-run point) → each seed's last finite logged value of ``metric`` (a diverged seed's from before it
    diverged), from long-format metric rows; ``point`` names the rows' point column."""
    last: dict[tuple, tuple[int, float]] = {}
    for run, pt, seed, step, m, v in zip(rows["run_id"], rows[point], rows["seed"], rows["step"], rows["metric"],
                                         rows["value"]):
        if m == metric and np.isfinite(v) and step >= last.get((run, pt, seed), (-1, 0.0))[0]:
            last[(run, pt, seed)] = (step, v)
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (run, pt, _), (_, v) in last.items():
        out[(run, pt)].append(v)
    return out


def final_losses(store: str | Path, record: dict[str, Any]) -> dict[str, str]:
    """run_id → the final value of its recipe's main metric over its seeds, "mean ± sd" over the seeds' last finite
    logged values, one entry per in-run grid point."""
    metric = recipe_of(dict(record["target"])).metric
    out = {}
    for p in record["points"]:
        path = Path(store) / (p["run_id"] or "") / "metrics.parquet"
        if not p["run_id"] or not path.is_file() or damage(path.parent, ("metrics.parquet",)):
            continue
        t = pq.read_table(path).to_pydict()
        finals = sorted(final_values(t, metric).items())
        out[p["run_id"]] = "; ".join(f"{pt + ': ' if pt else ''}{metric} {np.mean(v):.4g} ± {np.std(v):.2g}"
                                     for (_, pt), v in finals)
    return out


def run_job_files(cfg_raws: list[dict[str, Any]]) -> list[tuple[str, dict[str, bytes]]]:
    """A Ray task's body: run one job into a private temporary store; return each run's id and files."""
    from icldyn.runtime import setup_jax

    setup_jax()
    with tempfile.TemporaryDirectory() as tmp:
        done = execute_group([build(raw) for raw in cfg_raws], tmp)
        return [(rd.run_id, {str(p.relative_to(rd.path)): p.read_bytes() for p in rd.path.rglob("*") if p.is_file()})
                for rd, _ in done]


def publish(store: Path, run_id: str, files: dict[str, bytes]) -> None:
    """Write a run directory shipped back by a worker: into a hidden directory, then one rename."""
    tmp = store / f".{run_id}.incoming"
    for rel, data in files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)
    os.rename(tmp, store / run_id)


def shipped(folder: Path) -> dict[str, Any]:
    """The Ray ``runtime_env`` that ships icldyn and every installed plug-in to the workers, so that a node with a
    bare Python (Ray and icldyn's dependencies, no icldyn) runs a sweep: each plug-in's top-level package (icldyn's
    own papers included) as ``py_modules``, and beside it a minimal ``<name>-<version>.dist-info`` of each
    distribution registering ``icldyn.papers`` entry points (its METADATA and ``entry_points.txt``), through which
    the worker finds the same plug-ins (written into ``folder``). Ray uploads each folder when the job starts
    (``ray.init(runtime_env=…)``; once per content: it is named by its hash). A driver that calls ``ray.init`` itself
    passes ``runtime_env=shipped(folder)`` for the same."""
    import importlib
    import importlib.metadata

    import icldyn

    code, dists = {"icldyn": Path(icldyn.__file__).parent}, {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        top = importlib.import_module(ep.value.split(":")[0].split(".")[0])
        code[top.__name__] = Path(top.__file__).parent if top.__file__.endswith("__init__.py") else Path(top.__file__)
        if ep.dist is not None:
            dists.setdefault(ep.dist.name, ep.dist)
    for name, dist in sorted(dists.items()):
        info = folder / f"{name.replace('-', '_')}-{dist.version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {dist.version}\n")
        (info / "entry_points.txt").write_text(dist.read_text("entry_points.txt") or "")
    return {"py_modules": [str(p) for p in code.values()] + [str(p) for p in sorted(folder.glob("*.dist-info"))],
            "excludes": ["__pycache__", "*.pyc"]}


def _ray_runner(address: str | None):
    """(submit, wait) over Ray: submit(cfgs) -> future; wait(futures) -> (done future, [(run_id, files)])."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--backend = 'ray' needs Ray: pip install 'icldyn[ray]'") from None
    import jax

    started = not ray.is_initialized()
    if started:  # the job ships icldyn and its plug-ins (Ray uploads folders only for a whole job)
        with tempfile.TemporaryDirectory(prefix="icldyn-ship-") as folder:
            env = shipped(Path(folder))
            quiet = {"runtime_env": env, "log_to_driver": False, "logging_level": "WARNING"}
            ray.init(address=address, **quiet) if address else ray.init(include_dashboard=False, **quiet)
    # one GPU a task where the cluster has GPUs (the driver's own backend may be a CPU: a login node), else none
    gpus = 1 if ray.cluster_resources().get("GPU", 0) >= 1 or jax.default_backend() == "gpu" else 0

    def submit(cfgs: list[RunConfig]):
        threads = execution(get(cfgs[0].experiment), cfgs[0])["threads"]
        task = ray.remote(num_cpus=threads, num_gpus=gpus)(run_job_files)
        return task.remote([cfg.model_dump() for cfg in cfgs])

    def wait(futures):
        (done,), _ = ray.wait(list(futures), num_returns=1)
        return done, ray.get(done)

    return submit, wait, (ray.shutdown if started else (lambda: None))


def sweep(raw: dict[str, Any] | None, quick: bool, axes: dict[str, list] | None, store: str | Path,
          reporter: Reporter | None = None, resume: str | None = None, backend: str = "local",
          address: str | None = None, group: bool = True) -> dict[str, Any]:
    """Run (or resume) a sweep; returns its record. ``reporter`` shows the sweep's points done (and, on the
    local backend, each point's training). ``group=False``: every point a job of its own (each point's
    numbers then bit for bit those of its config run alone)."""
    store = Path(store)
    if resume is not None:
        record = load_record(store, resume)
        raw, quick, axes, group = record["target"], record["quick"], record["axes"], record.get("group", True)
    else:
        recipe_grid = not axes
        if recipe_grid:
            raw, axes = recipe_axes(raw, quick)
            recipe_grid = bool(axes)  # a recipe without a grid: one point, its own run's report
        record = {"sweep_id": f"{time.strftime('%Y%m%d-%H%M%S')}-{raw['experiment']}-"
                              f"{secrets.token_hex(3)}", "target": raw, "quick": quick, "axes": axes,
                  "recipe_grid": recipe_grid, "group": group, "points": []}
    configs = point_configs(raw, quick, axes)
    if not record["points"]:
        record["points"] = [{"overrides": over, "run_id": None, "status": "pending"} for over, _ in configs]
    path = _record_path(store, record["sweep_id"])
    with writing(f"store {str(store)!r}"):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, record)

    def finished_run(i: int) -> bool:
        run_id = record["points"][i]["run_id"]
        return bool(run_id) and (store / run_id / "summary.json").is_file() and not damage(store / run_id)

    todo = jobs([cfg for _, cfg in configs], [i for i in range(len(configs)) if not finished_run(i)], group)
    finished = len(configs) - sum(map(len, todo))
    overall = (reporter or SilentReporter()).start(f"sweep {record['sweep_id']}", len(configs))
    overall(finished, {})

    def done(job: list[int], runs: list[tuple[str, str]], start: float) -> None:
        nonlocal finished
        for i, (run_id, status) in zip(job, runs):
            record["points"][i].update({"run_id": run_id, "status": status, "wall_s": time.time() - start,
                                        "job_size": len(job)})
        write_json(path, record)
        finished += len(job)
        overall(finished, {})

    if backend == "ray":
        submit, wait, close = _ray_runner(address)
        try:
            futures = {submit([configs[i][1] for i in job]): (job, time.time()) for job in todo}
            while futures:
                future, results = wait(futures)
                job, start = futures.pop(future)
                for run_id, files in results:
                    publish(store, run_id, files)
                done(job, [(run_id, json.loads(files["summary.json"])["status"]) for run_id, files in results], start)
        finally:
            close()
        return report(store, record)
    for job in todo:
        start = time.time()
        rds = []
        for i in job:
            point, cfg = record["points"][i], configs[i][1]
            if point["run_id"] and (store / point["run_id"] / "config.toml").is_file() and not (
                    store / point["run_id"] / "summary.json").exists():
                rds.append(RunDir.open(store / point["run_id"]))  # interrupted mid-job: continue from checkpoints
            else:
                rds.append(RunDir.create(store, cfg.experiment))
                rds[-1].write_config(cfg)
                point.update({"run_id": rds[-1].run_id, "status": "running"})
        write_json(path, record)
        results = execute_group([configs[i][1] for i in job], store, reporter, rds)
        done(job, [(rd.run_id, summary["status"]) for rd, summary in results], start)
    return report(store, record)


class _ReportDir:
    """Where a sweep's combined report goes: ``<store>/sweeps/<sweep_id>/`` (report.md, summary.json, figures/)."""

    def __init__(self, path: Path):
        self.path = path
        (path / "figures").mkdir(parents=True, exist_ok=True)

    def figure(self, name: str) -> Path:
        return self.path / "figures" / f"{name}.png"


def report(store: Path, record: dict[str, Any]) -> dict[str, Any]:
    """A finished sweep's report in ``<store>/sweeps/<sweep_id>/`` (report.md, summary.json, figures/), its
    path recorded as ``record["report"]``. A sweep over a recipe's own grid gets the recipe's combined
    report — the figures, table and notes ``icldyn run RECIPE`` draws in one directory — built from its
    points' run directories; any other sweep the final value of its main loss metric per point and against
    each numeric axis (:func:`axes_summary`). Returns the record."""
    exp = recipe_of(record["target"])
    if any(p["status"] not in ("finished", "diverged") for p in record["points"]):
        return record  # not every point has run yet
    combined = record.get("recipe_grid") and exp.combine is not None
    cfg = exp.config({**record["target"], "grid": record["axes"]} if combined else record["target"],
                     quick=record["quick"])
    point_type = exp.result.point_type()
    points: list[Point] = []
    rows: dict[str, list] = defaultdict(list)
    for p in record["points"]:
        run = store / p["run_id"]
        label = ",".join(f"{k}={v}" for k, v in p["overrides"].items())
        name = lambda q: ", ".join(x for x in (label, q) if x)  # noqa: E731  (the labels of an in-run grid)
        summary = json.loads((run / "summary.json").read_text())
        for q in summary["points"]:
            q = {**q, "point": name(q["point"]), "run_point": q["point"], "run_id": p["run_id"]}
            for key in ("grid", "overrides"):
                if key in q:
                    q[key] = {**p["overrides"], **q[key]}
            points.append(point_type.model_validate(q))
        table = pq.read_table(run / "metrics.parquet").to_pydict()
        table["run_point"] = table["point"]
        table["point"] = [name(x) for x in table["point"]]
        for key, values in table.items():
            rows[key].extend(values)
    out = _record_path(store, record["sweep_id"]).with_suffix("")
    status = "finished" if all(p["status"] == "finished" for p in record["points"]) else "diverged"
    wall = sum(p["wall_s"] / p["job_size"] for p in record["points"] if "wall_s" in p)
    if combined:
        result = exp.result.model_validate(exp.combine(cfg, points, rows, _ReportDir(out)))
        result = result.model_copy(update={"status": result.seeds_status(), "wall_s": wall})
    else:
        result = axes_summary(record, points, rows, _ReportDir(out), status, wall, exp.metric)
    meta = {"run_id": f"sweep {record['sweep_id']}", "experiment": cfg.experiment, "paper": exp.paper,
            "description": exp.description, "versions": versions()}
    summary = {**meta, **result.model_dump(exclude_unset=True)}
    write_text(out / "report.md", report_md(cfg, meta, result))
    write_json(out / "summary.json", summary)
    record["report"] = str(out.relative_to(store) / "report.md")
    write_json(_record_path(store, record["sweep_id"]), record)
    return record


def axes_summary(record: dict[str, Any], points: list[Point], rows: dict[str, list], rd, status: str,
                 wall_s: float, metric: str) -> Result:
    """The final value of the recipe's main metric (mean, sd, min, max over seeds) of every sweep point (and
    in-run grid point), as a table and, against each numeric axis, a figure."""
    diverged = {(q.run_id, q.run_point): sum(s.status == "diverged" for s in q.seeds) for q in points}
    if metric not in set(rows["metric"]):
        return AxesResult(status=status, wall_s=wall_s, figures=[])
    finals = final_values(rows, metric, point="run_point")
    by_run = {p["run_id"]: p["overrides"] for p in record["points"]}
    entries = [(by_run[run], pt, np.asarray(v)) for (run, pt), v in finals.items()]
    axes = list(record["axes"])
    table = {"columns": [*axes, "in-run point", f"final {metric} (mean ± sd over seeds)", "diverged seeds"],
             "rows": [[*(over[a] for a in axes), pt or "—", plots.mean_sd(v.mean(), v.std(), len(v)),
                       diverged.get((run, pt), 0)] for (run, pt), (over, _, v) in zip(finals, entries)]}
    figures = []
    for axis in axes:
        if len(record["axes"][axis]) < 2 or not all(isinstance(x, (int, float)) for x in record["axes"][axis]):
            continue
        series: dict[str, list] = defaultdict(list)
        for over, pt, v in entries:
            rest = ", ".join([f"{a}={over[a]}" for a in axes if a != axis] + ([pt] if pt else []))
            series[rest].append((over[axis], v.mean(), v.min(), v.max()))
        series = {k: tuple(np.array(c) for c in zip(*sorted(pts))) for k, pts in series.items()}
        figures.append(plots.final_vs_axis(record["target"]["experiment"], axis, metric, series, rd))
    return AxesResult(status=status, wall_s=wall_s, metric=metric, table=table, figures=figures,
                      report_lines=[f"Final {metric}: the value at each seed's last finite logged row (a diverged "
                                    "seed's from before it diverged), per sweep point. The run directories hold "
                                    "everything else.", ""])


class AxesResult(Result):
    """A sweep's report over axes that are not its recipe's own grid: the final main loss per point."""

    metric: str | None = None
