"""Sweeps (issue #7): every grid point a run directory, a record, learning rates as one program, resume skips
finished points, a Ray cluster whose worker has no icldyn gives the local numbers."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from icldyn.cli import app
from icldyn.store import query

TINY = ["--set", "train.steps=40", "--set", "train.log_every=20", "--set", "train.batch=64",
        "--set", "data.test_size=256", "--set", "seeds=2", "--set", "grid.model.layers=[1]"]


@pytest.mark.e2e
def test_sweep_runs_grid_records_and_resumes(tmp_path):
    cli = CliRunner()
    res = cli.invoke(app, ["sweep", "quickstart", "--grid", "train.lr=0.01,0.02", "--grid", "data.n=10,15,20",
                           *TINY, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    closing = res.stdout
    rec_path = next((tmp_path / "sweeps").glob("*.json"))
    record = json.loads(rec_path.read_text())
    assert len(record["points"]) == 6 and all(p["status"] == "finished" for p in record["points"])
    assert [p["job_size"] for p in record["points"]] == [2] * 6  # the two rates of each n: one program
    for p in record["points"]:
        summary = json.loads((tmp_path / p["run_id"] / "summary.json").read_text())
        assert summary["points"][0]["n"] == p["overrides"]["data.n"]
        assert len(summary["figures"]) == len(list((tmp_path / p["run_id"] / "figures").glob("*.png"))) > 0
    # a point trained on the learning-rate axis gives the numbers of the same config run alone (float32;
    # XLA may order a batched reduction differently, hence not bit-identical)
    point = next(p for p in record["points"] if p["overrides"] == {"train.lr": 0.02, "data.n": 10})
    alone = tmp_path / "alone"
    res = cli.invoke(app, ["run", "quickstart", *TINY, "--set", "train.lr=0.02", "--set", "data.n=10",
                           "--out", str(alone)])
    assert res.exit_code == 0, res.output
    grouped, single = (_metrics(path) for path in (tmp_path / point["run_id"], next(alone.iterdir())))
    assert grouped.keys() == single.keys() and len(grouped) == 32  # 3 logs × 2 seeds, 4 + 6 metrics
    for key, value in single.items():
        assert abs(grouped[key] - value) <= 1e-5 * abs(value) + 1e-7, key
    # the tidy table a figure needs: final test loss per (lr, n), via the sweeps table
    _, rows = query(tmp_path, "SELECT lr.value, n.value, avg(m.value) FROM metrics m "
                              "JOIN sweeps lr ON lr.run_id = m.run_id AND lr.key = 'train.lr' "
                              "JOIN sweeps n ON n.run_id = m.run_id AND n.key = 'data.n' "
                              "WHERE m.metric = 'test_loss' AND m.step = 40 GROUP BY 1, 2")
    assert len(rows) == 6
    # and the sweep's own report: the final test loss per point, against each axis
    summary = json.loads((tmp_path / record["report"]).with_name("summary.json").read_text())
    finals = {(r[0], r[1]): float(r[3].split(" ± ")[0]) for r in summary["table"]["rows"]}
    assert len(finals) == 6 and all(r[4] == 0 for r in summary["table"]["rows"])
    for lr, n, mean in rows:
        assert abs(finals[(float(lr), int(n))] - mean) <= 5e-4 * mean  # the query's numbers (to 4 digits)
    figures = (tmp_path / record["report"]).with_name("figures")
    assert {f.name for f in figures.glob("*.png")} == {"final_vs_train_lr.png", "final_vs_data_n.png"}
    assert {f.name for f in figures.glob("*.pdf")} == {"final_vs_train_lr.pdf", "final_vs_data_n.pdf"}
    # the closing table, `icldyn sweeps` and `icldyn show SWEEP_ID` show each point's final loss
    point = record["points"][0]
    mean = finals[(point["overrides"]["train.lr"], point["overrides"]["data.n"])]
    assert f"test_loss {mean:.4g}" in closing
    listing = cli.invoke(app, ["sweeps", "--out", str(tmp_path)])
    assert record["sweep_id"] in listing.stdout and "quickstart" in listing.stdout
    shown = cli.invoke(app, ["show", record["sweep_id"], "--out", str(tmp_path)])
    assert shown.exit_code == 0 and point["run_id"] in shown.stdout and f"{mean:.4g}" in shown.stdout
    # a sweep interrupted after some points: resume reruns only the unfinished ones
    done = [p["run_id"] for p in record["points"]]
    record["points"][1].update(run_id=None, status="pending")
    record["points"][4].update(run_id=None, status="pending")
    rec_path.write_text(json.dumps(record))
    res = cli.invoke(app, ["sweep", "--resume", record["sweep_id"], "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    after = json.loads(rec_path.read_text())
    for i, p in enumerate(after["points"]):
        assert p["status"] == "finished"
        assert (p["run_id"] == done[i]) == (i not in (1, 4))  # only the two unfinished points ran again


@pytest.mark.e2e
def test_points_differing_in_seeds_and_data_law_are_one_job(tmp_path):
    """Seeds and the noise level change no shape: the four points are stacked on one seed axis, each slot at its
    point's learning rate, and give the numbers of each config run alone."""
    cli = CliRunner()
    res = cli.invoke(app, ["sweep", "quickstart", "--grid", "seed=0,5", "--grid", "data.noise_std=0,0.5",
                           "--set", "train.lr=0.02", *TINY, "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    record = json.loads(next((tmp_path / "sweeps").glob("*.json")).read_text())
    assert [p["job_size"] for p in record["points"]] == [4] * 4
    point = next(p for p in record["points"] if p["overrides"] == {"seed": 5, "data.noise_std": 0.5})
    alone = tmp_path / "alone"
    res = cli.invoke(app, ["run", "quickstart", *TINY, "--set", "seed=5", "--set", "data.noise_std=0.5",
                           "--set", "train.lr=0.02", "--out", str(alone)])
    assert res.exit_code == 0, res.output
    grouped, single = (_metrics(path) for path in (tmp_path / point["run_id"], next(alone.iterdir())))
    assert grouped.keys() == single.keys() and {k[1] for k in single} == {5, 6}  # its own seeds
    for key, value in single.items():
        assert abs(grouped[key] - value) <= 1e-5 * abs(value) + 1e-7, key


@pytest.mark.e2e
def test_no_group_runs_each_point_alone_bit_for_bit(tmp_path):
    cli = CliRunner()
    res = cli.invoke(app, ["sweep", "quickstart", "--grid", "train.lr=0.02,0.03", "--no-group", *TINY,
                           "--set", "data.n=10", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    record = json.loads(next((tmp_path / "sweeps").glob("*.json")).read_text())
    assert [p["job_size"] for p in record["points"]] == [1, 1]
    res = cli.invoke(app, ["run", "quickstart", *TINY, "--set", "train.lr=0.02", "--set", "data.n=10",
                           "--out", str(tmp_path / "alone")])
    assert res.exit_code == 0, res.output
    assert _metrics(tmp_path / record["points"][0]["run_id"]) == _metrics(next((tmp_path / "alone").iterdir()))


def _metrics(run: Path) -> dict:
    import pyarrow.parquet as pq

    t = pq.read_table(run / "metrics.parquet").to_pydict()
    return {(pt, sd, st, m): v for pt, sd, st, m, v in zip(t["point"], t["seed"], t["step"], t["metric"], t["value"])}


def test_bad_sweep_input_is_one_line(tmp_path):
    for args in (["--grid", "train.lr"], ["--grid", "train.nope=1,2"], ["--grid", "train.lr=-1,0.1"],
                 ["--backend", "slurm"]):
        res = CliRunner().invoke(app, ["sweep", "quickstart", *args, "--out", str(tmp_path)])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, (args, res.output)
    assert not list(tmp_path.glob("*/summary.json"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(leaders: list[subprocess.Popen]) -> None:
    """SIGTERM to the process groups ``leaders`` started (Ray nodes and their daemons), SIGKILL to what is left of
    them after 3 s (a test cluster: nothing to save)."""
    for p in leaders:
        os.killpg(p.pid, signal.SIGTERM)
    deadline, left = time.monotonic() + 3, list(leaders)
    while left:
        for p in list(left):
            p.poll()  # reaped: a zombie leader would keep its group alive
            try:
                os.killpg(p.pid, signal.SIGKILL if time.monotonic() > deadline else 0)
            except ProcessLookupError:
                left.remove(p)
        time.sleep(0.2)


def _bare_venv(path: Path) -> Path:
    """A venv with every package of this one — Ray and icldyn's dependencies — but icldyn: each linked, not copied
    (cheap), icldyn's own entries (its package or dist-info, an editable install's path file and finder) left out.
    Returns its python, checked to find no icldyn, neither the package nor its distribution."""
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True)
    site = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("icldyn", "__editable__")) and not (site / entry.name).exists():
            (site / entry.name).symlink_to(entry)
    python = path / "bin" / "python"
    probe = ("import importlib.metadata as m, importlib.util as u, ray, jax, optax; "
             "print(u.find_spec('icldyn'), [d for d in m.distributions() if d.metadata['Name'] == 'icldyn'])")
    assert subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}).stdout == "None []\n"
    return python


@pytest.fixture
def ray_cluster(tmp_path, monkeypatch):
    """A two-node Ray cluster on this machine, as ``ray start`` makes one: a head of no CPUs from this venv (so no
    task can run there) and a worker node of one CPU started from a venv without icldyn, on free ports of
    127.0.0.1; stopped by process group (``ray stop`` would stop every Ray on the machine). Yields the address."""
    import ray

    port, temp = _free_port(), Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: socket paths ≤ 107 bytes
    # no token: a driver caches Ray's auth settings when it first imports ray, which another test may have done
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"RAY_AUTH_MODE": "disabled"}
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    start = ["-m", "ray.scripts.scripts", "start", "--node-ip-address", "127.0.0.1", "--block",
             "--disable-usage-stats"]
    nodes, logs = [], contextlib.ExitStack()

    def node(python, *args, log):
        out = logs.enter_context(open(tmp_path / log, "w"))  # noqa: SIM115  (closed by the stack)
        nodes.append(subprocess.Popen([python, *start, "--dashboard-agent-listen-port", str(_free_port()), *args],
                                      stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))

    try:
        node(sys.executable, "--head", "--port", str(port), "--num-cpus", "0", "--include-dashboard", "false",
             "--temp-dir", str(temp), log="head.log")
        node(_bare_venv(tmp_path / "bare"), "--address", f"127.0.0.1:{port}", "--num-cpus", "1", log="worker.log")
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=False, logging_level="WARNING")
        try:
            deadline = time.monotonic() + 180
            while ray.cluster_resources().get("CPU", 0) < 1:  # the worker node registered
                assert time.monotonic() < deadline and all(p.poll() is None for p in nodes), (
                    (tmp_path / "head.log").read_text()[-1500:] + (tmp_path / "worker.log").read_text()[-1500:])
                time.sleep(1)
            assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        finally:
            ray.shutdown()
        yield f"127.0.0.1:{port}"
    finally:
        _stop(nodes)
        logs.close()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.e2e
