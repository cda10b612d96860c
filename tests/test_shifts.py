"""The shift suite (icldyn.components.shifts) and `icldyn eval`: a shifted law's moments, known answers of least
squares under shifts, the exact shifted risk of Theorem 1's one-layer model (and its verify claim failing when the
formula is perturbed), and eval's rows in a finished run."""

from __future__ import annotations

import json
import shutil

import jax
import numpy as np
import pytest
from typer.testing import CliRunner

from icldyn.components import baselines as bl
from icldyn.components import shifts as S
from icldyn.components.prompts import GaussianTask
from icldyn.config import ConfigError

D = 5
ISO = GaussianTask(np.eye(D), np.eye(D), np.eye(D), np.asarray(0.0))  # x ~ N(0, I), w ~ N(0, I), no noise
KEY = jax.random.PRNGKey(3)


def _sample(name: str, k: int, batch: int = 2000, K: int = 15):
    """Prompts of k context examples: the first k of a shift's draw of every length up to K (one shape for every
    shift, so that JAX compiles each primitive once), as S.sample draws them."""
    shift = S.get(name)
    draw = shift.draw(S.shifted_law(shift, ISO, KEY), jax.random.fold_in(KEY, S.PROMPT_KEY), batch, K)
    return tuple(np.asarray(a) for a in draw.prompts(k))


def _z(err: np.ndarray, value: float) -> float:
    return abs(err.mean() - value) / (err.std(ddof=1) / np.sqrt(err.size))


def test_skewed_and_half_subspace_laws_and_their_moments():
    """Σ' = TΣTᵀ has eigenvalues ∝ 1/i² (skewed) or d/⌊d/2⌋ on ⌊d/2⌋ directions (half subspace), trace d; the sampled
    covariates' empirical covariance matches Σ' entry by entry (4.5 s.e.: Var x_ax_b = Σ_aaΣ_bb + Σ_ab²)."""
    skewed = S.shifted_law(S.get("skewed"), ISO, KEY)
    lam = np.sort(np.linalg.eigvalsh(skewed.sigma))[::-1]
    np.testing.assert_allclose(lam, D / np.sum(1.0 / np.arange(1, D + 1) ** 2) / np.arange(1, D + 1) ** 2, rtol=1e-10)
    half = np.sort(np.linalg.eigvalsh(S.shifted_law(S.get("half_subspace"), ISO, KEY).sigma))
    np.testing.assert_allclose(half, [0, 0, 0, D / 2, D / 2], atol=1e-10)
    X, _ = _sample("skewed", k=9)
    rows = X.reshape(-1, D)
    C, Sg = rows.T @ rows / len(rows), skewed.sigma
    se = np.sqrt((np.outer(np.diag(Sg), np.diag(Sg)) + Sg**2) / len(rows))
    assert np.max(np.abs(C - Sg) / se) < 4.5
    assert np.max(np.abs(C - np.eye(D)) / se) > 10  # the unshifted law is far outside


def test_least_squares_known_answers_under_shifts():
    """Noiseless min-norm least squares: under x scaled by s its error relative to E[y_q²] is unchanged (the same
    draws, exactly) and equals s²(d − k) at k < d, 0 at k ≥ d; orthogonal queries are predicted 0 (error E‖x_q‖² =
    d); overlapping ones exactly (error 0); under label noise σ'² it is σ'²(1 + d/(k − d − 1)) at k > d + 1."""
    for k, s in ((3, 3.0), (15, 0.5)):
        X, y = _sample("standard", k)
        Xs, ys = _sample(f"scale_x={'1/2' if s == 0.5 else '3'}", k)
        np.testing.assert_allclose(Xs, s * X, rtol=1e-12)
        err, errs = np.square(bl.ols(X, y) - y[:, -1]), np.square(bl.ols(Xs, ys) - ys[:, -1])
        np.testing.assert_allclose(errs.mean() / np.mean(ys[:, -1] ** 2), err.mean() / np.mean(y[:, -1] ** 2),
                                   rtol=1e-9)
        if k < D:
            assert _z(errs, s**2 * (D - k)) < 4.5
        else:
            assert errs.max() < 1e-18
    X, y = _sample("orthogonal", 3)
    np.testing.assert_allclose(np.einsum("bkd,bd->bk", X[:, :3], X[:, 3]), 0.0, atol=1e-10)
    pred = bl.ols(X, y)
    assert np.abs(pred).max() < 1e-9 and _z(np.square(pred - y[:, -1]), D) < 4.5
    X, y = _sample("overlapping", 3)
    assert np.square(bl.ols(X, y) - y[:, -1]).max() < 1e-18
    noisy = S.shifted_law(S.get("noisy"), ISO, KEY)
    assert abs(S.label_variance(noisy) - D) < 1e-12  # the labels keep the law's E[y²]
    X, y = _sample("noisy", 15)
    var = float(noisy.noise_std) ** 2  # d/(d + 1)
    assert _z(np.square(bl.ols(X, y) - y[:, -1]), var * (1 + D / (15 - D - 1))) < 4.5


def test_unknown_shift_is_one_line_naming_the_allowed():
    with pytest.raises(ConfigError, match=r"shift 'skew' is not allowed: must be one of standard, skewed, "):
        S.get("skew")
    assert len(S.SHIFTS) >= 9 and {"orthogonal", "random_quadrants", "opposite_quadrants", "outliers",
                                    "longer"} <= set(S.SHIFTS)


