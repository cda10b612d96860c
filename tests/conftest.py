import pytest

from icldyn.runtime import setup_jax

setup_jax()  # float64 available, persistent compilation cache shared with the CLI


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


# The suite's smallest quickstart (2 seeds, 40 steps, batch 64, 256 held-out prompts): one run per worker, shared by
# the tests that only read a finished run, and the reference the reproducibility test reruns against.
TINY = {"seeds": 2, "train": {"steps": 40, "log_every": 20, "batch": 64}, "data": {"test_size": 256}}
TINY_SETS = ["--set", "train.steps=40", "--set", "train.log_every=20", "--set", "train.batch=64",
             "--set", "data.test_size=256", "--set", "seeds=2"]


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory):
    from icldyn.plugins import get
    from icldyn.runner import execute

    root = tmp_path_factory.mktemp("tiny")
    execute(get("quickstart").config(TINY), root)
    return root
