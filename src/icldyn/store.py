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
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

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


@contextmanager
def writing(what: str) -> Iterator[None]:
    """An OSError inside (a read-only or full file system, no permission) becomes one StoreError line naming
    ``what`` (e.g. ``store '/data/runs'``) and the system's reason."""
    try:
        yield
    except (StoreError, FileExistsError):  # FileExistsError: a clash, not a store that refuses writes
        raise
    except OSError as err:
        raise StoreError(f"{what} cannot be written ({err.strerror or type(err).__name__}"
                         + (f": {err.filename}" if err.filename else "") + ")") from None


class RunDamaged(StoreError):
    """A run (or sweep record) whose file is missing, truncated, changed or unreadable: one line naming the run, the
    file and what is wrong. ``file`` and ``reason`` hold the two parts."""

    def __init__(self, run_id: str, file: str, reason: str, what: str = "run"):
        self.run_id, self.file, self.reason = run_id, file, reason
        super().__init__(f"{what} {run_id} is damaged: {file}: {reason}")


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


atomic_write = _atomic  # for writers outside the store (figures): ``atomic_write(path, lambda f: ...)``


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
    files of the point being trained's logged rows, written at least every second, each named by its last step;
    folded into ``metrics.parquet`` when the point ends) and ``checkpoint/`` (one ``.npz`` per point: what
    ``--resume`` continues from; removed when the run finishes)."""

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
        """Record why the run stopped (``icldyn runs`` then says crashed, not interrupted). On a full disk, where
        the record cannot be written, an empty crash.json still marks it (a file without data needs no block)."""
        try:
            write_json(self.path / CRASH, {"error": f"{type(err).__name__}: {err}"[:500], "time": time.time()})
        except OSError:
            try:
                (self.path / CRASH).touch()
            except OSError:
                pass

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
        with writing(f"store {str(root)!r}"):
            path.mkdir()  # exclusive: fails rather than reuse
            try:
                return cls(path)
            except OSError:
                shutil.rmtree(path, ignore_errors=True)
                raise

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An interrupted run directory, to resume; refuses symlinks and finished runs."""
        path = Path(path)
        if path.is_symlink() or not path.is_dir():
            raise StoreError(f"--resume {str(path)!r}: not a run directory (a real directory, not a symlink)")
        if not (path / "config.toml").is_file():
            raise StoreError(f"--resume {str(path)!r}: no config.toml, so not a run directory")
        done = next((f for f in ("summary.json", MANIFEST) if (path / f).exists()), None)
        if done:
            hurt = damage(path)
            raise StoreError(f"--resume {str(path)!r}: the run already finished ({done} exists)"
                             + (f"; it is damaged ({hurt}): start a new run" if hurt else ""))
        with writing(f"--resume {str(path)!r}: the run directory"):
            return cls(path)

    def write_metrics_part(self, label: str, step: int, rows: dict[str, list]) -> None:
        table = pa.table(rows, schema=METRICS_SCHEMA)
        _atomic(self.path / "metrics.parts" / f"{_tag(label)}-{step:010d}.parquet", lambda f: pq.write_table(table, f))

    def clear_parts(self, label: str) -> None:
        for part in (self.path / "metrics.parts").glob(f"{_tag(label)}-*.parquet"):
            part.unlink(missing_ok=True)

    def _checkpoints(self, label: str) -> tuple[Path, Path]:
        """The point's checkpoint and the one before it (kept, so that a damaged one has a fallback)."""
        return self.path / "checkpoint" / f"{_tag(label)}.npz", self.path / "checkpoint" / f"{_tag(label)}.prev.npz"

    def save_checkpoint(self, label: str, arrays: dict[str, np.ndarray]) -> None:
        """The point's checkpoint, the SHA-256 of its arrays and its point inside; the one it replaces is kept as the
        previous."""
        path, prev = self._checkpoints(label)
        digest = _digest(arrays, _tag(label))
        if path.is_file():
            os.replace(path, prev)
        _atomic(path, lambda f: np.savez(f, **arrays, **{DIGEST: np.asarray(digest)}))

    def load_checkpoint(self, label: str) -> dict[str, np.ndarray] | None:
        """The point's last good checkpoint: the latest, else the one before it, verified against the hash stored
        with it; None where neither is there or good (the point then restarts, its flushed rows cleared). A damaged
        checkpoint is named in one line on stderr, with what happens instead."""
        bad = []
        for path in self._checkpoints(label):
            if not path.is_file():
                continue
            try:
                arrays = read_checkpoint(path)
            except RunDamaged as err:
                bad.append(f"{err.file} ({err.reason})")
                continue
            if bad:
                _say(f"run {self.run_id}: checkpoint {bad[0]} is damaged; resuming from the previous one, "
                     f"checkpoint/{path.name}")
            return arrays
        if bad:
            _say(f"run {self.run_id}: checkpoint {' and '.join(bad)} damaged, no good checkpoint left; "
                 f"{'point ' + repr(label) if label else 'the run'} restarts from step 0")
            self.clear_parts(label)
        return None

    def finish(self) -> None:
        """Remove what only an unfinished run needs, then record the manifest (every file's size and SHA-256)."""
        for sub in ("metrics.parts", "checkpoint"):
            for f in (self.path / sub).glob("*"):
                f.unlink(missing_ok=True)
            (self.path / sub).rmdir()
        write_manifest(self.path)

    def write_config(self, cfg: RunConfig) -> None:
        write_text(self.path / "config.toml", config_toml(cfg))

    def write_metrics(self, rows: dict[str, list]) -> None:
        table = pa.table(rows, schema=METRICS_SCHEMA)
        _atomic(self.path / "metrics.parquet", lambda f: pq.write_table(table, f))

    def write_params(self, arrays: dict[str, np.ndarray]) -> None:
        _atomic(self.path / "params.npz", lambda f: np.savez(f, **arrays))

    def write_summary(self, summary: dict[str, Any]) -> None:
        """summary.json, naming the manifest :meth:`finish` records next (so that a deleted manifest is noticed)."""
        write_json(self.path / "summary.json", {**summary, "manifest": MANIFEST})

    def write_report(self, text: str) -> None:
        write_text(self.path / "report.md", text)

    def figure(self, name: str) -> Path:
        return self.path / "figures" / f"{name}.png"


