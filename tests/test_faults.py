"""One damaged file never takes the store down (issue 30): each fault is injected into a copy of one small finished
store (three runs: one trained, two copies under their own ids) and every command answers in one line, the other
runs untouched; checkpoints, the kernel cache, figures, queries, rich output and numbers are each held to theirs."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import TINY, TINY_SETS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import icldyn
from icldyn.cli import app
from icldyn.plugins import get
from icldyn.runner import RunCrashed, RunInterrupted, execute
from icldyn.store import RunDamaged, RunDir, list_runs, query, write_json, write_manifest

CFG = {**TINY, "train": {**TINY["train"], "checkpoint_every": 0}}  # TINY's numbers, a checkpoint after every chunk


def _copy_as(src: Path, dst: Path) -> None:
    """A finished run under another id: its rows, summary and manifest rewritten for the new id."""
    shutil.copytree(src, dst)
    t = pq.read_table(dst / "metrics.parquet")
    t = t.set_column(0, "run_id", pa.array([dst.name] * len(t)))
    pq.write_table(t, dst / "metrics.parquet")
    s = json.loads((dst / "summary.json").read_text())
    write_json(dst / "summary.json", {**s, "run_id": dst.name})
    write_manifest(dst)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, tiny_store):
    """A three-run store of finished TINY quickstarts (the suite's shared one, copied under three ids) and a sound
    sweep record over them."""
    root = tmp_path_factory.mktemp("faults") / "store"
    [src] = [p for p in tiny_store.iterdir() if p.is_dir() and (p / "summary.json").is_file()]
    for tag in ("aaaaaa", "bbbbbb", "cccccc"):
        _copy_as(src, root / src.name.replace(src.name[-6:], tag))
    runs = sorted(p.name for p in root.iterdir())
    (root / "sweeps").mkdir()
    write_json(root / "sweeps" / "20261202-000000-quickstart-abcdef.json", {
        "sweep_id": "20261202-000000-quickstart-abcdef", "target": {"experiment": "quickstart"}, "quick": False,
        "axes": {"train.lr": [0.01, 0.02, 0.03]}, "recipe_grid": False, "group": True,
        "points": [{"overrides": {"train.lr": lr}, "run_id": r, "status": "finished"}
                   for lr, r in zip((0.01, 0.02, 0.03), runs)]})
    return root


@pytest.fixture
def store(pristine, tmp_path):
    root = tmp_path / "store"
    shutil.copytree(pristine, root, symlinks=True)
    return root


def _digest(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _one_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    return lines[0]


def _runs(store: Path) -> list[Path]:
    return sorted(p for p in store.iterdir() if p.name != "sweeps")


def _flip(path: Path, at: float = 0.5) -> None:
    b = bytearray(path.read_bytes())
    b[int(len(b) * at)] ^= 0xFF
    path.write_bytes(bytes(b))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def _set_json(path: Path, **kv) -> None:
    path.write_text(json.dumps({**json.loads(path.read_text()), **kv}))


def _symlink_outside(run: Path) -> None:
    outside = run.parent.parent / "outside"
    shutil.copytree(run, outside / run.name)
    shutil.rmtree(run)
    run.symlink_to(outside / run.name, target_is_directory=True)


DAMAGE = {  # issue 30's list: (what to do to the run directory, the file named)
    "truncated metrics.parquet": (lambda d: _truncate(d / "metrics.parquet"), "metrics.parquet"),
    "bit-flipped metrics.parquet": (lambda d: _flip(d / "metrics.parquet"), "metrics.parquet"),
    "deleted metrics.parquet": (lambda d: (d / "metrics.parquet").unlink(), "metrics.parquet"),
    "deleted params.npz": (lambda d: (d / "params.npz").unlink(), "params.npz"),
    "truncated summary.json": (lambda d: _truncate(d / "summary.json"), "summary.json"),
    "empty summary.json": (lambda d: (d / "summary.json").write_text(""), "summary.json"),
    "summary.json a list": (lambda d: (d / "summary.json").write_text("[]"), "summary.json"),
    "summary.json wall_s 'abc'": (lambda d: _set_json(d / "summary.json", wall_s="abc"), "summary.json"),
    "deleted manifest.json": (lambda d: (d / "manifest.json").unlink(), "manifest.json"),
    "run directory a symlink outside the store": (_symlink_outside, "symlink"),
}


@pytest.mark.parametrize("how", list(DAMAGE))
def test_one_damaged_run_of_three_is_named_and_the_other_two_answer(store, pristine, how):
    damage, named = DAMAGE[how]
    _, full = query(pristine, "SELECT count(*) FROM finals")
    bad, *good = _runs(store)
    untouched = {g.name: _digest(g) for g in good}
    damage(bad)

    res = _cli("runs", "--out", store)
    assert res.exit_code == 0, res.output
    assert all(p.name in res.stdout for p in _runs(store)) and res.stdout.count("damaged: ") == 1
    assert named in next(line for line in res.stdout.splitlines() if bad.name in line)
    rows = icldyn.runs(store)
    assert len(rows) == 3 and list(rows.status).count("damaged") == 1 and named in rows.damage.dropna().iloc[0]

    res = _cli("query", "SELECT count(*) AS n FROM finals", "--json", "--out", store)
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"n": full[0][0] * 2 // 3}], res.output
    assert bad.name in _one_line(res) and "damaged" in res.stderr
    res = _cli("query", "SELECT count(*) AS n FROM runs", "--json", "--out", store)
    assert json.loads(res.stdout) == [{"n": 2}]

    res = _cli("show", bad.name, "--out", store)
    assert res.exit_code == 1 and named in _one_line(res)
    with pytest.raises(RunDamaged, match=named):
        icldyn.load(bad.name, store=store)
    res = _cli("run", "--resume", bad, "--out", store)
    assert res.exit_code == 2 and ("damaged" in _one_line(res) or "symlink" in _one_line(res))
    res = _cli("check", "--out", store)
    assert res.exit_code == 1 and f"damaged: run {bad.name}: " in res.stdout and "3 of 4 checked" in res.stdout
    assert _cli("check", good[0].name, "--out", store).exit_code == 0
    assert {g.name: _digest(g) for g in good} == untouched
    assert icldyn.load(good[0].name, store=store).metrics.equals(icldyn.load(good[0].name, store=pristine).metrics)


def test_a_run_read_without_load_never_returns_a_missing_file_as_empty(store):
    run = _runs(store)[0]
    (run / "params.npz").unlink()
    (run / "metrics.parquet").unlink()
    for attr, named in (("params", "params.npz"), ("metrics", "metrics.parquet")):
        with pytest.raises(RunDamaged, match=named):
            getattr(icldyn.Run(run), attr)


def test_a_truncated_sweep_record_breaks_no_command(store):
    record = store / "sweeps" / "20261202-000000-quickstart-abcdef.json"
    _truncate(record)
    res = _cli("sweeps", "--out", store)
    assert res.exit_code == 0 and "damaged: sweeps/" in res.stdout, res.output
    for args in (["show", record.stem], ["sweep", "--resume", record.stem]):
        res = _cli(*args, "--out", store)
        assert res.exit_code == 2 and f"sweep {record.stem} is damaged: sweeps/{record.name}" in _one_line(res)
    res = _cli("query", "SELECT count(*) AS n FROM sweeps", "--json", "--out", store)
    assert res.exit_code == 0 and json.loads(res.stdout) == [{"n": 0}] and record.stem in _one_line(res)
    res = _cli("query", "SELECT count(*) AS n FROM runs", "--json", "--out", store)
    assert json.loads(res.stdout) == [{"n": 3}]
    res = _cli("check", "--out", store)
    assert res.exit_code == 1 and "3 of 4 checked" in res.stdout


def _interrupted(root: Path, job: int, step: int) -> RunDir:
    """A TINY run stopped (Ctrl-C) while logging ``step`` of its ``job``-th training (one per grid point)."""
    class Stop:
        started = 0

        def start(self, description, total):
            self.started += 1
            n = self.started

            def tick(s, metrics):
                if n == job and s >= step:
                    raise KeyboardInterrupt
            return tick

    with pytest.raises(RunInterrupted) as err:
        execute(get("quickstart").config(CFG), root, Stop())
    return err.value.rds[0]


def _numbers(run: Path):
    keys = ["point", "seed", "step", "metric"]
    rows = pq.read_table(run / "metrics.parquet").to_pandas().drop(columns="run_id")
    with np.load(run / "params.npz", allow_pickle=False) as z:
        return rows.sort_values(keys).reset_index(drop=True), {k: z[k] for k in z.files}


@pytest.mark.e2e
def test_damaged_checkpoints_resume_from_the_previous_one_or_restart_to_the_uninterrupted_numbers(pristine, tmp_path,
                                                                                               capfd):
    """Interrupted in its second point. The first point's final checkpoint bit-flipped: that point resumes from the
    checkpoint before it (step 20) and trains again to step 40. The second point's only checkpoint truncated: it
    restarts from step 0. Each is said in one line; the run ends with the numbers of the uninterrupted run."""
    rd = _interrupted(tmp_path, job=2, step=40)
    first, second = rd._checkpoints("model.layers=1"), rd._checkpoints("model.layers=3")
    assert all(p.is_file() for p in first) and second[0].is_file() and not second[1].exists()
    _flip(first[0])
    _truncate(second[0])
    res = _cli("check", rd.path, "--out", tmp_path)
    assert res.exit_code == 1 and res.stdout.count(": checkpoint/") == 2, res.output
    capfd.readouterr()
    resumed, _ = execute(get("quickstart").config(CFG), tmp_path, resume=RunDir.open(rd.path))
    said = [x for x in capfd.readouterr().err.splitlines() if "checkpoint" in x]
    assert len(said) == 2 and said[0].startswith(f"run {rd.run_id}: checkpoint checkpoint/{first[0].name} (")
    assert said[0].endswith(f"is damaged; resuming from the previous one, checkpoint/{first[1].name}")
    assert said[1].startswith(f"run {rd.run_id}: checkpoint checkpoint/{second[0].name} (")
    assert said[1].endswith("damaged, no good checkpoint left; point 'model.layers=3' restarts from step 0")
    (rows, params), (ref_rows, ref_params) = _numbers(resumed.path), _numbers(_runs(pristine)[0])
    assert rows.equals(ref_rows)
    assert params.keys() == ref_params.keys() and all(np.array_equal(params[k], ref_params[k]) for k in params)


@pytest.mark.parametrize("damage, why", [
    ("flip", "unreadable (BadZipFile"), ("empty", "unreadable (EOFError"),
    ("no hash", "no hash saved with it (not a checkpoint icldyn wrote)"),
    ("another point's", "its arrays do not match the hash saved with them (changed, or another point's)")])
def test_a_checkpoint_failing_its_checksum_is_named_once_and_the_previous_or_a_restart_taken(tmp_path, capfd, damage,
                                                                                          why):
    """Point A checkpointed at steps 1 and 2, point B once; A's latest damaged — bit-flipped, emptied, replaced by an
    .npz without a hash, or by B's sound checkpoint — is named in one line and A resumes from step 1; both of A's
    damaged, A restarts (None, its flushed rows cleared), said in one line. Never the damaged file again."""
    rd = RunDir.create(tmp_path, "quickstart")
    step = lambda k: {"w": np.arange(6.0).reshape(2, 3) * k, "done": np.asarray(k)}
    for k in (1, 2):
        rd.save_checkpoint("A", step(k))
    rd.save_checkpoint("B", step(7))
    rd.write_metrics_part("A", 2, {"run_id": [rd.run_id], "point": ["A"], "seed": [0], "step": [2],
                                   "metric": ["loss"], "value": [1.0]})
    (latest, prev), (b, _) = rd._checkpoints("A"), rd._checkpoints("B")
    hurt = {"flip": lambda p: _flip(p, 0.3), "empty": lambda p: p.write_bytes(b""),
            "no hash": lambda p: np.savez(p, **step(2)), "another point's": lambda p: shutil.copy(b, p)}[damage]
    hurt(latest)
    capfd.readouterr()
    got = rd.load_checkpoint("A")
    assert got.keys() == step(1).keys() and all(np.array_equal(got[k], v) for k, v in step(1).items())
    [line] = capfd.readouterr().err.splitlines()
    assert line.startswith(f"run {rd.run_id}: checkpoint checkpoint/{latest.name} ({why}") and line.endswith(
        f"is damaged; resuming from the previous one, checkpoint/{prev.name}"), line
    hurt(prev)
    assert rd.load_checkpoint("A") is None and not list((rd.path / "metrics.parts").iterdir())
    [line] = capfd.readouterr().err.splitlines()
    assert line.endswith("damaged, no good checkpoint left; point 'A' restarts from step 0") and why in line, line
    assert rd.load_checkpoint("B")["done"] == 7


@pytest.fixture
def private_kernel_cache(tmp_path, monkeypatch):
    """The kernel for D = 6 built into a cache of this test's own (the user's cache may be shared with other
    processes), and this process's kernel state restored afterwards."""
    from icldyn.components import lsa_kernel as kernel

    cache = tmp_path / "kernels"
    monkeypatch.setenv("ICLDYN_KERNEL_CACHE", str(cache))
    kernel._build.cache_clear()
    yield kernel.status(6)
    monkeypatch.delenv("ICLDYN_KERNEL_CACHE")
    kernel._build.cache_clear()


