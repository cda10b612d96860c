"""Run store: one directory per run, atomic writes, DuckDB queries over every run.

Layout::

    <store>/<run_id>/config.toml  metrics.parquet  summary.json  params.npz  figures/*.png  report.md

``metrics.parquet`` is long format: run_id, point, seed, step, metric, value (``point`` names the
grid point, e.g. ``model.layers=3``; empty for a run without a grid).
"""

from __future__ import annotations

import fcntl
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

    Besides the final files it holds, while a run is in progress, ``metrics.parts/`` (small Parquet
    files of the point being trained's logged rows, written at least every second, each named by its last step; folded into ``metrics.parquet`` when the point
    ends) and ``checkpoint/`` (one ``.npz`` per point: what ``--resume`` continues from; removed when the
    run finishes)."""

    def __init__(self, path: Path):
        self.path = path
        self.run_id = path.name
        self._lock = _lock(path)  # held until this process exits (or release()); a second writer is refused
        for sub in ("figures", "metrics.parts", "checkpoint"):
            (path / sub).mkdir(exist_ok=True)
        (path / CRASH).unlink(missing_ok=True)

    def release(self) -> None:
        """Give up the directory's lock (the OS releases it on any exit too)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def mark_crashed(self, err: BaseException) -> None:
        """Record why the run stopped (``icldyn runs`` then says crashed, not interrupted)."""
        write_json(self.path / CRASH, {"error": f"{type(err).__name__}: {err}"[:500], "time": time.time()})

    @classmethod
    def create(cls, store: str | Path, name: str) -> RunDir:
        """A fresh, uniquely named directory ``<store>/<time>-<name>-<random>`` (never reused)."""
        root = Path(store)
        if root.exists() and not root.is_dir():
            raise StoreError(f"store {str(root)!r} is a file, not a directory; give a directory with --out")
        if root.is_symlink():
            raise StoreError(f"store {str(root)!r} is a symlink; give a real directory with --out")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"store {str(root)!r} cannot be created: {err.strerror}") from None
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


LOCK, CRASH = ".lock", "crash.json"


