"""Goel et al.'s conditioning grid through the sweep machinery (a recipe run beside the same points swept), in a
file of its own so that a second worker can take it. The sample-size sweep is checked against verify's run in
tests/test_goel.py."""

import numpy as np
import pytest

from icldyn.plugins import get
from icldyn.runner import execute

pytestmark = pytest.mark.e2e  # whole trainings, subprocesses or builds: not in the inner loop


def test_conditioning_grid_swept_as_one_job(session_store, tmp_path):
    """κ changes Σ, not a shape: a sweep over the recipe's κ grid stacks the three runs on one seed axis (one
    job, one program per method) and gives the numbers of the in-run grid."""
    import json

    from icldyn.sweep import sweep

    raw = {"experiment": "goel-conditioning", "seeds": 1, "train": {"steps": 300}}
    _, s = execute(get("goel-conditioning").config(raw, quick=True), session_store)
    record = sweep(raw, True, None, tmp_path)
    assert [p["job_size"] for p in record["points"]] == [3, 3, 3]
    combined = json.loads((tmp_path / record["report"]).with_name("summary.json").read_text())
    assert combined["steps_by_kappa"] == s["steps_by_kappa"]
    np.testing.assert_allclose([p["final_excess"] for p in combined["points"]],
                               [p["final_excess"] for p in s["points"]], rtol=1e-9)