@pytest.mark.e2e
def test_a_truncated_kernel_library_is_detected_rebuilt_and_the_run_finishes(tmp_path, private_kernel_cache):
    if not private_kernel_cache.available:
        pytest.skip("no C compiler: no kernel library to damage")
    lib = Path(private_kernel_cache.library)
    size = lib.stat().st_size
    assert lib.with_name(lib.name + ".sha256").read_text().split() == [str(size), hashlib.sha256(
        lib.read_bytes()).hexdigest()]
    lib.write_bytes(lib.read_bytes()[:4096])  # a valid ELF header, the rest gone: dlopen maps it, calls SIGBUS
    res = subprocess.run([sys.executable, "-m", "icldyn.cli", "run", "quickstart", "--json", "--out",
                          tmp_path / "store", *TINY_SETS], capture_output=True, text=True, env=dict(os.environ),
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    ex = json.loads(res.stdout)["execution"]
    assert (ex["forward"], ex["kernel"]["origin"], ex["kernel"]["library"]) == ("kernel", "built", str(lib))
    assert lib.stat().st_size == size and "fails its size/SHA-256 check" in Path(ex["kernel"]["log"]).read_text()


def test_a_query_without_end_stops_at_its_time_limit_and_the_temp_folder_is_not_readable(pristine, tmp_path,
                                                                                       monkeypatch):
    res = _cli("query", "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
               "--timeout", "1", "--out", pristine)
    assert res.exit_code == 2 and "time limit (1 s" in _one_line(res)
    res = _cli("query", "SELECT list(i) FROM range(400000000) t(i)", "--memory", "100MB", "--out", pristine)
    assert res.exit_code == 2 and "memory limit (100MB" in _one_line(res)
    res = _cli("query", "SELECT 1", "--memory", "lots", "--out", pristine)
    assert res.exit_code == 2 and "memory limit 'lots'" in _one_line(res)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "planted.txt").write_text("secret")
    for sql in ("SELECT * FROM read_text('.tmp/planted.txt')", f"SELECT * FROM read_text('{tmp_path}/.tmp/*')",
                "SELECT * FROM glob('.tmp/*')"):
        res = _cli("query", sql, "--out", pristine)
        assert res.exit_code == 2 and "secret" not in res.output and "planted" not in res.stdout, res.output
        _one_line(res)


