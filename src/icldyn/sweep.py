"""Sweeps: a grid of whole runs (``icldyn sweep NAME --grid key=v1,v2 …``).

Every point of the grid's product is a normal run directory in the store; the sweep itself is a record,
``<store>/sweeps/<sweep_id>.json`` (the target, the axes, each point's overrides, run id and status),
rewritten atomically after every point, so a killed sweep resumed with ``--resume SWEEP_ID`` reruns only
the points without a finished run. Points are run in an order that keeps equal shapes together; runs
that differ only in hyper-parameters held in the optimiser state (the learning rate) reuse one compiled
program through the persistent compilation cache.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from pathlib import Path
from typing import Any

from icldyn.config import ConfigError, RunConfig, _SECTIONS, parse_value, set_dotted
from icldyn.experiments import Reporter, get
from icldyn.runs import execute
from icldyn.store import StoreError, write_json

TOP_LEVEL = ("seeds", "seed")


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
        if key not in TOP_LEVEL and (section not in _SECTIONS or field not in _SECTIONS[section].model_fields):
            raise ConfigError(f"--grid key {key!r} is not seeds, seed or a data.*, model.* or train.* field")
        axes[key] = vals
    return axes


def point_configs(raw: dict[str, Any], quick: bool, axes: dict[str, list]) -> list[tuple[dict, RunConfig]]:
    """Every point's overrides and validated config (all checked before anything trains)."""
    exp = get(raw.get("experiment", "quickstart"))
    out = []
    for values in itertools.product(*axes.values()):
        over = dict(zip(axes, values))
        point_raw = json.loads(json.dumps(raw))
        for key, value in over.items():
            set_dotted(point_raw, key, value)
        out.append((over, exp.config(point_raw, quick=quick)))
    return out


def _shape_key(cfg: RunConfig) -> str:
    """Points whose configs agree up to the learning rate compile to the same programs: run them together."""
    dump = cfg.model_dump()
    dump["train"]["lr"] = None
    return json.dumps(dump, sort_keys=True)


def _record_path(store: Path, sweep_id: str) -> Path:
    return store / "sweeps" / f"{sweep_id}.json"


def load_record(store: str | Path, sweep_id: str) -> dict[str, Any]:
    path = _record_path(Path(store), sweep_id)
    if not path.is_file():
        raise StoreError(f"no sweep {sweep_id!r} in {str(store)!r} (records are in {str(Path(store) / 'sweeps')})")
    return json.loads(path.read_text())


def sweep(raw: dict[str, Any] | None, quick: bool, axes: dict[str, list] | None, store: str | Path,
          reporter: Reporter | None = None, resume: str | None = None) -> dict[str, Any]:
    """Run (or resume) a sweep; returns its record."""
    store = Path(store)
    if resume is not None:
        record = load_record(store, resume)
        raw, quick, axes = record["target"], record["quick"], record["axes"]
    else:
        record = {"sweep_id": f"{time.strftime('%Y%m%d-%H%M%S')}-{raw.get('experiment', 'quickstart')}-"
                              f"{secrets.token_hex(3)}", "target": raw, "quick": quick, "axes": axes, "points": []}
    configs = point_configs(raw, quick, axes)
    if not record["points"]:
        record["points"] = [{"overrides": over, "run_id": None, "status": "pending"} for over, _ in configs]
    path = _record_path(store, record["sweep_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record)
    order = sorted(range(len(configs)), key=lambda i: _shape_key(configs[i][1]))
    for i in order:
        point = record["points"][i]
        done = point["run_id"] and (store / point["run_id"] / "summary.json").is_file()
        if done:
            continue
        start = time.time()
        rd, summary = execute(configs[i][1], store, reporter)
        point.update({"run_id": rd.run_id, "status": summary["status"], "wall_s": time.time() - start})
        write_json(path, record)
    return record