def test_shifted_loss_is_exact_and_its_claim_fails_when_perturbed():
    """theory.shifted_loss against Monte Carlo with context and query laws apart, k ≠ n and noise; then the
    ahn-shift claim on icldyn eval's own rows (Γ*ᵀ as the trained A, n = 3, three shifts) passes, and fails when
    the exact risk is taken at the training Σ instead of Σ', or with Σ'ΩΣ' for E[hhᵀ] (no fourth moments)."""
    from icldyn.components.prompts import w_covariance
    from icldyn.evaluation import measure
    from icldyn.papers.ahn import theory
    from icldyn.papers.ahn.claims import shift_claim
    from icldyn.papers.ahn.shift import cells
    from icldyn.plugins import get

    rng = np.random.default_rng(0)
    d, k, m, sig = 4, 3, 200_000, 0.5
    Sc, Sq, Om = (A @ A.T / d + c * np.eye(d) for A, c in zip(rng.standard_normal((3, d, d)), (0.2, 0.1, 0.3)))
    G = 0.3 * rng.standard_normal((d, d))
    assert theory.shifted_loss(G, 7, Sc, Sc, Om, sig) == pytest.approx(theory.one_layer_loss(G, Sc, 7, Om, sig))
    X = rng.standard_normal((m, k, d)) @ np.linalg.cholesky(Sc).T
    xq = rng.standard_normal((m, d)) @ np.linalg.cholesky(Sq).T
    w = rng.standard_normal((m, d)) @ np.linalg.cholesky(Om).T
    y = np.einsum("bkd,bd->bk", X, w) + sig * rng.standard_normal((m, k))
    h = np.einsum("bk,bkd->bd", y, X) / k
    err = np.square(np.einsum("bd,de,be->b", xq, G, h) - np.einsum("bd,bd->b", xq, w) - sig * rng.standard_normal(m))
    assert _z(err, theory.shifted_loss(G, k, Sc, Sq, Om, sig)) < 4.5

    cfg = get("ahn-shift").config({"data": {"n": 3}}, quick=True)
    star = theory.optimal_preconditioner(np.eye(D), 3)
    arrays = {"seed0/A": star.T[None, None]}
    rows = measure(cfg, arrays, ["standard", "skewed", "scale_x=2"], prompts=1000)
    cs = cells(cfg, arrays, rows)
    assert len(cs) == 9 and shift_claim(cs).passed
    unshifted = [c.model_copy(update={"exact": theory.shifted_loss(star, c.k, np.eye(D))}) for c in cs]
    assert not shift_claim(unshifted).passed

    def population_moments(c):  # E[hhᵀ] as if Ŝ were Σ' (no fourth moments): ΣΩΣ in place of H_k
        t = S.shifted_law(S.get(c.shift), S.base_law(cfg, 0), S.shift_key(jax.random.fold_in(jax.random.PRNGKey(0),
                                                                                              0), c.shift))
        Sg, W = t.sigma, w_covariance(t)
        return float(np.trace(Sg @ star @ Sg @ W @ Sg @ star.T) - 2 * np.trace(Sg @ star @ Sg @ W) + np.trace(Sg @ W))

    assert not shift_claim([c.model_copy(update={"exact": population_moments(c)}) for c in cs]).passed


@pytest.mark.e2e
def test_eval_writes_queryable_curves_into_a_finished_run(tmp_path, tiny_store):
    """`icldyn eval` on a copy of the suite's tiny quickstart run (2 points × 2 seeds): shifts.parquet rows (each
    point, seed, k < d and method), the `shifts` view, a sound manifest, rows replaced on a rerun; one line for an
    unknown shift and for a run without params.npz."""
    import pyarrow.parquet as pq

    from icldyn.cli import app
    from icldyn.store import add_to_manifest, query, write_shift_rows

    [src] = [p for p in tiny_store.iterdir() if p.is_dir() and (p / "summary.json").is_file()]
    run = tmp_path / "store" / src.name
    shutil.copytree(src, run)
    res = CliRunner().invoke(app, ["eval", src.name, "--shift", "orthogonal", "--prompts", "200",
                                   "--out", str(tmp_path / "store")])
    assert res.exit_code == 0, res.output
    sql = "SELECT count(*), count(DISTINCT k), count(DISTINCT method) FROM shifts WHERE shift = 'orthogonal'"
    assert query(tmp_path / "store", sql)[1] == [(2 * 2 * (D - 1) * len(S.METHODS), D - 1, len(S.METHODS))]
    assert (run / "figures" / "shifts.png").is_file()
    assert CliRunner().invoke(app, ["check", src.name, "--out", str(tmp_path / "store")]).exit_code == 0
    rows = [{**r, "error": 0.0} for r in pq.read_table(run / "shifts.parquet").to_pylist()[:6]]
    assert len(write_shift_rows(run, rows, {"orthogonal"})) == 6  # a rerun replaces the shift's rows
    add_to_manifest(run, ["shifts.parquet"])
    res = CliRunner().invoke(app, ["eval", src.name, "--shift", "sideways", "--out", str(tmp_path / "store")])
    assert res.exit_code == 2 and "shift 'sideways' is not allowed: must be one of standard" in res.output
    (run / "params.npz").unlink()
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["files"]["params.npz"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    res = CliRunner().invoke(app, ["eval", src.name, "--out", str(tmp_path / "store")])
    assert res.exit_code == 2 and "has no params.npz" in res.output and len(res.output.strip().splitlines()) == 1