def test_data_is_never_read_as_markup(pristine, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short relative store path: table rows are not wrapped
    root = Path("st[/x]ore [bold]")
    run = _runs(pristine)[0]
    shutil.copytree(run, root / run.name)
    for f in ("summary.json", "manifest.json", "report.md"):  # unfinished: its row carries the resume path
        (root / run.name / f).unlink()
    res = _cli("runs", "--out", root)
    assert res.exit_code == 0 and f"icldyn run --resume {root / run.name}" in res.stdout.replace("\n", ""), res.output
    res = _cli("query", "SELECT '[/x]' AS a, '[bold red]hi[/bold red]' AS b, path FROM runs", "--out", root)
    assert res.exit_code == 0 and "[/x]" in res.stdout and "[bold red]hi[/bold red]" in res.stdout, res.output
    res = _cli("show", run.name, "--out", root)
    assert res.exit_code == 2 and str(root / run.name) in _one_line(res)


@pytest.mark.parametrize("sets", [["data.eigenvalues=[1,nan,1,1,1]"], ["data.eigenvalues=[1,inf,1,1,1]"],
                                  ["data.eigenvalues=[1,1e-300,1,1,1]"], ["train.lr=inf"], ["train.lr=1e400"],
                                  ["train.lr=nan"], ["train.steps=true"], ["train.steps=9223372036854775808"],
                                  ["seeds=true"], ["data.eigenvalues=[1,true,1,1,1]"]])
def test_a_non_finite_or_coerced_number_exits_2_in_one_line_and_writes_nothing(tmp_path, sets):
    res = _cli("run", "quickstart", "--out", tmp_path / "store", *[x for s in sets for x in ("--set", s)])
    key = sets[0].split("=")[0]
    assert res.exit_code == 2 and key in _one_line(res)
    assert not (tmp_path / "store").exists()


def test_a_toml_file_too_deep_or_not_utf8_exits_2_in_one_line(tmp_path):
    deep, bad = tmp_path / "deep.toml", tmp_path / "bad.toml"
    deep.write_text("a = " + "[" * 2000 + "]" * 2000 + "\n")
    bad.write_bytes(b"seeds = 2\n\xff\xfe = 1\n")
    for path, says in ((deep, "nested more than 32 levels"), (bad, "not UTF-8 text (byte 0xff at offset 10)")):
        res = _cli("run", path, "--out", tmp_path / "store")
        assert res.exit_code == 2 and says in _one_line(res)
    res = _cli("run", "quickstart", "--set", "data.n=" + "[" * 3000 + "]" * 3000, "--out", tmp_path / "store")
    assert res.exit_code == 2 and "nested more than 32 levels" in _one_line(res)
    assert not (tmp_path / "store").exists()


def _attention_problem(seed_map: str):
    """A problem whose one matrix product is a (B, N, N) score array: the activations dominate the state."""
    import jax
    import jax.numpy as jnp

    from icldyn.train.loop import Problem

    def loss(p, Z):
        return jnp.mean(jnp.einsum("bki,kl,blj->bij", Z, p["W"], Z) ** 2)

    return Problem(init=lambda task, key: {"W": jax.random.normal(key, (3, 3), jnp.float32)},
                   sample=lambda task, key: jax.random.normal(key, (8, 3, 50), jnp.float32), loss=loss,
                   evaluate=lambda p, task, test: {"test_loss": loss(p, test)}, seed_map=seed_map)


@pytest.mark.parametrize("seed_map, at_once", [("vmap", 6), ("map", 2)])
def test_the_memory_estimate_counts_the_largest_activation_and_refuses_in_one_line_with_the_numbers(
        monkeypatch, seed_map, at_once):
    """3 seeds × 2 learning rates, batch 8 of 3 × 50 prompt matrices: the estimate is, in bytes, the state twice
    (W 3·3·4 per slot, the batch 8·3·50·4, key 2·4 and step 4 per seed), the tasks and held-out sets, and the
    (8, 50, 50) float32 scores of every slot computing at once — all six vmapped, a seed's two rates lax.map-ed."""
    import jax
    import jax.numpy as jnp
    import optax

    from icldyn import runtime
    from icldyn.runtime import TooBig
    from icldyn.train.loop import footprint, train

    problem, opt = _attention_problem(seed_map), optax.sgd(0.1)
    tasks, tests, keys = jnp.zeros((3, 1), jnp.float32), jnp.ones((3, 4, 3, 50), jnp.float32), jax.random.split(
        jax.random.PRNGKey(0), 3)
    f = footprint(problem, opt, tasks, tests, keys, copies=2)
    state, data, activations = 2 * (2 * 3 * 36 + 3 * (4800 + 8 + 4)), 3 * 4 + 3 * 2400, at_once * 8 * 50 * 50 * 4
    assert (f["state"], f["data"], f["activations"], f["largest"], f["at_once"]) == (
        state, data, activations, "float32[8,50,50]", at_once)
    assert f["total"] == state + data + activations
    monkeypatch.setattr(runtime, "available_memory", lambda: state + data + activations - 1)  # all but the last byte
    with pytest.raises(TooBig) as err:
        train(problem, opt, tasks, tests, keys, steps=2, log_every=1, lrs=[0.1, 0.2])
    gib = lambda b: f"{b / 2**30:.3g} GiB"
    assert str(err.value) == (
        f"training 6 slot(s) (state {gib(state)}, tasks and held-out sets {gib(data)}, activations "
        f"{gib(activations)}: {at_once} × float32[8,50,50]) needs at least {gib(f['total'])}, and this machine has "
        f"{gib(f['total'] - 1)} available; lower train.batch, data.n, data.test_size or seeds (or train on a larger "
        "machine)")


def test_a_run_whose_attention_scores_cannot_fit_is_refused_in_one_line_before_compiling(tmp_path):
    """ahn-relu's column form at n = 20 000: a batch of 64 prompts is 61 MiB, its (64, 20001, 20001) float32
    scores 95 GiB — against this machine's real memory (no stub), refused with the numbers before anything compiles,
    exit 2, the fresh run directory removed (before: XLA, or the C kernel, killed the process)."""
    res = _cli("run", "ahn-relu", "--quick", "--set", "model.forward=columns", "--set", "data.n=20000",
               "--set", "data.test_size=16", "--set", "train.batch=64", "--set", "train.steps=2", "--out",
               tmp_path / "store")
    line = _one_line(res)
    assert res.exit_code == 2 and "activations 95.4 GiB: 1 × float32[64,20001,20001,1]) needs at least 95.4 GiB" in line
    assert "GiB available; lower train.batch" in line and list((tmp_path / "store").iterdir()) == []


def _under_address_limit(extra_gib: float, *args: str, store: Path) -> subprocess.CompletedProcess:
    """``icldyn ARGS`` in a subprocess whose address space (``ulimit -v``) is what a fresh JAX process maps plus
    ``extra_gib`` (measured first, so the margin is the same on every machine)."""
    probe = subprocess.run([sys.executable, "-c", "import icldyn.cli, jax; jax.numpy.zeros(1).block_until_ready(); "
                            "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmSize:')))"],
                           capture_output=True, text=True, check=True)
    limit = int(probe.stdout.split()[-1]) + int(extra_gib * 2**20)  # KiB
    cmd = " ".join([f"ulimit -v {limit};", sys.executable, "-m", "icldyn.cli", *args, "--out", str(store)])
    # glibc's per-thread malloc arenas (64 MiB of address space each) would make the margin depend on the core count
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                          env={**os.environ, "MALLOC_ARENA_MAX": "2", "PYTHONWARNINGS": "ignore"})