LOCK, CRASH, MANIFEST, DIGEST = ".lock", "crash.json", "manifest.json", "__sha256__"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _digest(arrays: dict[str, np.ndarray], point: str = "") -> str:
    """SHA-256 of named arrays — every name, dtype, shape and byte, in name order — and of the ``point`` (a
    checkpoint's point tag: a sound checkpoint copied over another point's fails it)."""
    h = hashlib.sha256(f"{point}|".encode())
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def read_checkpoint(path: Path) -> dict[str, np.ndarray]:
    """A checkpoint's arrays, verified against the hash saved inside it (of its arrays and its point, the tag its
    file is named by); RunDamaged names what is wrong — one without a hash is not trusted either."""
    rel = f"{path.parent.name}/{path.name}"
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as err:  # BadZipFile, a bad CRC, a truncated member, not an .npz at all, …
        raise RunDamaged(path.parent.parent.name, rel, _why(err)) from None
    stored = arrays.pop(DIGEST, None)
    if stored is None:
        raise RunDamaged(path.parent.parent.name, rel, "no hash saved with it (not a checkpoint icldyn wrote)")
    if str(stored) != _digest(arrays, path.name.split(".", 1)[0]):
        raise RunDamaged(path.parent.parent.name, rel,
                         "its arrays do not match the hash saved with them (changed, or another point's)")
    return arrays


