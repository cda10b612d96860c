"""`icldyn verify --paper ahn --quick`: every claim passes, with the issue's numbers asserted."""

import pytest

from icldyn import verify


@pytest.fixture(scope="module")
def claims(session_store):
    return {c.claim: c for c in verify.verify("ahn", quick=True, store=session_store)}


def test_every_claim_passes(claims):
    failed = [f"{c.claim}: theory {c.theory}, measured {c.measured}, tol {c.tolerance}" for c in claims.values()
              if not c.passed]
    assert not failed, failed
    assert len(claims) >= 11


def test_claims_cover_the_issue(claims):
    names = " | ".join(claims)
    for needle in ("Lemma 1", "moment form", "Thm 1: trained 1-layer", "L=2: trained", "L=3: trained",
                   "L=2 tuned GD", "L=2 tuned PGD", "Thm 3: sparse", "Thm 3: A_ℓ is not"):
        assert needle in names


def test_runs_written_by_verify_are_complete(session_store):
    runs = [p for p in session_store.iterdir() if (p / "summary.json").exists()]
    assert len(runs) >= 3
    for run in runs:
        for name in ("config.toml", "metrics.parquet", "summary.json", "params.npz", "report.md"):
            assert (run / name).is_file(), f"{run.name} lacks {name}"
        assert list((run / "figures").glob("*.png"))