@pytest.mark.e2e
def test_memory_the_held_out_sets_and_xla_out_of_memory_are_one_line_each_under_ulimit(tmp_path):
    """Under an address-space limit (``ulimit -v``: what the CLI maps plus 1.5 GiB): held-out sets of 4.7 GiB are
    refused before any work with the estimate and the limit; sets of 0.84 GiB fit the estimate, and XLA's own
    allocation failure during the run (1.1 GB more) is one line too. Both exit 2 and leave no run directory."""
    big = _under_address_limit(1.5, "run", "quickstart", "--quick", "--set", "data.test_size=5000000",
                               store=tmp_path / "a")
    assert big.returncode == 2 and big.stderr.count("\n") == 1, big.stderr[-2000:]
    assert big.stderr.startswith("error: drawing the held-out sets (1 seed(s) × 2 × data.test_size prompts of "
                                 "data.n + 1 points; grid point model.layers=3) needs at least 4.69 GiB, and this "
                                 "machine has ")
    assert "GiB available; lower data.test_size, data.n or seeds" in big.stderr and not (tmp_path / "a").exists()
    xla = _under_address_limit(1.5, "run", "quickstart", "--quick", "--set", "data.test_size=900000",
                               store=tmp_path / "b")
    assert xla.returncode == 2 and xla.stderr.count("\n") == 1, xla.stderr[-2000:]
    assert xla.stderr.startswith("error: the program does not fit in memory (") and "Traceback" not in xla.stderr
    assert "lower train.batch, data.n, data.test_size or seeds" in xla.stderr
    assert not (tmp_path / "b").exists() or list((tmp_path / "b").iterdir()) == []