def _why(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"unreadable ({type(err).__name__}{': ' + text[:160] if text else ''})"


def _files(path: Path) -> list[Path]:
    """Every file a finished run directory holds (the lock, the manifest and temporary files aside)."""
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink() and p.name not in (LOCK, MANIFEST)
                  and not p.name.startswith("."))


def write_manifest(path: Path) -> None:
    """``manifest.json``: each file's size and SHA-256, recorded when the run finishes, so that a file missing,
    truncated or changed later is detected (:func:`problems`, ``icldyn check``) rather than read as empty."""
    files = {str(p.relative_to(path)): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in _files(path)}
    write_json(path / MANIFEST, {"files": files})


SUMMARY_STATUSES = ("finished", "diverged")


def _summary_shape(s: Any) -> str | None:
    """What is wrong with a summary.json's shape, or None."""
    if not isinstance(s, dict):
        return f"not a JSON object (a {type(s).__name__})"
    if s.get("status") not in SUMMARY_STATUSES:
        return f"status {s.get('status')!r} is not one of {', '.join(SUMMARY_STATUSES)}"
    if not isinstance(s.get("experiment", ""), str):
        return "experiment is not a string"
    wall = s.get("wall_s")
    if wall is not None and (isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall)):
        return f"wall_s {wall!r} is not a number"
    if not isinstance(s.get("points", []), list):
        return "points is not a list"
    return None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(_why(err) if isinstance(err, OSError) else
                         "empty" if not path.stat().st_size else "not valid JSON (truncated or changed)") from None


def read_summary(path: Path) -> dict[str, Any]:
    """A finished run's summary.json, checked for shape; RunDamaged names what is wrong."""
    try:
        s = _json(path / "summary.json")
    except ValueError as err:
        raise RunDamaged(path.name, "summary.json", str(err)) from None
    why = _summary_shape(s)
    if why:
        raise RunDamaged(path.name, "summary.json", why)
    return s


SHIFTS_FILE = "shifts.parquet"  # icldyn eval's error-vs-k curves of a finished run (icldyn.evaluation)
DATA = ("config.toml", "summary.json", "metrics.parquet", "params.npz", SHIFTS_FILE)  # hashed on every read


def problems(path: Path, deep: bool | tuple[str, ...] = DATA) -> list[tuple[str, str]]:
    """What is wrong with a run directory, as (file, reason) pairs; empty for a sound run. Always checked: the
    directory is no symlink, config.toml is TOML, summary.json and manifest.json are JSON of the right shape, every
    file of the manifest is there at its recorded size, and each Parquet file's footer reads. ``deep``: the files
    whose SHA-256 is compared with the manifest too (default: the data files, a few small files a run; True: every
    file and every checkpoint's hash, as ``icldyn check``)."""
    from icldyn.config import ConfigError, load_toml

    if path.is_symlink():
        return [(".", "the run directory is a symlink (not followed: it may lead outside the store)")]
    out = []
    if not (path / "config.toml").is_file():
        out.append(("config.toml", "missing"))
    else:
        try:
            load_toml(str(path / "config.toml"))
        except ConfigError as err:
            out.append(("config.toml", str(err).split(": ", 1)[-1]))
    parquet = [p for p in [path / "metrics.parquet", path / SHIFTS_FILE,
                           *sorted((path / "metrics.parts").glob("*.parquet"))] if p.is_file()]
    promised = False
    if (path / "summary.json").exists():
        try:
            promised = read_summary(path).get("manifest") == MANIFEST
        except RunDamaged as err:
            out.append((err.file, err.reason))
    if promised and not (path / MANIFEST).exists() and not _locked(path):
        out.append((MANIFEST, "missing (summary.json says the run recorded one)"))
    try:
        manifest = _json(path / MANIFEST)["files"] if (path / MANIFEST).exists() else None
        if manifest is not None and not all(isinstance(v, dict) and isinstance(v.get("size"), int)
                                            for v in manifest.values()):
            raise ValueError("not the shape of a manifest")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        out.append((MANIFEST, str(err) or "not the shape of a manifest"))
        manifest = None
    if manifest is not None:
        for rel, rec in manifest.items():
            f = path / rel
            if any(rel == seen for seen, _ in out):
                continue
            if not f.is_file():
                out.append((rel, "missing (the manifest records it)"))
            elif f.stat().st_size != rec["size"]:
                out.append((rel, f"truncated or changed: {f.stat().st_size} bytes, {rec['size']} recorded"))
            elif (deep is True or rel in deep) and _sha256(f) != rec.get("sha256"):
                out.append((rel, "changed since the run finished (its SHA-256 differs from the manifest's)"))
        if deep is True:
            out += [(str(p.relative_to(path)), "not in the manifest (added after the run finished)")
                    for p in _files(path) if str(p.relative_to(path)) not in manifest and p.name != CRASH]
    for p in parquet:
        rel = str(p.relative_to(path))
        if any(rel == f for f, _ in out):
            continue
        try:
            pq.read_metadata(p)
        except Exception as err:
            out.append((rel, _why(err)))
    if deep is True and (path / "checkpoint").is_dir():
        for p in sorted((path / "checkpoint").glob("*.npz")):
            try:
                read_checkpoint(p)
            except RunDamaged as err:
                out.append((err.file, err.reason))
    return out


