"""Benchmarks (never timed tests): each script runs icldyn beside a faithful baseline in one process."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def results_dir(quick: bool) -> Path:
    """Where a run writes: ``results/`` for the full run (the tables in docs/performance.md), ``results/quick/`` for a
    ``--quick`` smoke run, so that one never overwrites the other."""
    out = HERE / "results" / ("quick" if quick else "")
    out.mkdir(parents=True, exist_ok=True)
    return out
