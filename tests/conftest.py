import pytest

from icldyn.runtime import setup_jax

setup_jax()  # float64 available, persistent compilation cache shared with the CLI


@pytest.fixture(scope="session")
def session_store(tmp_path_factory):
    return tmp_path_factory.mktemp("store")
