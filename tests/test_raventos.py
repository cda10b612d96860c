"""Closed forms of the task-diversity plug-in (arXiv 2306.15063): dMMSE is the posterior mean over the pool, ridge
with λ = σ² the posterior mean under N(0, I); the transition M* is the crossing of the two distances."""

from __future__ import annotations

import numpy as np

from icldyn.papers.raventos import theory


def test_dmmse_is_the_posterior_mean_over_the_pool():
    rng = np.random.default_rng(0)
    b, n, d, M, sigma = 5, 6, 3, 7, 0.5
    X, pool = rng.standard_normal((b, n + 1, d)), rng.standard_normal((M, d))
    y = np.einsum("bid,bd->bi", X, pool[rng.integers(0, M, b)]) + sigma * rng.standard_normal((b, n + 1))
    lik = np.array([[np.prod(np.exp(-(y[i, :n] - X[i, :n] @ w) ** 2 / (2 * sigma**2))) for w in pool]
                    for i in range(b)])  # (b, M) the Gaussian likelihood of each pool task, written out
    expected = (lik / lik.sum(1, keepdims=True)) @ pool
    np.testing.assert_allclose(theory.dmmse_weights(X, y, pool, sigma, chunk=2), expected, rtol=1e-10)
    np.testing.assert_allclose(theory.dmmse_weights(X, y, pool[:1], sigma), np.repeat(pool[:1], b, 0))  # M = 1
    # ridge with λ = σ²: the N(0, I) posterior mean (XᵀX + σ²I)⁻¹Xᵀy, at the queries
    w = np.stack([np.linalg.solve(X[i, :n].T @ X[i, :n] + sigma**2 * np.eye(d), X[i, :n].T @ y[i, :n])
                  for i in range(b)])
    np.testing.assert_allclose(theory.ridge(X, y, sigma), np.einsum("bd,bd->b", w, X[:, -1]), rtol=1e-10)


def test_transition_is_the_crossing_in_log2_m():
    log2_m = np.array([1.0, 2.0, 3.0, 4.0])
    to_ridge = np.array([4.0, 2.0, 1.0, 0.5])
    to_dmmse = np.array([1.0, 1.0, 2.0, 4.0])  # log gap: −log 4, −log 2, log 2, log 8: crosses 0 halfway 2 → 3
    assert abs(theory.transition(log2_m, to_dmmse, to_ridge) - 2.5) < 1e-12
    assert theory.transition(log2_m, to_ridge, to_dmmse) is None  # never from nearer-dMMSE to nearer-ridge