def test_a_two_node_ray_cluster_whose_worker_has_no_icldyn_gives_the_local_numbers(tmp_path, ray_cluster):
    """A 2×2 grid (2 learning rates × 2 prompt lengths: two jobs, each a learning-rate axis), 2 seeds, on the cluster
    of ``ray_cluster``: every task runs on the worker node, whose Python has no icldyn — it runs the code the driver
    ships (``icldyn.sweep.shipped``). Per point the same metrics and parameters as the local backend, bit for bit;
    every run directory published whole."""
    from icldyn.sweep import parse_axes, sweep

    raw = {"experiment": "quickstart", "seeds": 2, "grid": {"model.layers": [1]},
           "train": {"steps": 40, "log_every": 20, "batch": 64}, "data": {"test_size": 256}}
    axes = parse_axes(["train.lr=0.01,0.02", "data.n=10,15"])
    local = sweep(raw, False, axes, tmp_path / "local")
    remote = sweep(raw, False, axes, tmp_path / "ray", backend="ray", address=ray_cluster)
    import numpy as np
    import pyarrow.parquet as pq

    def numbers(store, run_id):
        t = pq.read_table(store / run_id / "metrics.parquet").drop(["run_id"])
        with np.load(store / run_id / "params.npz", allow_pickle=False) as z:
            return t.sort_by([(c, "ascending") for c in ("point", "seed", "step", "metric")]), dict(z)

    assert [p["job_size"] for p in remote["points"]] == [2, 2, 2, 2]  # two jobs of two points
    for a, b in zip(local["points"], remote["points"]):
        assert a["overrides"] == b["overrides"] and a["status"] == b["status"] == "finished"
        (ta, pa), (tb, pb) = numbers(tmp_path / "local", a["run_id"]), numbers(tmp_path / "ray", b["run_id"])
        assert ta.equals(tb) and pa.keys() == pb.keys() and all(np.array_equal(pa[k], pb[k]) for k in pa)
    assert not list((tmp_path / "ray").glob(".*.incoming"))