@pytest.mark.e2e
def test_a_figure_that_cannot_be_written_is_a_crash_with_crash_json_and_no_partial_file(tmp_path, monkeypatch):
    from icldyn import store as store_mod

    def full_disk(path, write):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_mod, "atomic_write", full_disk)
    with pytest.raises(RunCrashed) as err:
        execute(get("quickstart").config(CFG), tmp_path)
    run = err.value.rds[0].path
    assert "No space left on device" in json.loads((run / "crash.json").read_text())["error"]
    assert list((run / "figures").iterdir()) == [] and [r["status"] for r in list_runs(tmp_path)] == ["crashed"]


_CLI_CALLS = """import json, sys
from typer.testing import CliRunner
from icldyn.cli import app
print(json.dumps([(r.exit_code, r.stderr, r.stdout) for r in (CliRunner().invoke(app, a) for a in json.loads(sys.argv[1]))]))
"""


def _as_read_only(root: Path, calls: list[list[str]]) -> tuple[str, list]:
    """CLI ``calls`` in one fresh process to which ``root`` is truly unwritable: a read-only bind mount in a private
    mount namespace (``unshare -rm``, root or not), else, for a user other than root (whom permissions do not stop),
    every file and folder under it without write permission. Returns the reason the system gives and each call's
    (exit code, stderr, stdout)."""
    cmd = [sys.executable, "-c", _CLI_CALLS, json.dumps(calls)]
    if shutil.which("unshare") and subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False).returncode == 0:
        mount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
        res = subprocess.run(["unshare", "-rm", "sh", "-c", mount, root, *cmd], capture_output=True, text=True,
                             timeout=300, check=False)
        return "Read-only file system", json.loads(res.stdout or "null") or pytest.fail(res.stderr[-2000:])
    if os.geteuid() == 0:
        pytest.skip("no mount namespace (unshare -rm) here, and root ignores permissions: nothing is unwritable")
    paths = [root, *root.rglob("*")]
    for p in paths:
        p.chmod(p.stat().st_mode & ~0o222)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    finally:
        for p in paths:
            p.chmod(p.stat().st_mode | 0o200)
    return "Permission denied", json.loads(res.stdout or "null") or pytest.fail(res.stderr[-2000:])


