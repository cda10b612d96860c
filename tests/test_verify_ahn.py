"""`icldyn verify --paper ahn --quick`: every claim passes, with the issue's numbers asserted."""

from pathlib import Path

import pytest
from conftest import assert_claims


@pytest.fixture
def claims(verify_claims):
    return {c.claim: c for c in verify_claims("ahn")}


@pytest.mark.e2e
def test_every_claim_passes_and_the_runs_verify_wrote_are_complete(claims, session_store):
    assert len(claims) >= 11
    assert_claims(claims.values(), ("Lemma 1", "moment form", "Thm 1: trained 1-layer", "L=2: trained",
                                    "L=3: trained", "L=2 tuned GD", "L=2 tuned PGD", "Thm 3: sparse",
                                    "Thm 3: A_ℓ is not", "Thm 3: S's best point is stationary",
                                    "Thm 4: S's best point is stationary", "Thm 2:", "Thm 5: 1-layer ReLU",
                                    "Thm 5: trained", "best point of Thm 4's S", "Thm 1 on Γ", "Thm 2 exact",
                                    "the smaller optimal step a*", "the larger optimal step b*"))
    # the runs verify wrote are complete run directories
    runs = [p for p in session_store.iterdir() if (p / "summary.json").exists()]
    assert len(runs) >= 3
    for run in runs:
        for name in ("config.toml", "metrics.parquet", "summary.json", "params.npz", "report.md"):
            assert (run / name).is_file(), f"{run.name} lacks {name}"
        assert list((run / "figures").glob("*.png"))
    # the claims read from runs fail when what they check is perturbed
    from icldyn.api import load, runs
    from icldyn.papers.ahn.claims import relu_claim, s_comparison_claim

    table = runs(session_store)
    first = lambda name: load(table[table.experiment == name].path.iloc[0]).result.points[0]  # noqa: E731
    assert not relu_claim(first("ahn-relu"), c_star=20 / 26).passed  # linear attention's n/(n+d+1)
    layers = first("ahn-loss-vs-layers")
    assert not s_comparison_claim(layers, layers.test_loss * 1.5, 1e-3).passed
    # Theorem 1 on Γ: the quickstart's trained Γ is at Γ* along λ ≥ 0.25, not along λ = 0.1 (a third short)
    import numpy as np

    from icldyn.papers.ahn.claims import gamma_claim

    p1 = first("quickstart")
    As = [np.asarray(s.A[0]) for s in p1.seeds]
    sigmas = [np.asarray(s.sigma_sqrt) @ np.asarray(s.sigma_sqrt) for s in p1.seeds]
    assert gamma_claim(As, sigmas, p1.n).passed and not gamma_claim(As, sigmas, p1.n, lam_min=0.1).passed

    # the default job (verify's quickstart is its config) is stable: no point's logged held-out loss rises above its
    # step-0 value
    import pyarrow.parquet as pq

    quick = next(p for p in table.path if Path(p).name.split("-", 2)[2].startswith("quickstart"))
    rows = pq.read_table(Path(quick) / "metrics.parquet").to_pylist()
    for point in {r["point"] for r in rows}:
        curve = {r["step"]: r["value"] for r in rows if r["point"] == point and r["metric"] == "test_loss"}
        assert max(curve.values()) <= curve[0], (point, curve)


def test_stationarity_claim_fails_away_from_the_critical_point():
    """Theorem 3's stationarity claim (in verify) fails when tested at a point of S that is not its best one."""
    from icldyn.papers.ahn.claims import s_stationarity

    assert not s_stationarity(scale=1.1, fit=100_000, test=50_000)[0].passed


def test_theorem_claims_fail_outside_their_hypotheses_or_with_a_wrong_constant():
    import numpy as np

    from icldyn.papers.ahn.claims import s_stationarity, theorem2_diagonal, theorem5_relu

    assert not s_stationarity("relaxed", layers=2, scale=1.1, fit=100_000, test=30_000)[0].passed
    U, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((5, 5)))
    assert not theorem2_diagonal(fit=30_000, test=30_000, sigma_sqrt=(U * np.geomspace(1.4, 0.3, 5)) @ U.T).passed
    # a diagonal anisotropic Σ (the official eigenvalues): two diagonal minima, one per order of the steps; the
    # multi-start fit finds the better one and the claim holds (a single start could fail it spuriously)
    assert theorem2_diagonal(fit=30_000, test=30_000, sigma_sqrt=np.diag([1, 1, 0.5, 0.25, 1.0])).passed
    assert not theorem5_relu(fit=20_000, test=20_000, c_claimed=20 / 26).passed
