"""`icldyn verify --paper ahn --quick`: every claim passes, with the issue's numbers asserted."""

import pytest

from conftest import assert_claims
from icldyn import verify

pytestmark = pytest.mark.xdist_group("ahn-verify")  # both tests read the module's verify runs


@pytest.fixture(scope="module")
def claims(session_store):
    return {c.claim: c for c in verify.verify("ahn", quick=True, store=session_store)}


def test_every_claim_passes_and_covers_the_issue(claims):
    assert len(claims) >= 11
    assert_claims(claims.values(), ("Lemma 1", "moment form", "Thm 1: trained 1-layer", "L=2: trained",
                                    "L=3: trained", "L=2 tuned GD", "L=2 tuned PGD", "Thm 3: sparse",
                                    "Thm 3: A_ℓ is not"))


def test_runs_written_by_verify_are_complete(session_store):
    runs = [p for p in session_store.iterdir() if (p / "summary.json").exists()]
    assert len(runs) >= 3
    for run in runs:
        for name in ("config.toml", "metrics.parquet", "summary.json", "params.npz", "report.md"):
            assert (run / name).is_file(), f"{run.name} lacks {name}"
        assert list((run / "figures").glob("*.png"))
