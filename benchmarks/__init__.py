"""Benchmarks (never timed tests): each script runs icldyn beside a faithful baseline in one process."""

from pathlib import Path

HERE = Path(__file__).resolve().parent


def results_dir(quick: bool) -> Path:
    """Where a run writes: ``results/`` for the full run (the tables in docs/performance.md), ``results/quick/`` for a
    ``--quick`` smoke run, so that one never overwrites the other."""
    out = HERE / "results" / ("quick" if quick else "")
    out.mkdir(parents=True, exist_ok=True)
    return out


def reference():
    """(torch, Reference): Garg et al.'s ``TransformerModel`` on PyTorch, defined once, by the parity test
    (tests/test_garg.py); run from the repository's root. ImportError without torch or transformers."""
    from tests.test_garg import reference_model

    return reference_model()
