import pytest

from icldyn.runtime import setup_jax

setup_jax()  # float64 available, persistent compilation cache shared with the CLI


@pytest.fixture(scope="session")
def session_store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")


def assert_claims(claims, needles):
    """Every claim passed, and the claims cover what the issue lists (a needle in some claim's name)."""
    failed = [f"{c.claim}: theory {c.theory}, measured {c.measured}, tol {c.tolerance}" for c in claims
              if not c.passed]
    assert not failed, failed
    names = " | ".join(c.claim for c in claims)
    missing = [n for n in needles if n not in names]
    assert not missing, missing