def _lock(path: Path):
    """An exclusive OS lock on ``path/.lock`` (``flock``: released when the process exits, however it exits),
    holding this process's pid; a run directory locked by another process raises StoreError naming it."""
    f = open(path / LOCK, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise StoreError(f"run {path.name} is being written by {holder}; wait for it to finish, or stop it "
                         "and `icldyn run --resume` it") from None
    f.seek(0)
    f.truncate()
    f.write(f"process {os.getpid()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})")
    f.flush()
    return f


def _locked(path: Path) -> bool:
    """Whether another process holds the run directory's lock (it is running)."""
    if not (path / LOCK).is_file():
        return False
    with open(path / LOCK) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
    return False


def last_step(path: Path) -> int | None:
    """The last step an unfinished run logged (its chunk files are named by step)."""
    steps = [int(p.stem.rsplit("-", 1)[-1]) for p in (path / "metrics.parts").glob("*.parquet")]
    return max(steps) if steps else None


def run_status(path: Path) -> str:
    """finished / diverged (summary.json), else running (locked by a live process), crashed (crash.json: an
    error stopped it) or interrupted (Ctrl-C, kill, power loss: ``--resume`` continues it)."""
    if (path / "summary.json").is_file():
        return json.loads((path / "summary.json").read_text()).get("status", "?")
    if _locked(path):
        return "running"
    return "crashed" if (path / CRASH).is_file() else "interrupted"


def resolve_run(store: str | Path, run: str) -> Path:
    """A run given by directory path, id, or unique id prefix/suffix."""
    path = Path(run)
    if (path / "config.toml").exists() and not path.is_symlink():
        return path
    root = Path(store)
    matches = [p for p in root.glob("*") if p.is_dir() and run in p.name and (p / "config.toml").is_file()] \
        if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {run!r} in store {str(root)!r}; see `icldyn runs`")
    raise StoreError(f"run {run!r} is ambiguous in {str(root)!r}: {', '.join(sorted(p.name for p in matches)[:5])}")


def list_runs(store: str | Path) -> list[dict[str, Any]]:
    """Every run directory with its status (:func:`run_status`), its start time and, while unfinished, the last
    logged step and the command that resumes it."""
    if Path(store).exists() and not Path(store).is_dir():
        raise StoreError(f"store {str(store)!r} is a file, not a directory")
    out = []
    for d in sorted(p for p in Path(store).glob("*") if p.is_dir() and (p / "config.toml").is_file()):
        status = run_status(d)
        row = {"run_id": d.name, "experiment": d.name.split("-", 2)[-1].rsplit("-", 1)[0], "status": status,
               "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((d / "config.toml").stat().st_mtime)),
               "wall_s": None, "last_step": None, "resume": None, "path": str(d)}
        if (d / "summary.json").is_file():
            s = json.loads((d / "summary.json").read_text())
            row.update(experiment=s.get("experiment", row["experiment"]), wall_s=s.get("wall_s"))
        else:
            row["last_step"] = last_step(d)
            if status != "running":
                row["resume"] = f"icldyn run --resume {d}"
        out.append(row)
    return out


QUERY_HELP = "one SELECT (or WITH … SELECT) over the views metrics, finals, runs and sweeps"


def query(store: str | Path, sql: str) -> tuple[list[str], list[tuple]]:
    """Run one read-only SQL statement over the store: the views ``metrics`` (every run's metrics.parquet, plus
    the chunks an unfinished run has flushed), ``finals`` (each run's, point's and seed's last logged value of
    each metric), ``runs`` (one row a run: status, last step, …) and ``sweeps`` (sweep_id, run_id, status, key,
    value per swept key). Only a single SELECT runs (the parsed statement's type is checked); DuckDB sees no file
    outside the store and its configuration is locked, so a query can neither write nor read elsewhere. A run
    in progress may fold its chunk files away while they are listed; the query is then retried."""
    root = Path(store)
    if not sql.strip():
        raise StoreError(f"empty query: give {QUERY_HELP}")
    if root.exists() and not root.is_dir():
        raise StoreError(f"store {str(root)!r} is a file, not a directory")
    for attempt in range(5):
        try:
            return _query(root, sql)
        except duckdb.IOException:
            if attempt == 4:
                raise StoreError("query failed: the store kept changing while it was read; try again") from None
            time.sleep(0.05)
    raise AssertionError("unreachable")


def _query(root: Path, sql: str) -> tuple[list[str], list[tuple]]:
    con = duckdb.connect(":memory:")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as err:
        raise StoreError(f"query failed: {str(err).splitlines()[0]}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(str(st.type).rsplit(".", 1)[-1] for st in statements)
        raise StoreError(f"only {QUERY_HELP} is allowed (the store is read-only); got: {kinds}")
    files = sorted(str(p) for p in root.glob("*/metrics.parquet")) + sorted(
        str(p) for p in root.glob("*/metrics.parts/*.parquet"))
    if root.is_dir():
        con.execute("SET allowed_directories = [?]", [str(root.resolve()) + os.sep])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    if files:
        listing = ", ".join("'" + str(Path(f).resolve()).replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW metrics AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
    else:
        con.execute("CREATE VIEW metrics AS SELECT * FROM (SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS point, "
                    "NULL::BIGINT AS seed, NULL::BIGINT AS step, NULL::VARCHAR AS metric, NULL::DOUBLE AS value) "
                    "WHERE false")
    con.execute("CREATE VIEW finals AS SELECT run_id, point, seed, metric, max(step) AS step, "
                "arg_max(value, step) AS value FROM metrics GROUP BY run_id, point, seed, metric")
    # sweeps: one row per (point, swept key), so that a figure's table is one join away
    con.execute("CREATE TABLE sweeps (sweep_id VARCHAR, run_id VARCHAR, status VARCHAR, key VARCHAR, value VARCHAR)")
    swept = [(s["sweep_id"], p["run_id"], p["status"], k, str(v))
             for s in (json.loads(f.read_text()) for f in sorted(root.glob("sweeps/*.json")))
             for p in s["points"] for k, v in p["overrides"].items()]
    if swept:
        con.executemany("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?)", swept)
    cols = ("run_id", "experiment", "status", "started", "wall_s", "last_step", "path")
    con.execute("CREATE TABLE runs (run_id VARCHAR, experiment VARCHAR, status VARCHAR, started VARCHAR, "
                "wall_s DOUBLE, last_step BIGINT, path VARCHAR)")
    runs = list_runs(root) if root.is_dir() else []
    if runs:
        con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", [tuple(r[c] for c in cols) for r in runs])
    try:
        cur = con.execute(sql)
    except duckdb.IOException:
        raise
    except duckdb.Error as err:
        raise StoreError(f"query failed: {str(err).splitlines()[0]}") from None
    cols = [c[0] for c in cur.description] if cur.description else []
    return cols, cur.fetchall()
