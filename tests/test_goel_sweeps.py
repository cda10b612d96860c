"""Goel et al.'s figures through the sweep machinery: the sample-size floor and the conditioning grid (each a
recipe run beside the same points swept), in a file of their own so that a second worker can take them."""

import numpy as np

from icldyn.plugins import get
from icldyn.runner import execute


def test_sample_size_floor_falls_with_n(session_store, tmp_path):
    import json

    from icldyn.sweep import sweep

    raw = {"experiment": "goel-sample-size", "seeds": 1, "grid": {"data.n": [20, 40, 80, 160]}}
    _, s = execute(get("goel-sample-size").config(raw, quick=True), session_store)
    floors = [p["floor"] for p in s["points"]]
    assert all(np.diff(floors) < 0), floors
    assert all(p["floor"] < p["initial_excess"] for p in s["points"])
    lo, hi = s["slope_ci"]
    assert lo <= s["slope"] <= hi and s["slope"] < -1.0  # measured ≈ −1.75 (n = 20…320, 2 seeds)
    assert any(f.endswith("floor_vs_n.png") for f in s["figures"])
    # the same figure through the sweep machinery (no --grid: the recipe's grid, each n its own run directory,
    # a Ray task with --backend ray): the recipe's combined report gives the same numbers
    record = sweep(raw, True, None, tmp_path)
    assert [p["overrides"] for p in record["points"]] == [{"data.n": n} for n in (20, 40, 80, 160)]
    combined = json.loads((tmp_path / record["report"]).with_name("summary.json").read_text())
    assert [p["floor"] for p in combined["points"]] == floors and combined["slope_ci"] == s["slope_ci"]
    assert [p["point"] for p in combined["points"]] == [p["point"] for p in s["points"]]
    assert (tmp_path / record["report"]).with_name("figures").joinpath("floor_vs_n.png").is_file()


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