def test_an_unwritable_store_is_one_line_naming_it_and_is_still_read(pristine, tmp_path):
    """A store that refuses writes (a read-only file system): a new run, a resumed run, a new and a resumed sweep are
    each one line naming the store (or run directory), exit 2, nothing written; listing and querying it still work."""
    root = tmp_path / "store"
    shutil.copytree(pristine, root, symlinks=True)
    run = _runs(root)[0]
    for f in ("summary.json", "manifest.json", "report.md"):  # interrupted: resumable
        (run / f).unlink()
    sweep_id = next(root.glob("sweeps/*.json")).stem
    before, (_, [(n,)]) = _digest(root), query(root, "SELECT count(*) FROM finals")
    why, out = _as_read_only(root, [
        ["run", "quickstart", "--out", str(root), *TINY_SETS], ["run", "--resume", str(run)],
        ["sweep", "quickstart", "--grid", "train.lr=0.01,0.02", "--out", str(root), *TINY_SETS],
        ["sweep", "--resume", sweep_id, "--out", str(root)],
        ["runs", "--out", str(root)], ["query", "SELECT count(*) AS n FROM finals", "--json", "--out", str(root)]])
    said = [err.strip() for _, err, _ in out[:4]]
    assert [code for code, _, _ in out[:4]] == [2, 2, 2, 2] and all("\n" not in x for x in said), said
    assert said[0].startswith(f"error: store {str(root)!r} cannot be written ({why}: {root}/"), said[0]
    assert said[1] == f"error: --resume {str(run)!r}: the run directory cannot be written ({why}: {run}/.lock)"
    assert all(x.startswith(f"error: store {str(root)!r} cannot be written ({why}: {root}/sweeps/") for x in said[2:])
    (code, _, listing), (qcode, _, rows) = out[4:]
    assert code == 0 and listing.count("finished") == 2 and "interrupted" in listing, listing
    assert qcode == 0 and json.loads(rows) == [{"n": n}] and n == 3 * 2 * 2 * 10, rows  # runs, points, seeds, metrics
    assert _digest(root) == before


