"""Record the tiny results tests/test_figures.py draws every recipe's figures from (no training in the test).

Each recipe runs once at its quick size shortened further (``TINY``), and ``<recipe>.json.gz`` keeps the overrides
that rebuild its config, its summary's points and its metric rows (at most ``KEEP`` logged steps per series).
Regenerate after a result type changes: ``python tests/data/figures/make.py [RECIPE ...]`` (≈ 10 min on 2 cores).
A recipe listed in ``FROM_DOCS`` is recorded from the run that draws its figures in ``docs/results/`` (the command
the docs page names); ``--store DIR`` keeps the run directories (their figures are the docs figures).
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

HERE = Path(__file__).parent
KEEP = 40
STEPS = {"train": {"steps": 40, "log_every": 10}}
TINY: dict[str, dict] = {  # few grid points: every heat map costs the figure test time
    "ahn-loss-vs-n": {"grid": {"data.n": [5, 20]}},
    "ahn-loss-vs-layers": {"grid": {"model.layers": [1, 3]}},
    "goel-convergence": {"train": {"steps": 60, "log_every": 5}},
    "goel-sample-size": {"train": {"steps": 60, "log_every": 5}},
    "goel-conditioning": {"train": {"steps": 300, "log_every": 10}},
    "huang-balanced": {"train": {"steps": 150, "log_every": 5}},
    "huang-imbalanced": {"train": {"steps": 1500, "log_every": 25, "count_samples": 2000}},
    "huang-balanced-large-n": {"train": {"steps": 150, "log_every": 5}},
    "huang-imbalanced-large-n": {"train": {"steps": 1500, "log_every": 25}},
    "huang-phase-scaling": {"grid": {"data.features": [4, 6, 8]}, "train": {"steps": 200, "log_every": 10}},
    "huang-ood": {"train": {"steps": 60, "log_every": 10}},
    "linattn-condition": {"data": {"test_size": 100}, "train": {"steps": 40, "log_every": 20, "batch": 100}},
    "linattn-smoothness": {"data": {"test_size": 100}, "train": {"steps": 40, "log_every": 10, "batch": 100}},
    "linattn-adam-vs-sgd": {"train": {"steps": 40, "log_every": 10, "batch": 100}},
    "linattn-noise": {"data": {"test_size": 100}, "train": {"steps": 200, "batch": 100}},
    "linattn-rotation-lbfgs": {"data": {"resample_every": 50, "test_size": 2000},
                               "train": {"steps": 50, "log_every": 10, "batch": 500}},
}


# recipe → (quick, overrides) of the docs run recorded instead of a tiny one (docs/results/*.md name the commands)
FROM_DOCS: dict[str, tuple[bool, dict]] = {
    "linattn-adam-vs-sgd": (True, {}), "linattn-noise": (True, {}), "linattn-condition": (True, {}),
    "linattn-smoothness": (True, {}), "linattn-rotation-adam": (True, {}), "linattn-rotation-p0": (True, {}),
    "linattn-rotation-lbfgs": (True, {}),
}


def thin(rows: dict[str, list]) -> dict[str, list]:
    """At most KEEP logged steps per (point, seed, metric), evenly spaced, the last kept."""
    steps = np.asarray(rows["step"])
    keep = np.zeros(len(steps), bool)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(rows["point"], rows["seed"], rows["metric"])):
        groups.setdefault(key, []).append(i)
    for idx in groups.values():
        take = np.unique(np.linspace(0, len(idx) - 1, min(KEEP, len(idx))).round().astype(int))
        keep[np.asarray(idx)[take]] = True
    return {k: [v for v, ok in zip(vals, keep) if ok] for k, vals in rows.items() if k != "run_id"}


def record(name: str, store: Path, docs: bool) -> None:
    from icldyn import plugins
    from icldyn.config import merge
    from icldyn.runner import execute

    if docs and name in FROM_DOCS:
        quick, over = FROM_DOCS[name]
        over = {"experiment": name, **over}
    else:
        quick = True
        base = {} if name == "linattn-noise" else STEPS  # nothing trains there: no train.log_every
        over = {"experiment": name, **merge(base, TINY.get(name, {})), "seeds": 1}
        if name in ("huang-balanced", "goel-convergence", "goel-sample-size", "goel-conditioning", "linattn-noise"):
            over["seeds"] = 2  # bands and per-seed markers
    cfg = plugins.recipe_of(over).config(over, quick=quick)
    rd, summary = execute(cfg, store)
    print(name, "run", rd.path, f"{summary['wall_s']:.0f} s", flush=True)
    rows = pq.read_table(rd.path / "metrics.parquet").to_pydict()
    out = {"recipe": name, "overrides": over, "quick": quick, "points": summary["points"], "rows": thin(rows)}
    with gzip.open(HERE / f"{name}.json.gz", "wt") as f:
        json.dump(out, f, separators=(",", ":"))
    print(name, (HERE / f"{name}.json.gz").stat().st_size, "bytes", flush=True)


if __name__ == "__main__":
    from icldyn import plugins
    from icldyn.runtime import setup_jax

    setup_jax()
    args = sys.argv[1:]
    store = None
    if "--store" in args:
        i = args.index("--store")
        store, args = Path(args[i + 1]), args[:i] + args[i + 2:]
    names = args or list(plugins.recipes())
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            record(name, store or Path(tmp), docs=store is not None)
