"""The Python API as docs/python.md shows it: its code blocks run, in order, in a fresh process (no CLI set-up),
and their assertions hold; a bad override raises icldyn.ConfigError before anything is written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_huang import HUANG_CLAIMS, check_verify_runs

import icldyn

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


@pytest.mark.e2e
def test_the_documented_example_runs_in_a_fresh_process():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 2
    res = subprocess.run([sys.executable, "-c", "\n".join(blocks)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "finished" in out and "data.d = 0 is not allowed" in out and "model.layers=1/seed0/P" in out
    # the example's `icldyn.verify("huang", quick=True)`: every claim listed passed, and its runs have the SPEC's
    # numbers (test_huang.check_verify_runs; this is the suite's one huang verify run)
    passed = [line for line in out.splitlines() if line.startswith("pass | ")]
    assert not [line for line in out.splitlines() if line.startswith("FAIL | ")]
    assert all(any(needle in line for line in passed) for needle in HUANG_CLAIMS), passed
    store = next(line.split("runs are in ", 1)[1] for line in out.splitlines() if line.startswith("runs are in "))
    check_verify_runs(Path(store))


def test_run_object_and_errors(tmp_path):
    with pytest.raises(icldyn.ConfigError, match="data.n"):
        icldyn.run("quickstart", overrides={"data.n": -1}, store=tmp_path)
    with pytest.raises(icldyn.ConfigError, match="grid.model.layers"):
        icldyn.run("ahn-loss-vs-layers", quick=True, overrides={"model.layers": 2}, store=tmp_path)
    assert not any(tmp_path.iterdir())
    assert {"quickstart", "goel-convergence", "huang-balanced"} <= set(icldyn.recipes().name)
    assert icldyn.runs(store=tmp_path).empty
