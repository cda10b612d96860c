"""Ahn et al. closed forms and baselines (float64)."""

import numpy as np
import pytest

from icldyn.components.prompts import PromptsData, make_covariance
from icldyn.papers.ahn import theory as ahn


def test_isotropic_optimum_closed_form():
    d, n = 5, 20
    assert ahn.optimal_loss(np.eye(d), n) == pytest.approx(d * (d + 1) / (n + d + 1), rel=1e-12)
    assert np.allclose(ahn.optimal_preconditioner(np.eye(d), n), n / (n + d + 1) * np.eye(d))


def test_gamma_star_is_the_minimiser_of_the_one_layer_loss():
    rng = np.random.default_rng(0)
    sigma = make_covariance(PromptsData(covariance="condition", condition_number=10.0), seed=3)
    G = ahn.optimal_preconditioner(sigma, 20)
    f0 = ahn.one_layer_loss(G, sigma, 20)
    for _ in range(20):
        assert ahn.one_layer_loss(G + 0.05 * rng.standard_normal(G.shape), sigma, 20) > f0


def test_inverse_covariance_prior_gives_scaled_sigma_inverse():
    sigma = make_covariance(PromptsData(covariance="official"), seed=0)
    d, n = 5, 20
    G = ahn.optimal_preconditioner(sigma, n, np.linalg.inv(sigma))
    assert np.allclose(G, n / (n + d + 1) * np.linalg.inv(sigma))
    # whitening: same optimal loss as the isotropic problem, d(d+1)/(n+d+1) = 1.1538 (SPEC §3.6)
    assert ahn.optimal_loss(sigma, n, np.linalg.inv(sigma)) == pytest.approx(1.1538, abs=1e-4)


def test_baselines_use_all_n_context_examples():
    rng = np.random.default_rng(1)
    b, n, d = 4, 6, 3
    X, y = rng.standard_normal((b, n + 1, d)), rng.standard_normal((b, n + 1))
    one_step = ahn.preconditioned_gd(X, y, [np.eye(d)])
    expected = np.einsum("bd,bd->b", X[:, n], np.einsum("bid,bi->bd", X[:, :n], y[:, :n]) / n)
    assert np.allclose(one_step, expected)
    X2, y2 = X.copy(), y.copy()
    y2[:, n - 1] += 1.0  # the n-th context example must matter (the official do_gd drops it)
    three = [np.eye(d)] * 3
    assert np.all(np.abs(ahn.preconditioned_gd(X2, y2, three) - ahn.preconditioned_gd(X, y, three)) > 1e-6)
    assert np.all(np.abs(ahn.ols(X2, y2) - ahn.ols(X, y)) > 1e-6)
    y3 = y.copy()
    y3[:, n] += 5.0  # the query's label must not
    assert np.allclose(ahn.preconditioned_gd(X, y3, [np.eye(d)]), one_step)


def test_dist_to_identity_is_scale_invariant_and_matches_spec():
    assert ahn.dist_to_identity(3.0 * np.eye(4)) == pytest.approx(0.0)
    sigma = make_covariance(PromptsData(covariance="official"), seed=0)
    assert ahn.dist_to_identity(np.linalg.inv(sigma)) == pytest.approx(ahn.dist_to_identity(7 * np.linalg.inv(sigma)))
    assert ahn.dist_to_identity(np.linalg.inv(sigma)) == pytest.approx(0.78, abs=0.01)  # issue #2: ≈ 0.78


def test_wishart_trace_moments_and_theorem2s_exact_optimum():
    """E tr Ŝ^k (k ≤ 4) against Monte Carlo within 4 s.e.; Theorem 2's scalar-step loss f(a, b) =
    E tr[(I − aŜ)²(I − bŜ)²] is symmetric, matches Monte Carlo, and its optimum is the audit's (issue #29)."""
    rng = np.random.default_rng(0)
    d, n, m = 3, 5, 100_000
    X = rng.standard_normal((m, n, d))
    S = np.einsum("bni,bnj->bij", X, X) / n
    exact = ahn.wishart_trace_moments(d, n)
    P = np.broadcast_to(np.eye(d), S.shape)
    for k in range(1, 5):
        P = P @ S
        tr = np.trace(P, axis1=1, axis2=2)
        assert abs(tr.mean() - exact[k]) <= 4 * tr.std() / np.sqrt(m), (k, tr.mean(), exact[k])
    I = np.eye(d)
    mc = np.trace((I - 0.4 * S) @ (I - 0.4 * S) @ (I - 1.1 * S) @ (I - 1.1 * S), axis1=1, axis2=2)
    assert abs(mc.mean() - ahn.two_step_loss(0.4, 1.1, d, n)) <= 4 * mc.std() / np.sqrt(m)
    assert ahn.two_step_loss(0.3, 1.2, 5, 20) == pytest.approx(ahn.two_step_loss(1.2, 0.3, 5, 20), rel=1e-14)
    a, b, f = ahn.two_step_optimum(5, 20)
    assert (round(a, 4), round(b, 4), round(f, 5)) == (0.5154, 1.2496, 0.36124)


def test_theorem2_exact_and_gamma_claims_fail_when_perturbed():
    """The decision functions of the Thm 2 exact-optimum claims and of the Thm 1 Γ claim on synthetic inputs."""
    from icldyn.papers.ahn.claims import gamma_claim, theorem2_exact_claims

    exact = ahn.two_step_optimum(5, 20)
    fitted, se, mc = (1.2401, 0.5137), (0.0062, 0.0025), (0.36388, 0.00455)  # verify's numbers, reversed order
    assert all(c.passed for c in theorem2_exact_claims(exact, fitted, se, mc, 5, 20))  # an unordered pair
    wrong_steps = (exact[0] * 1.05, exact[1] * 1.05, exact[2])
    assert [c.passed for c in theorem2_exact_claims(wrong_steps, fitted, se, mc, 5, 20)] == [True, False, False]
    wrong_loss = (*exact[:2], exact[2] * 1.05)
    assert [c.passed for c in theorem2_exact_claims(wrong_loss, fitted, se, mc, 5, 20)] == [False, True, True]

    rng = np.random.default_rng(1)
    U, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    lam = np.array([2.0, 1.0, 0.5, 0.25, 0.1])
    sigma = (U * lam) @ U.T
    G = ahn.optimal_preconditioner(sigma, 20)
    assert gamma_claim([G], [sigma], 20).passed and gamma_claim([G], [sigma], 20, lam_min=0.1).passed
    g = U.T @ G @ U
    flat = U @ (g + np.diag([0, 0, 0, 0, 2.26 - g[4, 4]])) @ U.T  # stuck along λ = 0.1, as quickstart's run
    assert gamma_claim([flat], [sigma], 20).passed and not gamma_claim([flat], [sigma], 20, lam_min=0.1).passed
    off = U @ (g * np.diag([1, 1.05, 1, 1, 1]) + g * (1 - np.eye(5))) @ U.T  # 5% off along λ = 1
    assert not gamma_claim([G, off], [sigma, sigma], 20).passed  # the worst seed decides
