"""Named, reproducible experiment recipes; ``icldyn list`` reads :data:`REGISTRY`.

A recipe is a set of overrides of the :class:`~icldyn.config.RunConfig` defaults (the paper
size), further overrides for ``--quick`` (under a minute on a laptop CPU), and a runner that
trains, compares with theory and draws figures into a run directory.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from icldyn.config import ConfigError, RunConfig, build, merge
from icldyn.store import RunDir
from icldyn.train.loop import History, take_slots, train


class Reporter(Protocol):
    """Progress sink: ``start`` returns the per-chunk callback of one training."""

    def start(self, description: str, total: int) -> Callable[[int, dict], None]: ...


class SilentReporter:
    def start(self, description: str, total: int) -> Callable[[int, dict], None]:
        return lambda step, metrics: None


@dataclass(frozen=True)
class Experiment:
    name: str
    paper: str
    description: str
    runner: Callable[..., dict[str, Any]]  # (cfg, run_dir, reporter) -> summary
    defaults: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    # (cfgs, run_dirs, reporter) -> summaries: runs that differ only in ``group_fields`` as one program (sweeps)
    group_runner: Callable[..., list[dict[str, Any]]] | None = None
    group_fields: tuple[str, ...] = ()  # config keys that change values only, never a program's shapes
    # (cfg, result with "points", metric rows, figure dir) -> summary: the recipe's figures, table and notes
    # from its points, used by its runner and by a sweep over its grid (icldyn.sweep.report)
    combine: Callable[..., dict[str, Any]] | None = None
    # (grid point's overrides, recipe config) -> the further overrides that point implies (a sweep's points)
    derive: Callable[[dict[str, Any], RunConfig], dict[str, Any]] | None = None
    # cfg -> the paper's assumptions that this (valid) config does not meet, one line each (summary, report)
    assumptions: Callable[[RunConfig], list[str]] | None = None

    def config(self, overrides: dict[str, Any] | None = None, *, quick: bool = False) -> RunConfig:
        raw = merge(self.defaults, self.quick) if quick else dict(self.defaults)
        overrides = overrides or {}
        for key in (raw.get("grid", {}) if "grid" not in overrides else {}):  # the grid would win: say so
            section, _, field = key.partition(".")
            if field in overrides.get(section, {}):
                values = overrides[section][field]
                raise ConfigError(f"{key} is an axis of {self.name}'s grid {raw['grid'][key]}, so {key} = {values!r} "
                                  f"would be ignored; write --set 'grid.{key}=[{values!r}]' (or a list of values)")
        raw = merge(raw, overrides)
        if raw.get("experiment", self.name) != self.name:
            raise ConfigError(f"experiment = {raw['experiment']!r} does not match the recipe {self.name!r}")
        raw["experiment"] = self.name
        return build(raw)


REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    REGISTRY[exp.name] = exp
    return exp


def get(name: str) -> Experiment:
    if name not in REGISTRY:
        raise ConfigError(f"unknown experiment {name!r}; allowed: {', '.join(REGISTRY)}")
    return REGISTRY[name]


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
                "hist_diverged": np.asarray([hist.diverged_at.get(s, -1) for s in range(seeds)], np.int64)})
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
    hist = History([int(s) for s in z["hist_steps"]], metrics,
                   {i: int(s) for i, s in enumerate(z["hist_diverged"]) if s >= 0})
    return {"state": [z[f"state_{i}"] for i in range(count("state_"))],
            "good": [z[f"good_{i}"] for i in range(count("good_"))], "history": hist, "done": int(z["done"])}


def train_point(targets: list[tuple[RunDir, str, list[int]]], cfg: RunConfig, problem, opt, tasks, tests, keys,
                tick: Callable[[int, dict], None], lrs: list[float] | None = None,
                slot_lrs: list[float] | None = None) -> list[tuple[Any, History]]:
    """:func:`~icldyn.train.loop.train` one grid point with the run directories' guarantees. ``targets``:
    ``(run dir, label, seeds)`` of each run the program trains, owning consecutive slots — one target at
    ``cfg.train.lr``; or one per learning rate of ``lrs`` (the same seeds, sharing their batches); or, with
    ``slot_lrs``, runs whose seeds are stacked on the seed axis, each slot at its own rate.
    Every logged chunk is flushed at once to each target's ``metrics.parts/``; a checkpoint of the whole
    program is written to the first target every ``train.checkpoint_every`` seconds (and at the end), and
    resumed from when it is of the same slots (seeds and rates). Returns (params, history) per target."""
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

    def on_chunk(step: int, metrics: dict) -> None:
        for (rd, label, seeds), r in zip(targets, rows):
            part: dict[str, list] = defaultdict(list)
            history_rows(rd.run_id, label, seeds, History([step], [{k: v[r] for k, v in metrics.items()}], {}), part)
            rd.write_metrics_part(label, step, part)
        tick(step, metrics)

    def snapshot(snap: dict) -> None:
        if snap["final"] or time.monotonic() - last[0] >= cfg.train.checkpoint_every:
            rd0.save_checkpoint(label0, {**_pack(snap), "slots": ident})
            last[0] = time.monotonic()

    params, hist = train(problem, opt, tasks, tests, keys, steps=cfg.train.steps, log_every=cfg.train.log_every,
                         resample_every=cfg.data.resample_every, max_loss=cfg.train.max_loss, on_chunk=on_chunk,
                         snapshot=snapshot, restore=None if restore is None else _unpack(restore), lrs=lrs,
                         slot_lrs=slot_lrs)
    return [take_slots(params, hist, r) for r in rows]


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


from icldyn.experiments import ahn as _ahn  # noqa: E402,F401  (registers the recipes)
from icldyn.experiments import goel as _goel  # noqa: E402,F401
from icldyn.experiments import huang as _huang  # noqa: E402,F401
from icldyn.experiments import crossover as _crossover  # noqa: E402,F401
