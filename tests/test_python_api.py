"""The Python API as docs/python.md shows it: its code blocks run, in order, in a fresh process (no CLI set-up),
and their assertions hold; a bad override raises icldyn.ConfigError before anything is written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import icldyn

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def test_the_documented_example_runs_in_a_fresh_process():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 2
    res = subprocess.run([sys.executable, "-c", "\n".join(blocks)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "finished" in out and "data.d = 0 is not allowed" in out and "model.layers=1/seed0/P" in out


def test_run_object_and_errors(tmp_path):
    with pytest.raises(icldyn.ConfigError, match="data.n"):
        icldyn.run("quickstart", overrides={"data.n": -1}, store=tmp_path)
    with pytest.raises(icldyn.ConfigError, match="grid.model.layers"):
        icldyn.run("ahn-loss-vs-layers", quick=True, overrides={"model.layers": 2}, store=tmp_path)
    assert not any(tmp_path.iterdir())
    assert {"quickstart", "goel-convergence", "huang-balanced"} <= set(icldyn.recipes().name)
    assert icldyn.runs(store=tmp_path).empty
