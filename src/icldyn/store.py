"""Run store: one directory per run, atomic writes, DuckDB queries over every run.

Layout (DESIGN §4)::

    <store>/<run_id>/config.toml  metrics.parquet  summary.json  params.npz  figures/*.png  report.md

``metrics.parquet`` is long format: run_id, point, seed, step, metric, value (``point`` names the
grid point, e.g. ``model.layers=3``; empty for a run without a grid).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import tomli_w

from icldyn.config import RunConfig

METRICS_SCHEMA = pa.schema([("run_id", pa.string()), ("point", pa.string()), ("seed", pa.int64()),
                            ("step", pa.int64()), ("metric", pa.string()), ("value", pa.float64())])


class StoreError(ValueError):
    """A run or store path that cannot be used; the message is one line."""


def _atomic(path: Path, write) -> None:
    """Write via a temporary file in the same directory, then rename over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    _atomic(path, lambda f: f.write(text.encode()))


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, default=_json_default) + "\n")


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"cannot serialise {type(x).__name__}")


def config_toml(cfg: RunConfig) -> str:
    return tomli_w.dumps(cfg.model_dump(exclude_none=True))


def _tag(label: str) -> str:
    """A file-name-safe tag of a grid point's label."""
    return hashlib.sha1(label.encode()).hexdigest()[:12]


class RunDir:
    """A run directory being written.

    Besides the final files it holds, while a run is in progress, ``metrics.parts/`` (one small Parquet
    file per logged chunk of the point being trained, folded into ``metrics.parquet`` when the point
    ends) and ``checkpoint/`` (one ``.npz`` per point: what ``--resume`` continues from; removed when the
    run finishes)."""

    def __init__(self, path: Path):
        self.path = path
        self.run_id = path.name
        for sub in ("figures", "metrics.parts", "checkpoint"):
            (path / sub).mkdir(exist_ok=True)

    @classmethod
    def create(cls, store: str | Path, name: str) -> RunDir:
        """A fresh, uniquely named directory ``<store>/<time>-<name>-<random>`` (never reused)."""
        root = Path(store)
        root.mkdir(parents=True, exist_ok=True)
        if root.is_symlink():
            raise StoreError(f"store {str(root)!r} is a symlink; give a real directory with --out")
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{secrets.token_hex(3)}"
        path = root / run_id
        path.mkdir()  # exclusive: fails rather than reuse
        return cls(path)

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An interrupted run directory, to resume; refuses symlinks and finished runs."""
        path = Path(path)
        if path.is_symlink() or not path.is_dir():
            raise StoreError(f"--resume {str(path)!r}: not a run directory (a real directory, not a symlink)")
        if not (path / "config.toml").is_file():
            raise StoreError(f"--resume {str(path)!r}: no config.toml, so not a run directory")
        if (path / "summary.json").exists():
            raise StoreError(f"--resume {str(path)!r}: the run already finished (summary.json exists)")
        return cls(path)

    def write_metrics_part(self, label: str, step: int, rows: dict[str, list]) -> None:
        table = pa.table(rows, schema=METRICS_SCHEMA)
        _atomic(self.path / "metrics.parts" / f"{_tag(label)}-{step:010d}.parquet", lambda f: pq.write_table(table, f))

    def clear_parts(self, label: str) -> None:
        for part in (self.path / "metrics.parts").glob(f"{_tag(label)}-*.parquet"):
            part.unlink(missing_ok=True)

    def save_checkpoint(self, label: str, arrays: dict[str, np.ndarray]) -> None:
        _atomic(self.path / "checkpoint" / f"{_tag(label)}.npz", lambda f: np.savez(f, **arrays))

    def load_checkpoint(self, label: str) -> dict[str, np.ndarray] | None:
        path = self.path / "checkpoint" / f"{_tag(label)}.npz"
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def finish(self) -> None:
        """Remove what only an unfinished run needs."""
        for sub in ("metrics.parts", "checkpoint"):
            for f in (self.path / sub).glob("*"):
                f.unlink(missing_ok=True)
            (self.path / sub).rmdir()

    def write_config(self, cfg: RunConfig) -> None:
        write_text(self.path / "config.toml", config_toml(cfg))

    def write_metrics(self, rows: dict[str, list]) -> None:
        table = pa.table(rows, schema=METRICS_SCHEMA)
        _atomic(self.path / "metrics.parquet", lambda f: pq.write_table(table, f))

    def write_params(self, arrays: dict[str, np.ndarray]) -> None:
        _atomic(self.path / "params.npz", lambda f: np.savez(f, **arrays))

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json(self.path / "summary.json", summary)

    def write_report(self, text: str) -> None:
        write_text(self.path / "report.md", text)

    def figure(self, name: str) -> Path:
        return self.path / "figures" / f"{name}.png"


def resolve_run(store: str | Path, run: str) -> Path:
    """A run given by directory path, id, or unique id prefix/suffix."""
    path = Path(run)
    if (path / "summary.json").exists() and not path.is_symlink():
        return path
    root = Path(store)
    matches = [p for p in root.glob("*") if p.is_dir() and run in p.name] if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {run!r} in store {str(root)!r}; see `icldyn runs`")
    raise StoreError(f"run {run!r} is ambiguous in {str(root)!r}: {', '.join(sorted(p.name for p in matches)[:5])}")


def list_runs(store: str | Path) -> list[dict[str, Any]]:
    """Every run directory; one without summary.json is ``incomplete`` (running, or interrupted: --resume)."""
    out = []
    for d in sorted(p for p in Path(store).glob("*") if p.is_dir() and (p / "config.toml").is_file()):
        if (d / "summary.json").is_file():
            s = json.loads((d / "summary.json").read_text())
            out.append({"run_id": d.name, "experiment": s.get("experiment", "?"),
                        "status": s.get("status", "?"), "wall_s": s.get("wall_s"), "path": str(d)})
        else:
            out.append({"run_id": d.name, "experiment": d.name.split("-", 2)[-1].rsplit("-", 1)[0],
                        "status": "incomplete", "wall_s": None, "path": str(d)})
    return out


def query(store: str | Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run SQL over the view ``metrics`` (every run's metrics.parquet, plus the chunks an unfinished run
    has flushed), ``runs`` (summaries) and ``sweeps`` (sweep_id, run_id, status, key, value per swept
    key). A run in progress may fold its chunk files away while they are listed; the query is then
    retried on a fresh listing."""
    for attempt in range(5):
        try:
            return _query(Path(store), sql)
        except duckdb.IOException:
            if attempt == 4:
                raise StoreError("query failed: the store kept changing while it was read; try again") from None
            time.sleep(0.05)
    raise AssertionError("unreachable")


