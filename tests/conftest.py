import pytest

from icldyn.runtime import setup_jax

setup_jax()  # float64 available, persistent compilation cache shared with the CLI


# The longest tests (each 15-150 s on the 2-core CI machine; longest first), started first on every worker. In
# collection order the verify tests came last, and one worker ran the last of them alone while the other had nothing
# left to take.
# pytest-xdist's worksteal sends each worker a contiguous share of this list first (then idle workers steal from the
# ends of busy ones' queues), so the long tests are dealt round-robin to the fronts of the shares; every other test
# keeps its collection order. A name not found here just keeps its place.
LONGEST = ("test_verify_ahn.py::test_every_claim_passes", "test_goel.py::test_verify_goel",
           "test_python_api.py::test_the_documented_example", "test_garg.py::test_verify_quick",
           "test_reliability.py::test_two_devices", "test_plugins.py::test_the_documented_plugin",
           "test_install.py::test_no_compiler", "test_reliability.py::test_kill_9", "test_install.py::test_wheel",
           "test_goel_sweeps.py::test_conditioning_grid", "test_sweep.py::test_a_two_node_ray_cluster",
           "test_faults.py::test_memory", "test_linattn.py::test_verify_runs",
           "test_recipes_honour.py::test_every_core_field_is_honoured_or_refused[linattn-noise]",
           "test_faults.py::test_a_truncated_kernel_library", "test_sweep.py::test_killed_sweep_resumed",
           "test_crossover.py::")


def _rank(item) -> int | None:
    return next((i for i, key in enumerate(LONGEST) if key in item.nodeid), None)


def pytest_collection_modifyitems(config, items):
    longest = sorted((item for item in items if _rank(item) is not None), key=_rank)
    rest = [item for item in items if _rank(item) is None]
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    shares, left = [], len(items)
    for w in range(workers):  # worksteal's first split: len(pending) // workers still to serve, in worker order
        size = left // (workers - w)
        share = longest[w::workers]
        shares.append(share + [rest.pop(0) for _ in range(max(0, size - len(share))) if rest])
        left -= size
    items[:] = [item for share in shares for item in share] + rest


@pytest.fixture(scope="session")
def session_store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


# `icldyn verify --paper P --quick`, run once per worker process (session scope). The suite spreads single tests
# over its workers (pytest-xdist, --dist worksteal): one test per paper reads it, so each paper's runs once
@pytest.fixture(scope="session")
def verify_claims(session_store):
    from icldyn import claims as verify

    cache: dict[str, list] = {}

    def claims(paper: str) -> list:
        if paper not in cache:
            cache[paper] = verify.verify(paper, quick=True, store=session_store)
        return cache[paper]

    return claims


def assert_claims(claims, needles):
    """Every claim passed, and the claims cover what the issue lists (a needle in some claim's name)."""
    failed = [f"{c.claim}: theory {c.theory}, measured {c.measured}, tol {c.tolerance}" for c in claims
              if not c.passed]
    assert not failed, failed
    names = " | ".join(c.claim for c in claims)
    missing = [n for n in needles if n not in names]
    assert not missing, missing


# The suite's smallest quickstart (2 seeds, 40 steps, batch 64, 256 held-out prompts): one CLI run for the suite, shared
# by the tests that only read a finished run (tests/test_cli.py checks the run-directory contract on it).
TINY = {"seeds": 2, "train": {"steps": 40, "log_every": 20, "batch": 64}, "data": {"test_size": 256}}
TINY_SETS = ["--set", "train.steps=40", "--set", "train.log_every=20", "--set", "train.batch=64",
             "--set", "data.test_size=256", "--set", "seeds=2"]


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory, worker_id):
    """The store of that run, made once for the whole suite: under pytest-xdist in the workers' shared temporary
    folder by the first worker to ask (an flock; the others wait, then read it: the tests only read it or copy it)."""
    import fcntl

    from typer.testing import CliRunner

    from icldyn.cli import app

    if worker_id == "master":
        base = tmp_path_factory.mktemp("tiny-store")
    else:
        base = tmp_path_factory.getbasetemp().parent  # shared by the workers of this session
    root, failed = base / "tiny", base / "tiny.failed"
    with open(base / "tiny.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if failed.is_file():  # not run again into the same store: the first worker's output, once more
            pytest.fail(f"the suite's tiny quickstart failed in another worker:\n{failed.read_text()}")
        if not (base / "tiny.done").is_file():
            res = CliRunner().invoke(app, ["run", "quickstart", "--out", str(root), *TINY_SETS])
            if res.exit_code != 0:
                failed.write_text(res.output)
            assert res.exit_code == 0, res.output
            (base / "tiny.done").touch()
    return root