def damage(path: Path, deep: bool | tuple[str, ...] = DATA) -> str | None:
    """``<file>: <reason>`` of a run's first problem (:func:`problems`), or None."""
    found = problems(path, deep)
    return f"{found[0][0]}: {found[0][1]}" + (f" (and {len(found) - 1} more)" if len(found) > 1 else "") \
        if found else None


def verified(path: Path, rel: str) -> Path:
    """``path/rel``, after checking the run's other files cheaply and this one's hash against the manifest; a
    finished run's missing or changed file raises RunDamaged naming it (never read as empty)."""
    found = problems(path, (*DATA, rel))
    if found:
        raise RunDamaged(path.name, *next((p for p in found if p[0] == rel), found[0]))
    return path / rel


SHIFTS_SCHEMA = pa.schema([("run_id", pa.string()), ("point", pa.string()), ("seed", pa.int64()),
                           ("shift", pa.string()), ("k", pa.int64()), ("method", pa.string()),
                           ("error", pa.float64()), ("se", pa.float64())])


def write_shift_rows(path: Path, rows: list[dict[str, Any]], replace: set[str]) -> list[dict[str, Any]]:
    """Write a finished run's ``shifts.parquet`` atomically: its earlier rows but those of the shifts in
    ``replace``, then ``rows`` (:data:`SHIFTS_SCHEMA`); returns every row the file now holds."""
    f = path / SHIFTS_FILE
    old = pq.read_table(verified(path, SHIFTS_FILE)).to_pylist() if f.is_file() else []
    every = [r for r in old if r["shift"] not in replace] + rows
    table = pa.Table.from_pylist(every, schema=SHIFTS_SCHEMA)
    _atomic(f, lambda out: pq.write_table(table, out))
    return every


def add_to_manifest(path: Path, rels: list[str]) -> None:
    """Record files added to a finished run (their size and SHA-256) in its manifest, the other entries kept."""
    manifest = _json(path / MANIFEST)
    manifest["files"].update({rel: {"size": (path / rel).stat().st_size, "sha256": _sha256(path / rel)}
                              for rel in rels})
    write_json(path / MANIFEST, manifest)


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold a run directory's lock (:func:`_lock`: another writer is refused in one line) while adding to it."""
    f = _lock(path)
    try:
        yield
    finally:
        f.close()