def _query(root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    files = sorted(str(p) for p in root.glob("*/metrics.parquet")) + sorted(
        str(p) for p in root.glob("*/metrics.parts/*.parquet"))
    con = duckdb.connect()
    if files:
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW metrics AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
    else:
        con.execute("CREATE VIEW metrics AS SELECT * FROM (SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS point, "
                    "NULL::BIGINT AS seed, NULL::BIGINT AS step, NULL::VARCHAR AS metric, NULL::DOUBLE AS value) "
                    "WHERE false")
    # sweeps: one row per (point, swept key), so that a figure's table is one join away
    con.execute("CREATE TABLE sweeps (sweep_id VARCHAR, run_id VARCHAR, status VARCHAR, key VARCHAR, value VARCHAR)")
    swept = [(s["sweep_id"], p["run_id"], p["status"], k, str(v))
             for s in (json.loads(f.read_text()) for f in sorted(root.glob("sweeps/*.json")))
             for p in s["points"] for k, v in p["overrides"].items()]
    if swept:
        con.executemany("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?)", swept)
    runs = list_runs(root)
    con.execute("CREATE TABLE runs (run_id VARCHAR, experiment VARCHAR, status VARCHAR, wall_s DOUBLE, path VARCHAR)")
    if runs:
        con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?)", [tuple(r.values()) for r in runs])
    try:
        cur = con.execute(sql)
    except duckdb.IOException:
        raise
    except duckdb.Error as err:
        raise StoreError(f"query failed: {str(err).splitlines()[0]}") from None
    cols = [c[0] for c in cur.description] if cur.description else []
    return cols, cur.fetchall()