@pytest.mark.e2e
def test_killed_sweep_resumed_reruns_only_unfinished_points(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    args = ["sweep", "quickstart", "--grid", "model.init_std=0.001,0.002,0.003,0.004", *TINY,
            "--out", str(tmp_path)]  # four jobs of one shape
    proc = subprocess.Popen([sys.executable, "-c", "from icldyn.cli import main; main()", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    record = None
    while time.time() < deadline:  # kill -9 once two points have finished
        recs = list((tmp_path / "sweeps").glob("*.json")) if (tmp_path / "sweeps").is_dir() else []
        if recs:
            record = json.loads(recs[0].read_text())
            if sum(p["status"] == "finished" for p in record["points"]) >= 2:
                break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    record = json.loads(next((tmp_path / "sweeps").glob("*.json")).read_text())
    before = {i: p["run_id"] for i, p in enumerate(record["points"]) if p["status"] == "finished"}
    assert 2 <= len(before) < 4
    res = CliRunner().invoke(app, ["sweep", "--resume", record["sweep_id"], "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    after = json.loads(next((tmp_path / "sweeps").glob("*.json")).read_text())
    assert all(p["status"] == "finished" for p in after["points"])
    assert all(after["points"][i]["run_id"] == rid for i, rid in before.items())  # finished points not rerun
    finished_runs = [p for p in tmp_path.iterdir() if (p / "summary.json").is_file()]
    assert len(finished_runs) == 4  # one run per point; an interrupted point was continued, not duplicated


@pytest.mark.e2e
def test_a_jobs_figures_are_drawn_by_a_process_pool():
    """plots.draw_many hands ≥ 6 runs' figures to fresh processes (spawn: safe beside JAX's threads); the
    results come back in order."""
    from icldyn import plots

    assert plots.draw_many(max, [(i, 2 * i) for i in range(6)]) == [2 * i for i in range(6)]