def test_crash_json_marks_a_run_even_when_the_disk_is_full(tmp_path, monkeypatch):
    from icldyn import store as store_mod

    rd = RunDir.create(tmp_path, "quickstart")
    rd.write_config(get("quickstart").config(CFG))
    rd.release()
    monkeypatch.setattr(store_mod, "write_json", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    rd.mark_crashed(OSError(28, "No space left on device"))
    assert (rd.path / "crash.json").is_file() and [r["status"] for r in list_runs(tmp_path)] == ["crashed"]


def test_figures_are_written_atomically(tmp_path):
    import matplotlib.pyplot as plt

    from icldyn import plots

    class Rd:
        def figure(self, name):
            return tmp_path / f"{name}.png"

    fig, ax = plt.subplots()
    ax.plot([0, 1])
    assert plots.save(fig, Rd(), "f") == "figures/f.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]  # no temporary file left
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG" and (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"


KINDS = ("truncate", "delete", "flip", "wrong json")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_drawn_damage_to_any_file_is_answered_in_one_line_and_touches_no_other_run(pristine, tmp_path, data):
    """Any file of one run truncated, deleted, bit-flipped or replaced by JSON of the wrong shape: `runs`, `query`,
    `show`, `load` and `--resume` each answer (a table, or one line), and the other two runs read as before."""
    store = Path(tempfile.mkdtemp(dir=tmp_path)) / "store"
    shutil.copytree(pristine, store)
    bad, *good = _runs(store)
    files = sorted(str(p.relative_to(bad)) for p in bad.rglob("*") if p.is_file() and p.name != ".lock")
    rel, kind = data.draw(st.sampled_from(files)), data.draw(st.sampled_from(KINDS))
    before = {g.name: _digest(g) for g in good}
    target = bad / rel
    if kind == "truncate":
        _truncate(target)
    elif kind == "delete":
        target.unlink()
    elif kind == "flip":
        _flip(target, data.draw(st.floats(0, 0.999)))
    else:
        target.write_text(data.draw(st.sampled_from(["[]", '"x"', "null", '{"status": 3}', "{}"])))

    res = _cli("runs", "--out", store)
    assert res.exit_code == 0 and all(p.name in res.stdout for p in _runs(store)), res.output
    res = _cli("query", "SELECT DISTINCT run_id FROM finals ORDER BY run_id", "--json", "--out", store)
    assert res.exit_code == 0, res.output
    assert {g.name for g in good} <= {r["run_id"] for r in json.loads(res.stdout)}
    assert len(res.stderr.strip().splitlines()) <= 1
    res = _cli("show", bad.name, "--out", store)
    assert res.exit_code == 0 or _one_line(res)
    try:
        icldyn.load(bad.name, store=store)
    except RunDamaged as err:
        assert bad.name in str(err) and "\n" not in str(err)
    res = _cli("run", "--resume", bad, "--out", store)
    assert res.exit_code == 2 and _one_line(res)
    assert {g.name: _digest(g) for g in good} == before
    damaged = _cli("check", bad.name, "--out", store)
    assert damaged.exit_code == 1 and (rel in damaged.stdout or "manifest.json" in damaged.stdout), damaged.output
