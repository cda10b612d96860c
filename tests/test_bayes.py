"""The Bayes-optimal predictors (icldyn.components.bayes), each against an independent brute-force computation of the
same posterior mean: rejection sampling from the prior, or enumeration of every hypothesis, on a tiny d."""

import itertools

import numpy as np
import pytest

from icldyn.components import bayes, zoo
from icldyn.errors import ConfigError


def _prompts(rng, b, m, d):
    return rng.standard_normal((b, m, d))


def test_sparse_posterior_mean_equals_rejection_sampling_d3_s1():
    """d = 3, s = 1, noise σ = 0.5: the exact mixture over supports against the mean of prior draws (support uniform,
    w_S ~ N(0, 1)) each accepted with probability exp(−RSS/2σ²) — rejection sampling of the posterior."""
    rng = np.random.default_rng(0)
    d, s, sigma, m, b = 3, 1, 0.5, 5, 4
    X = _prompts(rng, b, m, d)
    w = np.zeros((b, d))
    w[np.arange(b), rng.integers(0, d, b)] = rng.standard_normal(b)
    y = np.einsum("bmd,bd->bm", X, w) + sigma * rng.standard_normal((b, m))
    exact = np.asarray(bayes.sparse_linear(X, y, s, noise_var=sigma**2))
    draws = 400_000
    worst = 0.0
    for p in range(b):
        W = np.zeros((draws, d))
        W[np.arange(draws), rng.integers(0, d, draws)] = rng.standard_normal(draws)
        for i in range(1, m):
            rss = np.sum((y[p, :i, None] - X[p, :i] @ W.T) ** 2, 0)
            keep = rng.random(draws) < np.exp(-rss / (2 * sigma**2))
            preds = W[keep] @ X[p, i]
            se = preds.std(ddof=1) / np.sqrt(keep.sum())
            worst = max(worst, abs(preds.mean() - exact[p, i]) / se)
            assert keep.sum() > 1000
    assert worst < 4.5, worst
    assert np.all(exact[:, 0] == 0)


