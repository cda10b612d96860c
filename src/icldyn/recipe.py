"""Recipes: what a paper plug-in declares for each named job, and the runner skeleton every recipe shares.

A :class:`Recipe` is a set of overrides of the config defaults (the paper size; they name the data and model kinds),
further overrides for ``--quick`` (under a minute on a laptop CPU), and a runner that trains into a run directory:
it yields :class:`Job` s to :func:`run_jobs` and returns the :class:`Trained` points and rows, from which the
recipe's ``combine`` draws its figures, table and notes. The callbacks' signatures are :class:`typing.Protocol` s
(:class:`Runner`, :class:`GroupRunner`, :class:`Combine`, :class:`Derive`, :class:`Assumptions`, :class:`Summarise`)
that a type checker holds a plug-in to. Plug-ins list their recipes in their :class:`~icldyn.plugins.Paper`;
``icldyn list`` shows every installed one. ``docs/plugins.md`` walks through one.
"""

from __future__ import annotations

import itertools
import time
import typing
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, NamedTuple, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from icldyn.config import ConfigError, RunConfig, build, merge, section_of
from icldyn.store import RunDir
from icldyn.train.loop import History, Optimizer, Problem, history_slots, local_devices, take_slots, train


class Typed(BaseModel):
    """Base of result types: validated on construction, NumPy scalars and arrays accepted as values."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow")  # declared fields validated; more kept

    def __repr_args__(self):
        """The repr, matrices (arrays, nested lists) and long lists shown by their shape, not their numbers."""
        for name, value in super().__repr_args__():
            yield name, _Brief.of(value)


class _Brief:
    """A matrix or a long list in a repr: ``<array float32 (3, 5, 5)>``, ``<list 2×5×5>``."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @staticmethod
    def of(value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.size > 8:
            return _Brief(f"<array {value.dtype} {value.shape}>")
        if isinstance(value, list) and (len(value) > 8 or any(isinstance(v, list) for v in value)):
            shape, v = [], value
            while isinstance(v, list):
                shape.append(len(v))
                v = v[0] if v else None
            return _Brief(f"<list {'×'.join(map(str, shape))}>")
        return value


class Seed(Typed):
    """One seed of a point: a paper subclasses it with what it measured per seed. ``status`` and ``diverged_at``
    come from the training history (:func:`run_jobs` sets them); a seed without a status is an error."""

    seed: int
    status: Literal["finished", "diverged"]
    diverged_at: int | None = None
    spikes: list[int] = []  # steps where a held-out loss spiked (non-finite or above train.max_loss): recorded only


class Point(Typed):
    """One trained grid point (or method at it) of a run; a paper subclasses it with what it measured. A sweep's
    gathered report adds ``run_id`` and ``run_point`` (the label inside its run)."""

    point: str = ""
    grid: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    seeds: list[Seed] = []
    tuning: bool = False  # a setting tried while tuning (a learning rate not the best): its divergence is a result
    run_id: str | None = None
    run_point: str | None = None


class Table(Typed):
    columns: list[str]
    rows: list[list[Any]]


class Result(Typed):
    """What a recipe's run comes to — and, with the run's metadata, its summary.json — read by attribute by the
    paper's claims and figures, the sweeps and the CLI. A paper subclasses it with its point type (``points``) and
    its recipe-level findings (fitted slopes, tracking, …); unset fields are None. ``status`` (diverged when a seed
    of a point that is not ``tuning`` diverged) and ``wall_s`` are set by the core (:func:`icldyn.runner.execute`),
    not by the recipe."""

    status: Literal["finished", "diverged"] | None = None
    wall_s: float | None = None
    points: list[Point] = []
    table: Table | None = None
    figures: list[str] = []
    report_lines: list[str] = []
    headline: list[str] = []

    @classmethod
    def point_type(cls) -> type[Point]:
        return typing.get_args(cls.model_fields["points"].annotation)[0]

    def seeds_status(self) -> Literal["finished", "diverged"]:
        """Diverged when a seed of a point that is not ``tuning`` diverged."""
        bad = any(s.status == "diverged" for p in self.points if not p.tuning for s in p.seeds)
        return "diverged" if bad else "finished"


class Reporter(Protocol):
    """Progress sink: ``start`` returns the per-chunk callback of one training."""

    def start(self, description: str, total: int) -> Callable[[int, dict], None]: ...


class SilentReporter:
    def start(self, description: str, total: int) -> Callable[[int, dict], None]:
        return lambda step, metrics: None


Rows = dict[str, list]  # long-format metric rows: run_id, point, seed, step, metric, value (one list each)


class Trained(NamedTuple):
    """What :func:`run_jobs` returns for each run: its point summaries (seeds' status set from the training
    history) and its metric rows. A runner that returns it has the core call the recipe's ``combine``."""

    points: list[dict[str, Any]]
    rows: Rows


class Runner(Protocol):
    """``runner(cfg, rd, reporter)``: train one run into its directory; a :class:`Trained` (the core then calls the
    recipe's ``combine``) or a finished :class:`Result`."""

    def __call__(self, cfg: RunConfig, rd: RunDir, reporter: Reporter, /) -> Trained | Result: ...


class GroupRunner(Protocol):
    """``group_runner(cfgs, rds, reporter)``: several runs that differ only in ``group_fields`` as one program."""

    def __call__(self, cfgs: list[RunConfig], rds: list[RunDir], reporter: Reporter, /) -> list[Trained | Result]:
        ...


class Combine(Protocol):
    """``combine(cfg, points, rows, out)``: the recipe's figures (saved under ``out``, a run directory or a sweep's
    stand-in with the same ``figure()`` method; None: a notebook), table and notes from its typed points. The core
    calls it after a run's training, and a sweep over the recipe's own grid calls it with every run's points."""

    def __call__(self, cfg: RunConfig, points: list[Point], rows: Rows, out: RunDir | None, /) -> Result: ...


class Derive(Protocol):
    """``derive(overrides, cfg)``: the further overrides a grid point implies (N = K³ per K)."""

    def __call__(self, overrides: dict[str, Any], cfg: RunConfig, /) -> dict[str, Any]: ...


class Assumptions(Protocol):
    """``assumptions(cfg)``: the paper's assumptions this valid config does not meet, one line each."""

    def __call__(self, cfg: RunConfig, /) -> list[str]: ...


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """A named job of a paper plug-in (``icldyn list``): config overrides of the defaults (the paper size; they name
    the data and model kinds), further overrides for ``--quick`` (under a minute on a laptop CPU), and how it runs.

    ``base``: the name of another installed recipe whose ``runner``, ``result``, ``combine``, ``group_runner``,
    ``group_fields``, ``derive``, ``assumptions``, ``losses`` and ``metric`` this one uses (its own defaults
    replace the base's): a recipe on another plug-in's runner, resolved through the registry, no import.
    ``losses``: the logged held-out metrics whose non-finite or too large value (``train.max_loss``) is recorded as
    a spike in the seed's summary and named in the report; only the training loss marks a seed diverged. ``metric``: the main metric, drawn against a sweep's axes.
    ``ignores``: dotted config keys the recipe does not use (a recipe that trains nothing: the optimiser's
    fields); an override or grid axis of one is refused with one line rather than silently ignored."""

    name: str
    paper: str
    description: str
    runner: Runner | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    result: type[Result] = Result
    combine: Combine | None = None
    group_runner: GroupRunner | None = None
    group_fields: tuple[str, ...] = ()  # config keys that change values only, never a program's shapes
    derive: Derive | None = None
    assumptions: Assumptions | None = None
    losses: tuple[str, ...] = ("test_loss",)
    metric: str = "test_loss"
    ignores: tuple[str, ...] = ()
    base: str | None = None

    def config(self, overrides: dict[str, Any] | None = None, *, quick: bool = False) -> RunConfig:
        raw = merge(self.defaults, self.quick) if quick else dict(self.defaults)
        overrides = overrides or {}
        for key in self.ignores:
            section, _, name = key.partition(".")
            given = name in (overrides.get(section) or {}) if name else section in overrides
            if given or key in (overrides.get("grid") or {}):
                raise ConfigError(f"{key} is not used by {self.name} (nothing it trains reads it); remove it")
        # the overrides' grid axes replace the recipe's axes of the same name and keep the others; an empty list
        # drops an axis, an empty grid ({}: a sweep's target) all of them
        over_grid = overrides.get("grid")
        grid = {} if over_grid == {} else {k: v for k, v in {**raw.get("grid", {}), **(over_grid or {})}.items()
                                          if v != []}
        for key in grid:  # a field fixed in its section while it is an axis would be ignored: say so
            section, _, name = key.partition(".")
            if name in overrides.get(section, {}):
                values = overrides[section][name]
                raise ConfigError(f"{key} is an axis of {self.name}'s grid {grid[key]}, so {key} = {values!r} "
                                  f"would be ignored; write --set 'grid.{key}=[{values!r}]' (or a list of values), "
                                  f"or drop the axis with --set 'grid.{key}=[]'")
        for key in [k for k in grid if k not in (over_grid or {})]:  # a recipe's axis of a kind the overrides left
            section, _, name = key.partition(".")
            kind = (overrides.get(section) or {}).get("kind") if section in ("data", "model") else None
            cls = section_of(section, {**(raw.get(section) or {}), "kind": kind}) if kind else None
            if cls is not None and kind != (raw.get(section) or {}).get("kind") and name not in cls.model_fields:
                del grid[key]
        raw = {**merge(raw, overrides), "grid": grid}
        if raw.get("experiment", self.name) != self.name:
            raise ConfigError(f"experiment = {raw['experiment']!r} does not match the recipe {self.name!r}")
        raw["experiment"] = self.name
        return build(raw)


def history_rows(run_id: str, point: str, seeds: list[int], hist: History, rows: dict[str, list]) -> None:
    """Append the long-format rows of one training; a diverged seed's rows stop at its divergence."""
    for step, metrics in zip(hist.steps, hist.metrics):
        for name, values in metrics.items():
            for i, seed in enumerate(seeds):
                if step > hist.diverged_at.get(i, step):
                    continue
                rows["run_id"].append(run_id)
                rows["point"].append(point)
                rows["seed"].append(seed)
                rows["step"].append(step)
                rows["metric"].append(name)
                rows["value"].append(float(values[i]))


def curve(hist: History, metric: str, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Logged (steps, values) of one metric of seed ``i``, up to its divergence (the rows
    :func:`history_rows` writes)."""
    stop = hist.diverged_at.get(i)
    logged = [(s, m[metric][i]) for s, m in zip(hist.steps, hist.metrics)
              if metric in m and (stop is None or s <= stop)]
    return np.array([s for s, _ in logged]), np.array([float(v) for _, v in logged])


def _pack(snap: dict[str, Any]) -> dict[str, np.ndarray]:
    hist: History = snap["history"]
    names = list(dict.fromkeys(n for m in hist.metrics for n in m))  # step 0 logs fewer metrics
    out = {f"state_{i}": np.asarray(x) for i, x in enumerate(snap["state"])}
    out.update({f"good_{i}": np.asarray(x) for i, x in enumerate(snap["good"])})
    seeds = len(next(iter(hist.metrics[0].values())))
    out.update({"done": np.asarray(snap["done"]), "hist_steps": np.asarray(hist.steps, np.int64),
                "hist_names": np.asarray(names, dtype=str),
                "hist_diverged": np.asarray([hist.diverged_at.get(s, -1) for s in range(seeds)], np.int64),
                "hist_spikes": np.asarray([(s, t) for s, ts in hist.spikes.items() for t in ts],
                                          np.int64).reshape(-1, 2)})
    for j, n in enumerate(names):
        like = next(m[n] for m in hist.metrics if n in m)
        out[f"hist_m{j}"] = np.stack([m[n] if n in m else np.zeros_like(like) for m in hist.metrics])
        out[f"hist_has{j}"] = np.array([n in m for m in hist.metrics])
    return out


def _unpack(z: dict[str, np.ndarray]) -> dict[str, Any]:
    count = lambda prefix: sum(1 for k in z if k.startswith(prefix))  # noqa: E731
    names = [str(n) for n in z["hist_names"]]
    metrics = [{n: z[f"hist_m{j}"][t] for j, n in enumerate(names) if z[f"hist_has{j}"][t]}
               for t in range(len(z["hist_steps"]))]
    spikes: dict[int, list[int]] = {}
    for s, t in z.get("hist_spikes", np.zeros((0, 2), np.int64)):
        spikes.setdefault(int(s), []).append(int(t))
    hist = History([int(s) for s in z["hist_steps"]], metrics,
                   {i: int(s) for i, s in enumerate(z["hist_diverged"]) if s >= 0}, spikes)
    return {"state": [z[f"state_{i}"] for i in range(count("state_"))],
            "good": [z[f"good_{i}"] for i in range(count("good_"))], "history": hist, "done": int(z["done"])}


def train_point(targets: list[tuple[RunDir, str, list[int]]], cfg: RunConfig, problem: Problem, opt: Optimizer,
                tasks, tests, keys, tick: Callable[[int, dict], None], lrs: list[float] | None = None,
                slot_lrs: list[float] | None = None, losses: tuple[str, ...] = (),
                init_keys=None) -> list[tuple[Any, History]]:
    """:func:`~icldyn.train.loop.train` one grid point with the run directories' guarantees. ``targets``:
    ``(run dir, label, seeds)`` of each run the program trains, owning consecutive slots — one target at
    ``cfg.train.lr``; or one per learning rate of ``lrs`` (the same seeds, sharing their batches); or, with
    ``slot_lrs``, runs whose seeds are stacked on the seed axis, each slot at its own rate.
    Logged rows are flushed to each target's ``metrics.parts/`` after every chunk that ends ``train.flush_every``
    seconds or more after the last flush (each part is an fsynced Parquet file), and at the end; a checkpoint of the
    whole program is written to the first target every ``train.checkpoint_every`` seconds (and at the end), and
    resumed from when it is of the same slots (seeds and rates). ``losses``: the held-out metrics whose spikes are
    recorded (divergence is judged on the training loss). Returns (params, history) per target."""
    rd0, label0, _ = targets[0]
    ends = np.cumsum([len(seeds) for _, _, seeds in targets])
    rows = [slice(int(e) - len(t[2]), int(e)) for e, t in zip(ends, targets)]
    rates = slot_lrs if slot_lrs is not None else np.repeat(lrs if lrs is not None else [cfg.train.lr],
                                                           len(targets[0][2]))
    ident = np.array([[float(r), s] for r, s in zip(rates, (s for _, _, seeds in targets for s in seeds))])
    restore = rd0.load_checkpoint(label0)
    if restore is not None and not np.array_equal(restore.get("slots"), ident):
        restore = None  # a checkpoint of another job (other rates or seeds)
    last = [time.monotonic()]
    pending: list[dict[str, list]] = [defaultdict(list) for _ in targets]
    flushed = {"at": -np.inf, "step": 0}  # when pending rows were last written; the last step logged

    def flush() -> None:
        for (rd, label, _), part in zip(targets, pending):
            if part:
                rd.write_metrics_part(label, flushed["step"], part)
                part.clear()
        flushed["at"] = time.monotonic()

    def on_chunk(step: int, metrics: dict) -> None:
        for (rd, label, seeds), r, part in zip(targets, rows, pending):
            history_rows(rd.run_id, label, seeds, History([step], [{k: v[r] for k, v in metrics.items()}], {}), part)
        flushed["step"] = step
        if time.monotonic() - flushed["at"] >= cfg.train.flush_every:
            flush()
        tick(step, metrics)

    restored = None if restore is None else _unpack(restore)
    if restored is not None:  # the parts become the checkpoint's history: no rows from after it, none twice
        hist = restored["history"]
        for (rd, label, seeds), r, part in zip(targets, rows, pending):
            rd.clear_parts(label)
            history_rows(rd.run_id, label, seeds, history_slots(hist, r), part)
        flushed["step"] = hist.steps[-1] if hist.steps else 0
        flush()

    def snapshot(snap: dict) -> None:
        if snap["final"] or time.monotonic() - last[0] >= cfg.train.checkpoint_every:
            rd0.save_checkpoint(label0, {**_pack(snap), "slots": ident})
            last[0] = time.monotonic()

    try:
        params, hist = train(problem, opt, tasks, tests, keys, steps=cfg.train.steps,
                             log_every=cfg.train.log_every, resample_every=cfg.data.resample_every,
                             max_loss=cfg.train.max_loss, diverge_after=cfg.train.diverge_after, on_chunk=on_chunk, snapshot=snapshot, restore=restored,
                             lrs=lrs, slot_lrs=slot_lrs, losses=losses,
                             dtype=cfg.train.dtype, init_keys=init_keys,
                             devices=local_devices(cfg.train.devices))
    finally:  # Ctrl-C or an error keeps every logged row
        flush()
    return [take_slots(params, hist, r) for r in rows]


class Target(NamedTuple):
    """One training target of a :class:`Job`: the run (its index in ``run_jobs``' run directories), the point's
    label in that run, and its seeds — owning consecutive slots of the program's seed axis."""

    run: int
    label: str
    seeds: list[int]


class Summarise(Protocol):
    """``summarise(trained, wall_s)``: each target's ``(params, History)`` → each target's point summary (a dict
    of the recipe's point type; ``seeds``: per-seed measured values in the target's seed order — their ``seed``,
    ``status`` and ``diverged_at`` are set from the history)."""

    def __call__(self, trained: list[tuple[Any, History]], wall_s: float, /) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, kw_only=True)
class Job:
    """One compiled training at a recipe's grid point, for every run of the program (:func:`run_jobs`).

    ``targets``: each run's share of the seed axis — one target; several runs stacked on the seed axis (each
    slot at its rate of ``slot_lrs``); or one per learning rate of ``lrs``, the same seeds sharing their batches
    (:func:`train_point`). ``problem``: the trainer's pure per-seed functions; ``opt``: an optax transformation,
    or task → transformation; ``tasks`` / ``tests``: per-seed task and held-out pytrees stacked on the seed axis
    (None: the problem needs none); ``keys``: (seeds, 2) training keys; ``init_keys``: (seeds, 2) keys of the
    initial parameters where they are not drawn from ``keys`` (``data.seed``). ``arrays(t)`` (optional) gives more
    arrays of target ``t`` to save beside its parameters, keyed ``seed<seed>/<name>``."""

    cfg: RunConfig
    targets: list[Target]
    problem: Problem
    opt: Optimizer
    keys: Any
    summarise: Summarise
    tasks: Any = None
    tests: Any = None
    lrs: list[float] | None = None
    slot_lrs: list[float] | None = None
    arrays: Callable[[int], dict[str, np.ndarray]] | None = None
    description: str = ""
    init_keys: Any = None


def seed_status(summary: dict[str, Any], seeds: list[int], hist: History) -> dict[str, Any]:
    """``summary`` with each seed's ``seed``, ``status`` and ``diverged_at`` set from the training history."""
    given = summary.get("seeds") or [{} for _ in seeds]
    if len(given) != len(seeds):
        raise ValueError(f"a point summary lists {len(given)} seeds for a target of {len(seeds)}")
    out = [{**s, "seed": seed, "status": "diverged" if i in hist.diverged_at else "finished",
            "diverged_at": hist.diverged_at.get(i), "spikes": hist.spikes.get(i, [])}
           for i, (seed, s) in enumerate(zip(seeds, given))]
    return {**summary, "seeds": out}


def run_jobs(rds: list[RunDir], reporter: Reporter, jobs: Iterable[Job]) -> list[Trained]:
    """The runner skeleton every recipe uses: train each job (:func:`train_point`: metrics flushed per chunk,
    checkpoints, resume; divergence on the training loss, spikes of the recipe's declared ``losses`` recorded), append each
    target's metric rows and point summary (seeds' status from the history) to its run, and after every job write
    each run's metrics and parameters (``<label>/seed<seed>/<name>`` in params.npz), so an interrupted run keeps
    what it finished. Returns each run's :class:`Trained` points and rows."""
    from icldyn.plugins import get

    rows: list[dict[str, list]] = [defaultdict(list) for _ in rds]
    arrays: list[dict[str, np.ndarray]] = [{} for _ in rds]
    points: list[list[dict]] = [[] for _ in rds]
    for job in jobs:
        tick = reporter.start(job.description or job.targets[0][1] or job.cfg.experiment, job.cfg.train.steps)
        start = time.time()
        trained = train_point([(rds[m], label, seeds) for m, label, seeds in job.targets], job.cfg, job.problem,
                              job.opt, job.tasks, job.tests, job.keys, tick, job.lrs, job.slot_lrs,
                              losses=get(job.cfg.experiment).losses, init_keys=job.init_keys)
        summaries = job.summarise(trained, time.time() - start)
        for t, ((m, label, seeds), (params, hist), point) in enumerate(zip(job.targets, trained, summaries)):
            history_rows(rds[m].run_id, label, seeds, hist, rows[m])
            prefix = f"{label}/" if label else ""
            for i, seed in enumerate(seeds):
                for key, leaf in flat_params(params).items():
                    arrays[m][f"{prefix}seed{seed}/{key}"] = np.asarray(leaf[i])
            for key, value in (job.arrays(t) if job.arrays else {}).items():
                arrays[m][prefix + key] = value
            points[m].append(seed_status(point, seeds, hist))
        for m in dict.fromkeys(m for m, _, _ in job.targets):
            rds[m].write_metrics(rows[m])
            for label in dict.fromkeys(label for mm, label, _ in job.targets if mm == m):
                rds[m].clear_parts(label)
            rds[m].write_params(arrays[m])
    return [Trained(points[m], rows[m]) for m in range(len(rds))]


def flat_params(params: Any) -> dict[str, Any]:
    """A params pytree of nested dicts as one level, keys joined by ``/`` (``h/attn/c_attn_w``): params.npz's
    names below ``<label>/seed<seed>/``; :func:`nest_params` undoes it."""
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict of arrays (nested dicts allowed), got {type(params).__name__}")
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, dict):
            out.update({f"{key}/{k}": v for k, v in flat_params(value).items()})
        else:
            out[key] = value
    return out


def nest_params(flat: dict[str, Any]) -> dict[str, Any]:
    """The nested dict :func:`flat_params` flattened."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *path, last = key.split("/")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def grid_points(cfg: RunConfig) -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides) for every point of the grid's product; one unnamed point without a grid."""
    if not cfg.grid:
        return [("", {})]
    keys = list(cfg.grid)
    points = []
    for values in itertools.product(*(cfg.grid[k] for k in keys)):
        over = dict(zip(keys, values))
        points.append((",".join(f"{k}={v}" for k, v in over.items()), over))
    return points
