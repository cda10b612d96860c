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
