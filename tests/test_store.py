"""The store is safe and every output tells the truth: a read-only, confined `icldyn query`; one writer per run
directory; statuses; one line (never a traceback) for every failure; overrides that would be ignored refused."""

import hashlib

import pytest
from conftest import TINY
from typer.testing import CliRunner

from icldyn import runner
from icldyn.cli import app
from icldyn.plugins import get
from icldyn.store import RunDir, list_runs, query


@pytest.fixture
def store(tiny_store):
    return tiny_store


def _digest(root) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1 AS x) TO '{run}/metrics.parquet' (FORMAT parquet)", "COPY (SELECT 1) TO '{tmp}/leak.csv'",
    "ATTACH '{tmp}/x.duckdb'", "SELECT * FROM read_text('/etc/hostname')", "SELECT * FROM read_text('{run}/../../x')",
    "DROP VIEW metrics", "DELETE FROM runs", "INSERT INTO runs VALUES (1)", "SET enable_external_access = true",
    "SELECT 1; SELECT 2", "SELECT * FROM query('COPY (SELECT 1) TO ''{run}/x.parquet''')", "", "   ", "PRAGMA version",
    "COPY (PIVOT finals ON seed USING max(value)) TO '{run}/x.csv'",
    "CREATE TABLE x AS PIVOT finals ON seed USING max(value)",
    "PIVOT finals ON seed USING max(value); COPY (SELECT 1) TO '{run}/y.csv'",
])
def test_query_is_read_only_and_confined_to_the_store(store, tmp_path, sql):
    run = next(p for p in store.iterdir() if p.is_dir())
    before = _digest(store)
    res = CliRunner().invoke(app, ["query", sql.format(run=run, tmp=tmp_path), "--out", str(store)])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert _digest(store) == before and not list(tmp_path.iterdir())


def test_finals_runs_and_a_select_over_store_files(store):
    cols, rows = query(store, "SELECT seed, step, value FROM finals WHERE metric = 'test_loss' AND "
                              "point = 'model.layers=3' ORDER BY seed")
    assert [r[:2] for r in rows] == [(0, 40), (1, 40)]
    _, last = query(store, "SELECT seed, value FROM metrics WHERE metric = 'test_loss' AND step = 40 AND "
                           "point = 'model.layers=3' ORDER BY seed")
    assert [r[2] for r in rows] == [v for _, v in last]
    _, status = query(store, "SELECT status, last_step FROM runs")
    assert status == [("finished", None)]
    run = next(p for p in store.iterdir() if p.is_dir())
    _, n = query(store, f"SELECT count(*) FROM read_parquet('{run}/metrics.parquet')")  # inside the store: allowed
    assert n[0][0] > 0
    # a read-only construct DuckDB expands into several statements (a PIVOT reads its columns from the data first)
    cols, pivot = query(store, "PIVOT (SELECT point, seed, value FROM finals WHERE metric = 'test_loss') "
                               "ON seed USING max(value) ORDER BY point;")
    assert cols == ["point", "0", "1"] and [r[0] for r in pivot] == ["model.layers=1", "model.layers=3"]
    assert list(pivot[1][1:]) == [v for _, v in last]


def test_one_writer_per_run_directory(tmp_path):
    rd = RunDir.create(tmp_path, "quickstart")
    rd.write_config(get("quickstart").config(TINY))
    res = CliRunner().invoke(app, ["run", "--resume", str(rd.path)])  # another open of the lock: refused
    assert res.exit_code == 2 and "is being written by process" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert [r["status"] for r in list_runs(tmp_path)] == ["running"]
    rd.release()
    assert [r["status"] for r in list_runs(tmp_path)] == ["interrupted"]
    rd.mark_crashed(RuntimeError("boom"))
    assert [r["status"] for r in list_runs(tmp_path)] == ["crashed"]


@pytest.mark.e2e
def test_ctrl_c_names_the_run_and_its_resume_command(tmp_path):
    class Interrupt:
        def start(self, description, total):
            def tick(step, metrics):
                if step >= 20:
                    raise KeyboardInterrupt

            return tick

    with pytest.raises(runner.RunInterrupted) as err:
        runner.execute(get("quickstart").config(TINY), tmp_path, Interrupt())
    (row,) = list_runs(tmp_path)
    assert row["status"] == "interrupted" and row["last_step"] == 20
    assert f"run {row['run_id']} interrupted after step 20" in str(err.value)
    assert f"icldyn run --resume {row['path']}" in str(err.value)
    res = CliRunner().invoke(app, ["show", row["run_id"], "--out", str(tmp_path)])
    assert res.exit_code == 2 and "interrupted (last logged step 20)" in res.stderr and "--resume" in res.stderr
    res = CliRunner().invoke(app, ["runs", "--out", str(tmp_path)])
    assert "interrupted" in res.stdout and "step 20" in res.stdout


@pytest.mark.parametrize("args, needle", [
    (["run", "ahn-loss-vs-layers", "--quick", "--set", "model.layers=2"], "grid.model.layers=[2]"),
    (["run", "ahn-structure", "--set", "model.parameterization=sparse"], "grid.model.parameterization=['sparse']"),
    (["run", "--resume", "runs/x", "--set", "train.steps=10"], "--resume continues a run with its own config"),
    (["show", "no-such-run-or-sweep"], "no run"),
    (["query", ""], "empty query"),
])
def test_overrides_that_would_be_ignored_and_bad_targets_are_one_line(tmp_path, args, needle):
    res = CliRunner().invoke(app, [*args, "--out", str(tmp_path)] if args[0] != "run" or "--resume" not in args
                             else args)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert needle in res.stderr, res.stderr
    assert not any(tmp_path.iterdir())


def test_out_pointing_at_a_file_is_one_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for cmd in (["run", "--set", "train.steps=1"], ["runs"], ["query", "SELECT 1"]):
        res = CliRunner().invoke(app, [*cmd, "--out", str(f)])
        assert res.exit_code == 2 and "is a file" in res.stderr and len(res.stderr.strip().splitlines()) == 1, cmd