def test_sparse_noiseless_limit_by_enumeration_and_the_true_support_from_k_above_s():
    """σ = 0, d = 3, s = 1: after one point every support explains y₁ = x₁ⱼ v (weight ∝ N(y₁; 0, x₁ⱼ²)), posterior
    mean Σⱼ pⱼ (y₁/x₁ⱼ) x_{2j}; from k = 2 > s only the true support does, and the prediction is exact."""
    rng = np.random.default_rng(1)
    X = _prompts(rng, 6, 4, 3)
    w = np.zeros((6, 3))
    w[np.arange(6), rng.integers(0, 3, 6)] = rng.standard_normal(6)
    y = np.einsum("bmd,bd->bm", X, w)
    got = np.asarray(bayes.sparse_linear(X, y, 1))
    x1, y1 = X[:, 0], y[:, :1]
    logp = -0.5 * y1**2 / x1**2 - np.log(np.abs(x1))
    p = np.exp(logp - logp.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(got[:, 1], np.sum(p * (y1 / x1) * X[:, 1], 1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got[:, 2:], y[:, 2:], rtol=1e-8, atol=1e-10)


def test_sparse_s2_up_to_k_s_is_the_mixture_of_gaussian_densities_over_the_supports():
    """d = 4, s = 2, τ² = 2.25, noiseless, k ≤ s: every support explains the labels, with weight N(y; 0, τ² X_S X_Sᵀ)
    (a k × k density, written out here) and mean X_Sᵀ(X_S X_Sᵀ)⁻¹y — against the exact mixture's predictions."""
    rng = np.random.default_rng(7)
    d, s, tau2 = 4, 2, 2.25
    X = _prompts(rng, 20, 4, d)
    y = rng.standard_normal((20, 4))  # any labels: every support fits k ≤ s of them
    got = np.asarray(bayes.sparse_linear(X, y, s, tau2))
    for p in range(20):
        for k in (1, 2):
            logw, preds = [], []
            for S in itertools.combinations(range(d), s):
                XS, yk = X[p, :k][:, S], y[p, :k]
                K = tau2 * XS @ XS.T
                logw.append(-0.5 * yk @ np.linalg.solve(K, yk) - 0.5 * np.linalg.slogdet(K)[1])
                preds.append(X[p, k, list(S)] @ (XS.T @ np.linalg.solve(XS @ XS.T, yk)))
            w = np.exp(np.array(logw) - max(logw))
            assert got[p, k] == pytest.approx(w @ np.array(preds) / w.sum(), rel=1e-8, abs=1e-10)


def test_sparse_noiseless_float32_labels_are_exact_from_k_above_s():
    """Prompts drawn in float32 (the runs' held-out sets): from k = s + 1 only the true support explains the labels,
    up to their rounding; over 4000 prompts at d = 6, s = 2 the Bayes error is 0 (≤ 1e-9) at every k > s."""
    rng = np.random.default_rng(8)
    b, m, d, s = 4000, 6, 6, 2
    X = _prompts(rng, b, m, d).astype(np.float32)
    w = np.zeros((b, d), np.float32)
    for i in range(b):
        w[i, rng.choice(d, s, replace=False)] = rng.standard_normal(s)
    y = np.einsum("bmd,bd->bm", X, w).astype(np.float32)
    err = (np.asarray(bayes.sparse_linear(X.astype(np.float64), y.astype(np.float64), s)) - y) ** 2
    assert err[:, s + 1:].max() <= 1e-9, err[:, s + 1:].max()


def test_sparse_refuses_too_many_supports_in_one_line():
    with pytest.raises(ConfigError, match=r"C\(40, 8\) = 76904685 supports; the exact Bayes predictor enumerates at "
                                          r"most 20000"):
        bayes.supports(40, 8)


def test_gaussian_linear_is_ridge_at_sigma2_over_tau2_and_its_risk_is_the_simulated_one():
    rng = np.random.default_rng(2)
    d, m, b, tau2, sigma2 = 4, 9, 20_000, 2.0, 0.5
    X = _prompts(rng, b, m, d)
    y = np.einsum("bmd,bd->bm", X, np.sqrt(tau2) * rng.standard_normal((b, d))) + np.sqrt(sigma2) * \
        rng.standard_normal((b, m))
    pred = np.asarray(bayes.gaussian_linear(X, y, tau2, sigma2))
    np.testing.assert_allclose(pred, np.asarray(zoo.ridge(X, y, sigma2 / tau2)), rtol=1e-10, atol=1e-12)
    sq = (pred - y) ** 2
    risk, se = bayes.gaussian_linear_risk(np.arange(m), d, tau2, sigma2)
    z = np.abs(sq.mean(0) - risk) / np.hypot(sq.std(0, ddof=1) / np.sqrt(b), se)
    assert z.max() < 4.0, z
    # noiseless: τ²(d − k)₊, exactly, and the posterior mean is the minimum-norm interpolant
    risk0, se0 = bayes.gaussian_linear_risk(np.arange(m), d, tau2)
    np.testing.assert_array_equal(risk0, tau2 * np.clip(d - np.arange(m), 0, None))
    assert not se0.any()


def test_finite_pool_at_every_prefix_is_the_posterior_over_the_pool():
    rng = np.random.default_rng(3)
    pool, sigma = rng.standard_normal((5, 3)), 0.7
    X = _prompts(rng, 7, 6, 3)
    y = np.einsum("bmd,bd->bm", X, pool[rng.integers(0, 5, 7)]) + sigma * rng.standard_normal((7, 6))
    got = np.asarray(bayes.finite_pool(X, y, pool, sigma))
    for p in range(7):
        for i in range(6):
            like = np.array([np.prod(np.exp(-(y[p, :i] - X[p, :i] @ w) ** 2 / (2 * sigma**2))) for w in pool])
            assert got[p, i] == pytest.approx(like @ (pool @ X[p, i]) / like.sum(), rel=1e-9, abs=1e-12)
        got_w = bayes.finite_pool_weights(X[p:p + 1, :5], y[p:p + 1, :5], pool, sigma)[0]
        np.testing.assert_allclose(got_w, like / like.sum(), rtol=1e-9)


def test_tree_posterior_equals_enumerating_every_split_assignment():
    """Depth 2, d = 3: the node-by-node sum against all 3³ assignments of the internal nodes' coordinates, each
    consistent one weighted equally (the leaf values' density is common to them)."""
    from icldyn.components import function_classes as fc
    import jax
    import jax.numpy as jnp

    depth, d = 2, 3
    P = fc.sample(fc.DecisionTree(d=d, n=7, depth=depth), jax.random.PRNGKey(4), 12, dtype=jnp.float64)
    X, y = np.asarray(P.X), np.asarray(P.y)
    got = bayes.decision_tree(X, y, depth)
    for p in range(len(X)):
        for i in range(1, X.shape[1]):
            num = den = 0.0
            for coords in itertools.product(range(d), repeat=2**depth - 1):
                def leaf(x):
                    node = 0
                    for _ in range(depth):
                        node = 2 * node + 1 + int(x[coords[node]] > 0)
                    return node
                leaves = [leaf(x) for x in X[p, :i]]
                if any((leaves[a] == leaves[c]) != (y[p, a] == y[p, c]) for a in range(i) for c in range(a)):
                    continue
                q = leaf(X[p, i])
                den += 1
                num += next((y[p, j] for j in range(i) if leaves[j] == q), 0.0)
            assert got[p, i] == pytest.approx(num / den, abs=1e-12)


def test_classification_posterior_against_the_exact_arc_in_two_dimensions():
    """d = 2: w's direction is uniform on the circle, each label keeps a half-circle, so the posterior is an arc
    computable exactly (on a fine grid of angles); P(y_i = 1 | data) from rejection sampling within its s.e."""
    rng = np.random.default_rng(5)
    X = _prompts(rng, 6, 6, 2)
    w = rng.standard_normal((6, 2))
    y = np.sign(np.einsum("bmd,bd->bm", X, w))
    mc = bayes.linear_classification(X, y, draws=1 << 15)
    theta = np.linspace(0, 2 * np.pi, 2_000_001)[:-1]
    U = np.stack([np.cos(theta), np.sin(theta)])
    zs = []
    for p in range(6):
        s = np.sign(X[p] @ U)  # (m, grid)
        for i in range(6):
            ok = np.all(s[:i] == y[p, :i, None], 0)
            exact = 2 * np.mean(s[i][ok] > 0) - 1
            zs.append(abs(mc.mean[p, i] - exact) / max(mc.se[p, i], 1e-3))
    assert max(zs) < 4.5, max(zs)


def test_relu_network_noiseless_is_the_small_noise_limit_with_its_scale():
    """The noiseless path (a jitter on the Gram matrix) with an output scale s = 2 against the noisy formula at
    σ² = 1e-6 on the same first-layer draws: the same predictions to 1e-2."""
    rng = np.random.default_rng(9)
    X, y = _prompts(rng, 4, 5, 2), rng.standard_normal((4, 5))
    a = bayes.relu_network(X, y, hidden=8, scale=2.0, draws=64)
    b = bayes.relu_network(X, y, hidden=8, scale=2.0, noise_var=1e-6, draws=64)
    np.testing.assert_allclose(a.mean, b.mean, atol=1e-2)
    assert np.abs(a.mean[:, 1:]).max() > 0.1  # not trivially zero


def test_relu_network_importance_sampling_against_rejection_sampling():
    """d = 1, H = 2 hidden units, label noise σ = 0.5: importance sampling of U (v integrated out) against rejection
    sampling of (U, v) from the prior, accepted with probability exp(−RSS/2σ²)."""
    rng = np.random.default_rng(6)
    H, sigma, m = 2, 0.5, 4
    X = _prompts(rng, 3, m, 1)
    U0, v0 = rng.standard_normal((3, 1, H)), rng.standard_normal((3, H))
    f = lambda X, U, v: np.sqrt(2 / H) * np.einsum("...mh,...h->...m", np.maximum(X @ U, 0), v)  # noqa: E731
    y = f(X, U0, v0) + sigma * rng.standard_normal((3, m))
    mc = bayes.relu_network(X, y, hidden=H, noise_var=sigma**2, draws=4096)
    draws = 400_000
    for p in range(3):
        U, v = rng.standard_normal((draws, 1, H)), rng.standard_normal((draws, H))
        F = f(X[p][None], U, v)  # (draws, m)
        for i in range(1, m):
            keep = rng.random(draws) < np.exp(-np.sum((y[p, :i] - F[:, :i]) ** 2, 1) / (2 * sigma**2))
            ref, se = F[keep, i].mean(), F[keep, i].std(ddof=1) / np.sqrt(keep.sum())
            assert abs(mc.mean[p, i] - ref) < 4.5 * np.hypot(se, mc.se[p, i]), (p, i, mc.mean[p, i], ref)