def read_metrics(path: Path):
    """A run's metrics as a long-format DataFrame: metrics.parquet plus the chunks an unfinished run has flushed; a
    finished run's file missing, changed or unreadable raises RunDamaged (never an empty frame)."""
    verified(path, "metrics.parquet")
    files = [path / "metrics.parquet"] if (path / "metrics.parquet").is_file() else []
    files += sorted((path / "metrics.parts").glob("*.parquet")) if (path / "metrics.parts").is_dir() else []
    try:
        tables = [pq.read_table(f) for f in files] or [METRICS_SCHEMA.empty_table()]
    except Exception as err:  # pyarrow's errors: a file changed since it was checked
        raise RunDamaged(path.name, "metrics", f"unreadable ({type(err).__name__})") from None
    return pa.concat_tables(tables).to_pandas()


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
    error stopped it) or interrupted (Ctrl-C, kill, power loss: ``--resume`` continues it); damaged where a file
    is missing, truncated or unreadable (:func:`problems`)."""
    return "damaged" if problems(path) else _status(path)


def _status(path: Path) -> str:
    """:func:`run_status` of a run already checked."""
    if (path / "summary.json").is_file():
        return read_summary(path)["status"]
    if _locked(path):
        return "running"
    return "crashed" if (path / CRASH).is_file() else "interrupted"


def resolve_run(store: str | Path, run: str) -> Path:
    """A run given by directory path, id, or unique id prefix/suffix."""
    path = Path(run)
    if (path / "config.toml").exists() and not path.is_symlink():
        return path
    root = Path(store)
    matches = [p for p in run_dirs(root) if run in p.name] if root.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise StoreError(f"no run {run!r} in store {str(root)!r}; see `icldyn runs`")
    raise StoreError(f"run {run!r} is ambiguous in {str(root)!r}: {', '.join(sorted(p.name for p in matches)[:5])}")


RUN_FILES = ("config.toml", "summary.json", MANIFEST, "metrics.parquet")  # any of them: a run directory


def run_dirs(store: str | Path) -> list[Path]:
    """The store's run directories — those holding any of RUN_FILES, so that one whose config.toml is lost is still
    listed (damaged) — and symlinks among them, to be reported, never followed."""
    return sorted(p for p in Path(store).glob("*") if not p.name.startswith(".") and p.name != "sweeps"
                  and (p.is_symlink() or (p.is_dir() and any((p / f).is_file() for f in RUN_FILES))))


def list_runs(store: str | Path, deep: bool | tuple[str, ...] = DATA) -> list[dict[str, Any]]:
    """Every run directory with its status (:func:`run_status`), its start time and, while unfinished, the last
    logged step and the command that resumes it. A damaged run is a row of status ``damaged`` whose ``damage``
    says ``<file>: <reason>`` (:func:`problems`; ``deep``: the files whose hashes are checked too)."""
    if Path(store).exists() and not Path(store).is_dir():
        raise StoreError(f"store {str(store)!r} is a file, not a directory")
    out = []
    for d in run_dirs(store):
        hurt = damage(d, deep)
        status = "damaged" if hurt else _status(d)
        started = (d / "config.toml").stat().st_mtime if (d / "config.toml").is_file() and not d.is_symlink() else 0
        row = {"run_id": d.name, "experiment": d.name.split("-", 2)[-1].rsplit("-", 1)[0], "status": status,
               "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "",
               "wall_s": None, "last_step": None, "resume": None, "path": str(d), "damage": hurt}
        if d.is_symlink():
            pass
        elif (d / "summary.json").is_file():
            if not hurt:
                s = read_summary(d)
                row.update(experiment=s.get("experiment", row["experiment"]), wall_s=s.get("wall_s"))
        else:
            row["last_step"] = last_step(d)
            if status != "running" and not _locked(d) and not (d / MANIFEST).exists():
                row["resume"] = f"icldyn run --resume {d}"
        out.append(row)
    return out


def check(store: str | Path, run: str | None = None) -> list[dict[str, Any]]:
    """Verify a store (every run and sweep record) or one run against the manifests: one row each — ``kind`` (run
    or sweep), ``id``, ``status``, ``problems`` (``<file>: <reason>`` each; every file's SHA-256 compared, every
    checkpoint's hash too) and ``ok``."""
    root = Path(store)
    if root.exists() and not root.is_dir():
        raise StoreError(f"store {str(root)!r} is a file, not a directory")
    paths = [resolve_run(root, run)] if run is not None else run_dirs(root)
    out = []
    for d in paths:
        found = [f"{f}: {why}" for f, why in problems(d, deep=True)]
        status = "damaged" if found else run_status(d)
        if not found and status in SUMMARY_STATUSES and not (d / MANIFEST).is_file():
            status += " (no manifest: finished before manifests were written; not verified)"
        out.append({"kind": "run", "id": d.name, "status": status, "problems": found, "ok": not found})
    for f in sorted(root.glob("sweeps/*.json")) if run is None else []:
        try:
            read_record(f)
            out.append({"kind": "sweep", "id": f.stem, "status": "ok", "problems": [], "ok": True})
        except RunDamaged as err:
            out.append({"kind": "sweep", "id": f.stem, "status": "damaged", "problems": [f"{err.file}: {err.reason}"],
                        "ok": False})
    return out


def read_record(path: Path) -> dict[str, Any]:
    """A sweep record (``<store>/sweeps/<id>.json``), checked for shape; RunDamaged names what is wrong."""
    rel = f"sweeps/{path.name}"
    try:
        r = _json(path)
    except ValueError as err:
        raise RunDamaged(path.stem, rel, str(err), "sweep") from None
    ok = (isinstance(r, dict) and isinstance(r.get("sweep_id"), str) and isinstance(r.get("target"), dict)
          and isinstance(r.get("axes"), dict) and isinstance(r.get("points"), list)
          and all(isinstance(p, dict) and isinstance(p.get("overrides"), dict) and isinstance(p.get("status"), str)
                  and isinstance(p.get("run_id"), (str, type(None))) for p in r["points"]))
    if not ok:
        raise RunDamaged(path.stem, rel, "not the shape of a sweep record", "sweep")
    return r


QUERY_HELP = "one SELECT (or WITH … SELECT) over the views metrics, finals, runs, sweeps and shifts"
QUERY_TIMEOUT_S = 60.0  # a query running longer is interrupted (icldyn query --timeout)
QUERY_MEMORY = "2GB"  # DuckDB's memory limit for one query (icldyn query --memory; DuckDB's own default: 80% of RAM)
QUERY_MAX_ROWS = 1_000_000  # rows a result may have (fetched into this process)


def query(store: str | Path, sql: str, *, timeout_s: float = QUERY_TIMEOUT_S, memory: str = QUERY_MEMORY,
          max_rows: int = QUERY_MAX_ROWS, notes: list[str] | None = None) -> tuple[list[str], list[tuple]]:
    """Run one read-only SQL statement over the store: the views ``metrics`` (every run's metrics.parquet, plus
    the chunks an unfinished run has flushed), ``finals`` (each run's, point's and seed's last logged value of
    each metric), ``runs`` (one row a run: status, last step, …), ``sweeps`` (sweep_id, run_id, status, key,
    value per swept key) and ``shifts`` (``icldyn eval``'s curves: run_id, point, seed, shift, k, method, error,
    se). Only a single SELECT runs (the parsed statement's type is checked); DuckDB sees no file outside the store, has no temporary directory (nothing spills to disk, so nothing planted in one is read) and
    its configuration is locked, so a query can neither write nor read elsewhere. It is bounded: interrupted after
    ``timeout_s`` seconds, within ``memory`` (a DuckDB size, e.g. ``2GB``) and ``max_rows`` result rows, each
    exceeded with one line. Damaged runs and sweep records (:func:`problems`; a metrics file's hash is checked
    against its run's manifest) are left out of every view, each named in one line appended to ``notes``. A run in
    progress may fold its chunk files away while they are listed; the query is then retried."""
    root = Path(store)
    if not sql.strip():
        raise StoreError(f"empty query: give {QUERY_HELP}")
    if root.exists() and not root.is_dir():
        raise StoreError(f"store {str(root)!r} is a file, not a directory")
    if not timeout_s > 0 or not math.isfinite(timeout_s):
        raise StoreError(f"query timeout = {timeout_s} is not allowed: must be a positive number of seconds")
    skipped: dict[str, str] = {}
    for attempt in range(8):
        try:
            out = _query(root, sql, timeout_s, memory, max_rows, skipped)
            break
        except duckdb.IOException:
            if attempt == 7:
                raise StoreError("query failed: the store kept changing while it was read; try again") from None
            time.sleep(0.05)
        except _Unreadable as err:  # a file DuckDB could not read, though it passed the checks: left out, retried
            skipped[err.run_id] = err.why
    else:
        raise StoreError("query failed: files kept turning out unreadable; see `icldyn check`")
    if notes is not None:
        notes += [f"skipped damaged {what}: {why}" for what, why in sorted(skipped.items())]
    return out


def _as_subquery(con, sql: str) -> str | None:
    """A statement DuckDB expands into several (a ``PIVOT`` without an ``IN`` list: its columns are read from the
    data first) as ``SELECT * FROM (<sql>)``, or None where it is no query: only a query parses as a subquery, so
    ``COPY (PIVOT …) TO …`` or ``CREATE TABLE … AS PIVOT …`` stay refused, and what runs is the query checked."""
    wrapped = "SELECT * FROM (\n" + re.sub(r";\s*$", "", sql.strip()) + "\n)"
    try:
        return wrapped if len(con.extract_statements(wrapped)) == 1 else None
    except duckdb.Error:
        return None


class _Unreadable(Exception):
    def __init__(self, run_id: str, why: str):
        self.run_id, self.why = run_id, why


def _query(root: Path, sql: str, timeout_s: float, memory: str, max_rows: int,
           skipped: dict[str, str]) -> tuple[list[str], list[tuple]]:
    con = duckdb.connect(":memory:")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as err:
        raise StoreError(f"query failed: {str(err).splitlines()[0]}") from None
    kinds = ", ".join(str(st.type).rsplit(".", 1)[-1] for st in statements)
    if kinds == "MULTI":  # one statement DuckDB expands into several: a PIVOT query, or no query at all
        sql, kinds = _as_subquery(con, statements[0].query), "a statement that is not a query"
    if len(statements) != 1 or not sql or statements[0].type not in (duckdb.StatementType.SELECT,
                                                                     duckdb.StatementType.MULTI):
        raise StoreError(f"only {QUERY_HELP} is allowed (the store is read-only); got: {kinds}")
    runs = list_runs(root) if root.is_dir() else []
    for r in runs:
        if r["damage"]:
            skipped.setdefault(f"run {r['run_id']}", r["damage"])
    good = [r for r in runs if f"run {r['run_id']}" not in skipped]
    files = [(r["run_id"], f) for r in good for f in [Path(r["path"]) / "metrics.parquet",
                                                      *sorted((Path(r["path"]) / "metrics.parts").glob("*.parquet"))]
             if f.is_file()]
    try:
        con.execute("SET temp_directory = ''")  # no spilling: DuckDB would allow reading its (relative) temp folder
        con.execute("SET memory_limit = ?", [memory])
    except duckdb.Error as err:
        raise StoreError(f"query memory limit {memory!r} is not allowed: {str(err).splitlines()[0]}") from None
    if root.is_dir():
        con.execute("SET allowed_directories = [?]", [str(root.resolve()) + os.sep])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    if files:
        listing = ", ".join("'" + str(f.resolve()).replace("'", "''") + "'" for _, f in files)
        con.execute(f"CREATE VIEW metrics AS SELECT * FROM read_parquet([{listing}], union_by_name = true)")
    else:
        con.execute("CREATE VIEW metrics AS SELECT * FROM (SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS point, "
                    "NULL::BIGINT AS seed, NULL::BIGINT AS step, NULL::VARCHAR AS metric, NULL::DOUBLE AS value) "
                    "WHERE false")
    shift_files = [Path(r["path"]) / SHIFTS_FILE for r in good if (Path(r["path"]) / SHIFTS_FILE).is_file()]
    if shift_files:  # icldyn eval's curves
        listing = ", ".join("'" + str(f.resolve()).replace("'", "''") + "'" for f in shift_files)
        con.execute(f"CREATE VIEW shifts AS SELECT * FROM read_parquet([{listing}])")
    else:
        con.execute("CREATE VIEW shifts AS SELECT * FROM (SELECT NULL::VARCHAR AS run_id, NULL::VARCHAR AS point, "
                    "NULL::BIGINT AS seed, NULL::VARCHAR AS shift, NULL::BIGINT AS k, NULL::VARCHAR AS method, "
                    "NULL::DOUBLE AS error, NULL::DOUBLE AS se) WHERE false")
    con.execute("CREATE VIEW finals AS SELECT run_id, point, seed, metric, max(step) AS step, "
                "arg_max(value, step) AS value FROM metrics GROUP BY run_id, point, seed, metric")
    # sweeps: one row per (point, swept key), so that a figure's table is one join away
    con.execute("CREATE TABLE sweeps (sweep_id VARCHAR, run_id VARCHAR, status VARCHAR, key VARCHAR, value VARCHAR)")
    damaged = {k.split(" ", 1)[1] for k in skipped if k.startswith("run ")}
    swept = []
    for f in sorted(root.glob("sweeps/*.json")):
        try:
            record = read_record(f)
        except RunDamaged as err:
            skipped.setdefault(f"sweep {f.stem}", f"{err.file}: {err.reason}")
            continue
        swept += [(record["sweep_id"], p["run_id"], p["status"], k, str(v)) for p in record["points"]
                  if p["run_id"] not in damaged for k, v in p["overrides"].items()]
    if swept:
        con.executemany("INSERT INTO sweeps VALUES (?, ?, ?, ?, ?)", swept)
    cols = ("run_id", "experiment", "status", "started", "wall_s", "last_step", "path")
    con.execute("CREATE TABLE runs (run_id VARCHAR, experiment VARCHAR, status VARCHAR, started VARCHAR, "
                "wall_s DOUBLE, last_step BIGINT, path VARCHAR)")
    if good:
        con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?)", [tuple(r[c] for c in cols) for r in good])
    timer = threading.Timer(timeout_s, con.interrupt)
    timer.start()
    try:
        cur = con.execute(sql)
        names = [c[0] for c in cur.description] if cur.description else []
        rows = cur.fetchmany(max_rows + 1)
    except duckdb.IOException:
        raise
    except duckdb.InterruptException:
        raise StoreError(f"query stopped at its time limit ({timeout_s:g} s; raise it with --timeout)") from None
    except duckdb.OutOfMemoryException:
        raise StoreError(f"query stopped at its memory limit ({memory}; raise it with --memory)") from None
    except duckdb.Error as err:
        first = str(err).splitlines()[0]
        hit = next(((run_id, f) for run_id, f in files if str(f.resolve()) in str(err)), None)
        if hit is not None:
            raise _Unreadable(f"run {hit[0]}", f"{hit[1].relative_to(root / hit[0])}: unreadable ({first[:160]})") \
                from None
        raise StoreError(f"query failed: {first}") from None
    finally:
        timer.cancel()
        con.close()
    if len(rows) > max_rows:
        raise StoreError(f"query result has more than {max_rows} rows; narrow it (WHERE, GROUP BY or LIMIT)")
    return names, rows
