"""`icldyn verify --paper ahn --quick`: every claim passes, with the issue's numbers asserted."""

import pytest
from conftest import assert_claims


@pytest.fixture
def claims(verify_claims):
    return {c.claim: c for c in verify_claims("ahn")}


def test_every_claim_passes_and_the_runs_verify_wrote_are_complete(claims, session_store):
    assert len(claims) >= 11
    assert_claims(claims.values(), ("Lemma 1", "moment form", "Thm 1: trained 1-layer", "L=2: trained",
                                    "L=3: trained", "L=2 tuned GD", "L=2 tuned PGD", "Thm 3: sparse",
                                    "Thm 3: A_ℓ is not", "Thm 3: S's best point is stationary"))
    # the runs verify wrote are complete run directories
    runs = [p for p in session_store.iterdir() if (p / "summary.json").exists()]
    assert len(runs) >= 3
    for run in runs:
        for name in ("config.toml", "metrics.parquet", "summary.json", "params.npz", "report.md"):
            assert (run / name).is_file(), f"{run.name} lacks {name}"
        assert list((run / "figures").glob("*.png"))


def test_stationarity_claim_fails_away_from_the_critical_point():
    """Theorem 3's stationarity claim (in verify) fails when tested at a point of S that is not its best one."""
    from icldyn.papers.ahn.claims import theorem3_stationarity

    assert not theorem3_stationarity(scale=1.1, fit=100_000, test=50_000).passed
