"""Reliability (docs/reliability.md): kill -9 and resume bit for bit, chunks flushed as training goes,
reproducibility, divergence of one seed among others, safety of the store."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icldyn.cli import app
from icldyn.plugins import get
from icldyn.store import RunDir, list_runs, query

SMALL = ["--set", "train.steps=500", "--set", "train.log_every=50", "--set", "train.batch=256",
         "--set", "data.test_size=1024", "--set", "train.checkpoint_every=0", "--set", "grid.model.layers=[1,3]",
         "--set", "train.flush_every=0"]  # every chunk flushed: the kill lands inside the L = 3 point


def _icldyn(*args, **kw):
    cmd = [sys.executable, "-c", "from icldyn.cli import main; main()", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _table(run: Path):
    t = pq.read_table(run / "metrics.parquet").drop(["run_id"])
    return t.sort_by([(c, "ascending") for c in ("point", "seed", "step", "metric")])


@pytest.mark.e2e
def test_kill_9_leaves_a_readable_run_and_resume_is_bit_identical_same_config_same_numbers(tmp_path):
    """The uninterrupted reference runs in this process (CLI), the killed and resumed run in other processes: the
    resumed run's every number equals the reference's (resume bit for bit; and its first point, trained start to end
    in another process, is the reproducibility check: same config + seed → same numbers)."""
    whole = CliRunner().invoke(app, ["run", "quickstart", "--json", *SMALL, "--out", str(tmp_path / "a")])
    assert whole.exit_code == 0, whole.output
    first = tmp_path / "a" / json.loads(whole.stdout)["run_id"]
    versions = json.loads((first / "summary.json").read_text())["versions"]
    assert versions["icldyn"] and versions["jax"] and (first / "config.toml").read_text().count("=") > 20
    proc = _icldyn("run", "quickstart", *SMALL, "--out", str(tmp_path / "b"))
    deadline = time.time() + 600
    sql = "SELECT max(step) FROM metrics WHERE point = 'model.layers=3'"
    seen = None  # the query runs once per change of metrics.parts/ (a flushed chunk), not every poll
    while time.time() < deadline:  # kill once the second point (3 layers) has flushed a few chunks
        parts = sorted((tmp_path / "b").glob("*/metrics.parts/*.parquet"))
        if parts and parts != seen:
            seen = parts
            # paused while asked how far it got: on the kernel path the query outlasts the point's remaining chunks
            os.kill(proc.pid, signal.SIGSTOP)
            if (query(tmp_path / "b", sql)[1][0][0] or 0) >= 100:
                break
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGSTOP)  # paused (its lock held) while a second writer tries
    running = next((tmp_path / "b").iterdir())
    assert [r["status"] for r in list_runs(tmp_path / "b")] == ["running"]
    second = _icldyn("run", "--resume", str(running))  # a second writer: refused in one line, naming the holder
    assert second.wait(timeout=120) == 2
    err = second.stderr.read().strip().splitlines()
    assert len(err) == 1 and f"being written by process {proc.pid}" in err[0], err
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run = next((tmp_path / "b").iterdir())
    assert not (run / "summary.json").exists() and (run / "config.toml").is_file()
    # readable: the finished point in metrics.parquet, the interrupted one's chunks in metrics.parts/
    _, rows = query(tmp_path / "b", "SELECT point, max(step) FROM metrics WHERE metric = 'test_loss' "
                                       "GROUP BY point ORDER BY point")
    logged = dict(rows)
    assert logged["model.layers=1"] == 500 and 0 < logged["model.layers=3"] < 500
    (row,) = list_runs(tmp_path / "b")
    assert row["status"] == "interrupted" and 0 < row["last_step"] < 500 and row["resume"].endswith(str(run))

    res = _icldyn("run", "--resume", str(run))
    assert res.wait(timeout=600) == 0, res.stderr.read()
    assert json.loads((run / "summary.json").read_text())["status"] == "finished"
    assert not (run / "checkpoint").exists() and not (run / "metrics.parts").exists()
    with np.load(first / "params.npz", allow_pickle=False) as a, np.load(run / "params.npz", allow_pickle=False) as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            assert np.array_equal(a[k], b[k]), k  # bit for bit
    assert _table(first).equals(_table(run))  # every metric value too: same config + seed → same numbers


def test_resume_refuses_finished_runs_and_symlinks(tmp_path):
    cli = CliRunner()
    finished = tmp_path / "20261130-000000-quickstart-abcdef"
    finished.mkdir()
    (finished / "config.toml").write_text('experiment = "quickstart"\n')
    (finished / "summary.json").write_text("{}")
    res = cli.invoke(app, ["run", "--resume", str(finished)])
    assert res.exit_code == 2 and "already finished" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    link = tmp_path / "link"
    link.symlink_to(finished)
    res = cli.invoke(app, ["run", "--resume", str(link)])
    assert res.exit_code == 2 and "symlink" in res.stderr


def test_store_symlink_refused(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "store").symlink_to(tmp_path / "real")
    res = CliRunner().invoke(app, ["run", "quickstart", "--out", str(tmp_path / "store"), "--set", "train.steps=1"])
    assert res.exit_code == 2 and "symlink" in res.stderr and not list((tmp_path / "real").iterdir())


@pytest.mark.e2e
def test_concurrent_runs_never_collide(tmp_path):
    made, errors = [], []

    def create():
        try:
            made.append(RunDir.create(tmp_path, "quickstart").path)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=create) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(made)) == 32 and len(list(tmp_path.iterdir())) == 32


@pytest.mark.e2e
def test_one_seed_diverges_the_others_finish():
    from icldyn.papers.goel.problem import build
    from icldyn.train.loop import train

    cfg = get("goel-convergence").config({"seeds": 1, "train": {"steps": 100, "log_every": 10}}, quick=True)
    setup = build(cfg)  # η = 80 diverges, η = 10 converges (one program, a learning-rate axis)
    params, hist = train(setup.problem, setup.opt, setup.tasks, None, setup.keys, steps=100, log_every=10,
                         max_loss=cfg.train.max_loss, lrs=[10.0, 80.0])
    assert list(hist.diverged_at) == [1] and hist.steps[-1] == 100
    assert np.isfinite(hist.metrics[-1]["excess_loss"][0]) and hist.metrics[-1]["excess_loss"][0] < 1e-8
    assert all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree.leaves(params))  # last finite kept


def test_divergence_is_judged_on_the_training_loss_and_held_out_spikes_are_recorded():
    from icldyn.papers.goel.problem import build
    from icldyn.train.loop import train

    cfg = get("goel-convergence").config({"seeds": 1, "train": {"steps": 40, "log_every": 10}}, quick=True)
    setup = build(cfg)
    ev = setup.problem.evaluate
    spiky = setup.problem._replace(evaluate=lambda p, t, te: {**ev(p, t, te), "held_out": jnp.asarray(1e9)})
    run = lambda **kw: train(spiky, setup.opt, setup.tasks, None, setup.keys, steps=40, log_every=10,  # noqa: E731
                             lrs=[10.0], losses=("held_out",), **kw)
    _, hist = run(max_loss=1e3)  # a held-out loss above max_loss at every log: recorded, nothing stopped
    assert not hist.diverged_at and hist.steps[-1] == 40 and hist.spikes == {0: [0, 10, 20, 30, 40]}
    assert hist.metrics[-1]["excess_loss"][0] < 1e-6  # trained to the end
    # a training loss above max_loss at every log: diverged at the diverge_after-th (step 0 logs no training loss)
    _, hist = run(max_loss=1e-30, diverge_after=2)
    assert hist.diverged_at == {0: 20} and hist.steps[-1] == 20
    _, hist = run(max_loss=1e-30, diverge_after=4)
    assert hist.diverged_at == {0: 40}


@pytest.mark.e2e
def test_learning_rate_job_resumes_from_its_checkpoint(tmp_path):
    """A job of several learning rates interrupted mid-training continues from the checkpoint of the whole
    program (kept with its first target) to the numbers of an uninterrupted job; a checkpoint of other rates
    is not taken for it."""
    from icldyn.papers.goel.problem import build
    from icldyn.recipe import train_point

    cfg = get("goel-convergence").config({"seeds": 1, "train": {"steps": 60, "log_every": 10,
                                                                "checkpoint_every": 0}}, quick=True)
    setup = build(cfg)

    def job(rd, lrs, tick):
        return train_point([(rd, f"lr={lr:g}", setup.seeds) for lr in lrs], cfg, setup.problem, setup.opt,
                           setup.tasks, None, setup.keys, tick, lrs)

    expected = job(RunDir.create(tmp_path, "whole"), [10.0, 20.0], lambda step, m: None)

    def stop(step, m):
        if step >= 30:
            raise KeyboardInterrupt

    rd = RunDir.create(tmp_path, "cut")
    try:
        job(rd, [10.0, 20.0], stop)
    except KeyboardInterrupt:
        pass
    assert int(rd.load_checkpoint("lr=10")["done"]) == 20  # interrupted while logging step 30
    steps_run = []
    resumed = job(rd, [10.0, 20.0], lambda step, m: steps_run.append(step))
    assert steps_run == [30, 40, 50, 60]  # continued, not restarted
    for (p1, h1), (p2, h2) in zip(expected, resumed):
        assert h1.steps == h2.steps and all(np.array_equal(p1[k], p2[k]) for k in p1)
        assert all(np.array_equal(a[k], b[k]) for a, b in zip(h1.metrics, h2.metrics) for k in a)
    steps_run.clear()  # the same first target's checkpoint, other rates: a fresh start
    job(rd, [10.0, 40.0], lambda step, m: steps_run.append(step))
    assert steps_run[0] == 0  # step 0 is logged only by a fresh start


def test_no_eval_exec_or_pickle_in_the_source():
    src = Path(__file__).resolve().parents[1] / "src" / "icldyn"
    for path in src.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"(?<![\w.])(eval|exec)\(", text), path
        assert "import pickle" not in text and "allow_pickle=True" not in text, path
        for call in re.findall(r"np\.load\([^)]*\)", text):
            assert "allow_pickle=False" in call, (path, call)


def test_evaluate_step_sees_the_last_steps_params_and_update():
    """``Problem.evaluate_step`` gets, after every chunk, the parameters before the chunk's last optimiser step and
    that step's update (gradient descent on ½‖w − t‖²: update = −η (w − t), and before + update = the chunk's end)."""
    import jax.numpy as jnp
    import optax

    from icldyn.train.loop import Problem, train

    targets = jnp.array([[1.0, -2.0], [3.0, 0.5]])  # two seeds' tasks
    problem = Problem(init=lambda t, k: {"w": jnp.zeros(2)}, sample=lambda t, k: t,
                      loss=lambda p, t: 0.5 * jnp.sum((p["w"] - t) ** 2),
                      evaluate=lambda p, t, test: {"w": p["w"]}, seed_map="vmap",
                      evaluate_step=lambda before, update, t, test: {"before": before["w"], "update": update["w"]})
    _, hist = train(problem, optax.sgd(0.1), targets, jnp.zeros(2), jax.random.split(jax.random.PRNGKey(0), 2),
                    steps=6, log_every=3)
    assert hist.steps == [0, 3, 6] and "update" not in hist.metrics[0]
    for m in hist.metrics[1:]:
        np.testing.assert_allclose(m["update"], -0.1 * (m["before"] - np.asarray(targets)), rtol=1e-6)
        np.testing.assert_allclose(m["before"] + m["update"], m["w"], rtol=1e-6)
    np.testing.assert_allclose(hist.metrics[2]["w"], np.asarray(targets) * (1 - 0.9 ** 6), rtol=1e-5)


@pytest.mark.e2e
def test_two_devices_give_one_devices_numbers(tmp_path):
    """The seeds split over two (forced host) devices, padded from three to four: the same final losses as one device
    to float32 rounding, and ``"devices": 2`` in the summary's execution, on the pure-JAX path and on the C kernel's
    (each device calls the kernel on its own seeds); an explicit count above the machine's is one line."""
    sets = ["--set", "grid.model.layers=[1]", "--set", "seeds=3", "--set", "train.steps=200",
            "--set", "data.test_size=2000"]
    pure = ["--set", "model.forward=moments", "--set", "data.sampler=jax"]

    def run(devices: int, *more: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
        return subprocess.run([sys.executable, "-m", "icldyn.cli", "run", "quickstart", "--quick", "--json", "--out",
                               str(tmp_path), *sets, *more], capture_output=True, text=True, env=env)

    loss = lambda s: np.array([x["final"]["test_loss"] for x in s["points"][0]["seeds"]])  # noqa: E731
    for path in (pure, ["--set", "model.forward=kernel", "--set", "data.sampler=kernel"]):
        one, two = (json.loads(run(n, *path).stdout) for n in (1, 2))
        assert one["execution"]["devices"] == 1 and two["execution"]["devices"] == 2
        assert two["execution"]["forward"] == path[1].split("=")[1]
        assert len(loss(two)) == 3 and np.max(np.abs(loss(two) / loss(one) - 1)) <= 1e-6, (loss(one), loss(two))
    bad = run(2, *pure, "--set", "train.devices=3")
    assert bad.returncode == 2 and bad.stderr.startswith("error: train.devices = 3 is not allowed"), bad.stderr


@pytest.mark.e2e
def test_gpu_script_on_a_cpu_says_so_and_exits_0(tmp_path):
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OUT": str(tmp_path), "ICLDYN_PYTHON": sys.executable}
    # the quick recipe shortened by overrides (2 500 steps and 50 000 held-out prompts: 37 s; this: 14 s)
    over = ["train.steps=200", "data.test_size=2000"]
    res = subprocess.run(["bash", str(root / "benchmarks" / "gpu.sh"), "--set", over[0], "--set", over[1]],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "No GPU found" in res.stdout
    got = json.loads((tmp_path / "gpu.json").read_text())
    losses = got["rows"]["quickstart --quick float64, CPU: final test_loss"].split(",")
    assert got["backend"] == "cpu" and len(losses) == 4 and got["overrides"] == over  # 2 points × 2 seeds
    (run,) = (tmp_path / "runs").iterdir()
    assert tomllib.loads((run / "config.toml").read_text())["train"]["steps"] == 200
    md = (tmp_path / "gpu.md").read_text()
    assert "No GPU found" in md and "`train.steps=200`" in md
