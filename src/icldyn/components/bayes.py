"""Bayes-optimal in-context predictors: the posterior mean of f(x_i) given the points before it, (x_j, f(x_j))_{j<i},
under the prior the prompts were drawn from — the answer no in-context learner can beat on average (for squared
error; for 0-1 error, the sign of the posterior mean of y). Every function returns (b, m) predictions for prompts
X (b, m, d), y (b, m), the i-th made from the points before it (ŷ₀ the prior mean), as the zoo's algorithms
(:mod:`icldyn.components.zoo`) and a causal transformer's i-th output do.

Exact where the prior allows (float64):

================================ =================================================================================
Gaussian linear (w ~ N(0, τ² I))  noiseless: E[w | Xw = y] = X⁺y, the minimum-norm interpolant; noise σ²: ridge at
                                  λ = σ²/τ² (:func:`gaussian_linear`), with its exact risk per k
                                  (:func:`gaussian_linear_risk`)
features (quadratic regression)   the same in the feature map φ(x) = x ⊙ x/√3 (:func:`gaussian_features`)
sparse linear (s of d non-zero)   a mixture over the C(d, s) supports, each a Gaussian posterior weighted by its
                                  marginal likelihood (:func:`sparse_linear`)
a finite task pool (dMMSE)        the posterior over the pool's tasks (:func:`finite_pool`)
decision trees (random splits)    a sum over the split coordinates, node by node (:func:`decision_tree`)
================================ =================================================================================

Monte Carlo, approximate and marked so, with their own standard errors: linear classification (rejection sampling
of w's direction from the prior, :func:`linear_classification`) and two-layer ReLU networks (importance sampling of
the first layer from the prior, the output layer integrated exactly, :func:`relu_network`).

The priors are those of arXiv 2208.01066 §2 / Appendix A.2 (:mod:`icldyn.components.function_classes`); the pool is
Raventós et al.'s (arXiv 2306.15063 §2).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from math import comb
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import draws as key_draws
from icldyn.components import zoo
from icldyn.errors import ConfigError
from icldyn.runtime import float64

MAX_SUPPORTS = 20_000  # C(d, s) the exact sparse posterior enumerates at most


class MonteCarlo(NamedTuple):
    """A Monte-Carlo posterior mean: ``mean`` (b, m) and its Monte-Carlo standard error ``se`` (b, m) (NaN where no
    draw was accepted); ``draws`` (b, m) accepted draws, or the effective sample size of importance weights."""

    mean: np.ndarray
    se: np.ndarray
    draws: np.ndarray


def _exclusive_cumsum(a: jax.Array) -> jax.Array:
    """Σ_{j<i} a_j along axis 1 (0 exactly at i = 0)."""
    return jnp.cumsum(jnp.concatenate([jnp.zeros_like(a[:, :1]), a[:, :-1]], axis=1), axis=1)


# ----------------------------------------------------------------------------------------------- Gaussian linear


@float64
def gaussian_linear(X: jax.Array, y: jax.Array, prior_var: float = 1.0, noise_var: float = 0.0) -> jax.Array:
    """The posterior mean of y_i = wᵀx_i (+ N(0, σ²)) under w ~ N(0, τ² I_d) from the points before i: the
    minimum-norm interpolant X⁺y when σ² = 0 (E[w | Xw = y] for an isotropic prior), else ridge
    (XᵀX + (σ²/τ²) I)⁻¹Xᵀy."""
    if noise_var == 0.0:
        return zoo.least_squares(X, y)
    S = _exclusive_cumsum(jnp.einsum("bmi,bmj->bmij", X, X))
    h = _exclusive_cumsum(X * y[..., None])
    w = jnp.linalg.solve(S + noise_var / prior_var * jnp.eye(X.shape[-1], dtype=X.dtype), h[..., None])[..., 0]
    return jnp.einsum("bmd,bmd->bm", X, w)


def gaussian_linear_risk(k: np.ndarray, d: int, prior_var: float = 1.0, noise_var: float = 0.0, *,
                         draws: int = 20_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The Bayes risk E(ŷ − y)² of :func:`gaussian_linear` after k examples (y the noisy label), x ~ N(0, I_d),
    and its standard error: (risk (len(k),), se).

    Noiseless, exactly: τ² (d − k)₊ (the posterior is w's projection off the span of k Gaussian directions, se 0).
    With noise σ² > 0 the posterior covariance is σ² (XᵀX + λI)⁻¹, λ = σ²/τ², so the risk is
    σ² (1 + E tr (W + λI)⁻¹) with W = XᵀX ~ Wishart(k, I_d); the trace's expectation is over W's eigenvalues alone,
    taken by Monte Carlo (``draws`` Wishart draws: se is its standard error; no closed form at λ > 0 — the
    inverse-Wishart moment E tr W⁻¹ = d/(k − d − 1) is least squares' λ = 0). k = 0: d τ² + σ²."""
    k = np.asarray(k, int)
    if noise_var == 0.0:
        return prior_var * np.clip(d - k, 0, None).astype(float), np.zeros(len(k))
    lam = noise_var / prior_var
    rng = np.random.default_rng([seed, 11])
    risk, se = np.empty(len(k)), np.empty(len(k))
    for i, kk in enumerate(k):
        if kk == 0:
            risk[i], se[i] = noise_var * (1 + d / lam), 0.0
            continue
        ev = np.linalg.svd(rng.standard_normal((draws, kk, d)), compute_uv=False) ** 2  # W's non-zero eigenvalues
        tr = np.sum(1.0 / (ev + lam), axis=1) + max(d - kk, 0) / lam
        risk[i], se[i] = noise_var * (1 + tr.mean()), noise_var * tr.std(ddof=1) / np.sqrt(draws)
    return risk, se


@float64
def gaussian_features(X: jax.Array, y: jax.Array) -> jax.Array:
    """Quadratic regression's posterior mean, f(x) = s wᵀ(x ⊙ x)/√3 with w ~ N(0, I): linear and isotropic in the
    features x ⊙ x, so the minimum-norm interpolant in them (noiseless)."""
    return zoo.least_squares(X * X, y)


# ------------------------------------------------------------------------------------------------ sparse linear


def supports(d: int, s: int) -> np.ndarray:
    """The C(d, s) supports (C, s); more than :data:`MAX_SUPPORTS` is one line (ConfigError)."""
    n = comb(d, s)
    if n > MAX_SUPPORTS:
        raise ConfigError(f"data.sparsity = {s} with data.d = {d} has C({d}, {s}) = {n} supports; the exact Bayes "
                          f"predictor enumerates at most {MAX_SUPPORTS} (lower data.d or data.sparsity)")
    return np.array(list(itertools.combinations(range(d), s)), np.int32).reshape(n, s)


@float64
def sparse_linear(X: jax.Array, y: jax.Array, sparsity: int, prior_var: float = 1.0, noise_var: float = 0.0,
                  label_eps: float = 2.0**-24, budget: int = 1 << 28) -> jax.Array:
    """The exact posterior mean of y_i for w with ``sparsity`` = s non-zero N(0, τ²) coordinates on a uniform random
    support (arXiv 2208.01066's sparse linear regression; y = wᵀx, + N(0, σ²) if ``noise_var``).

    Given a support S the posterior of w_S is Gaussian; the posterior of S is proportional to the marginal likelihood
    of the labels under it. With A = X_Sᵀ X_S, b = X_Sᵀ y (the earlier points) and A = U diag(e) Uᵀ:

    - σ² > 0: log p(y | S) = −(yᵀy − bᵀ(A + λI)⁻¹b)/(2σ²) − ½ log det(I + A/λ) + const, mean (A + λI)⁻¹ b, λ = σ²/τ²;
    - σ² = 0 (the limit): every support explains k ≤ s labels; for k > s only one whose residual yᵀy − bᵀA⁺b is 0
      does (the true support, almost surely); then log p(y | S) = −|A⁺b|²/(2τ²) − ½ log pdet A + const (the
      k × k Gaussian density of y = X_S w_S, written with A's min(k, s) non-zero eigenvalues), mean A⁺b. "0" is
      up to the labels' rounding: a residual below 100 ``label_eps``² yᵀy (float32 labels: 2⁻²⁴; the true support's
      is ≈ label_eps² yᵀy/3), and the smallest residual always counts.

    ŷ_i = Σ_S p(S | data) x_{i,S}ᵀ mean_S. Every system is s × s; prompts a chunk at a time, its arrays within
    ``budget`` bytes."""
    b, m, d = X.shape
    sup = jnp.asarray(supports(d, sparsity))
    s = sparsity
    rank = jnp.minimum(jnp.arange(m), s)  # the rank of A after k = i points
    top = jnp.arange(s)[None, :] >= s - rank[:, None]  # (m, s): A's non-zero eigenvalues (eigh: ascending)

    def one(Xc, yc):  # a chunk of prompts
        XS = Xc[:, :, sup]  # (c, m, C, s)
        A = _exclusive_cumsum(XS[..., :, None] * XS[..., None, :])
        bv = _exclusive_cumsum(XS * yc[:, :, None, None])
        yy = _exclusive_cumsum(yc * yc)[:, :, None]
        e, U = jnp.linalg.eigh(A)
        c = jnp.einsum("...ij,...i->...j", U, bv)
        if noise_var > 0:
            lam = noise_var / prior_var
            coef = c / (e + lam)
            logw = -0.5 * (yy - jnp.sum(c * coef, -1)) / noise_var - 0.5 * jnp.sum(jnp.log1p(e / lam), -1)
        else:
            t = top[None, :, None, :]
            inv = jnp.where(t, 1.0 / jnp.where(t, e, 1.0), 0.0)
            coef = c * inv
            rss = jnp.maximum(yy - jnp.sum(c * coef, -1), 0.0)
            logw = -0.5 * jnp.sum(coef * coef, -1) / prior_var - 0.5 * jnp.sum(jnp.where(t, jnp.log(
                jnp.where(t, e, 1.0)), 0.0), -1)
            fits = (rss <= jnp.maximum(100 * label_eps**2 * yy, jnp.min(rss, -1, keepdims=True))) | (
                jnp.arange(m) <= s)[None, :, None]
            logw = jnp.where(fits, logw, -jnp.inf)
        mean = jnp.einsum("...ij,...j->...i", U, coef)  # (c, m, C, s)
        pred = jnp.sum(XS * mean, -1)  # x_{i,S}ᵀ mean_S
        return jnp.sum(jax.nn.softmax(logw, axis=-1) * pred, -1)

    chunk = int(max(1, min(b, budget // (8 * m * len(sup) * (3 * s * s + 4 * s + 2)))))  # A, U, outer; XS, b, c …
    pad = -b % chunk
    Xp = jnp.concatenate([X, jnp.zeros((pad, m, d), X.dtype)]) if pad else X
    yp = jnp.concatenate([y, jnp.zeros((pad, m), y.dtype)]) if pad else y
    out = jax.lax.map(lambda a: one(*a), (Xp.reshape(-1, chunk, m, d), yp.reshape(-1, chunk, m)))
    return out.reshape(-1, m)[:b]


# -------------------------------------------------------------------------------------------- a finite task pool


def finite_pool_weights(X: np.ndarray, y: np.ndarray, pool: np.ndarray, noise_std: float, chunk: int = 256
                        ) -> np.ndarray:
    """The posterior over a finite pool of tasks (Raventós et al.'s dMMSE, arXiv 2306.15063 §2): y_j = w_mᵀx_j + σε
    with w_m uniform over ``pool`` (M, d); from every point of X (b, k, d), y (b, k): p(m | data) (b, M), a log-sum-exp
    softmax of −Σ_j (y_j − w_mᵀx_j)²/(2σ²), ``chunk`` prompts at a time. NumPy, float64."""
    X, y, pool = (np.asarray(a, np.float64) for a in (X, y, pool))
    out = np.empty((X.shape[0], pool.shape[0]))
    for s in range(0, X.shape[0], chunk):
        resid = y[s:s + chunk, :, None] - np.einsum("bid,md->bim", X[s:s + chunk], pool)  # (b, k, M)
        logit = -np.sum(resid**2, axis=1) / (2 * noise_std**2)
        p = np.exp(logit - logit.max(axis=1, keepdims=True))
        out[s:s + chunk] = p / p.sum(axis=1, keepdims=True)
    return out


@float64
def finite_pool(X: jax.Array, y: jax.Array, pool: jax.Array, noise_std: float) -> jax.Array:
    """dMMSE at every prefix: ŷ_i = Σ_m p(m | (x_j, y_j)_{j<i}) w_mᵀx_i (:func:`finite_pool_weights`'s posterior)."""
    resid = y[:, :, None] - jnp.einsum("bid,md->bim", X, pool)  # (b, m, M)
    logit = -_exclusive_cumsum(resid**2) / (2 * noise_std**2)
    return jnp.einsum("bim,bim->bi", jax.nn.softmax(logit, axis=-1), jnp.einsum("bid,md->bim", X, pool))


# ---------------------------------------------------------------------------------------------- decision trees


def decision_tree(X: np.ndarray, y: np.ndarray, depth: int = 4) -> np.ndarray:
    """The exact posterior mean under arXiv 2208.01066's random trees: a full binary tree of ``depth``, internal node
    i splitting on x[c_i] > 0 with c_i uniform over the d coordinates, N(0, 1) leaf values (noiseless).

    Two earlier points share a leaf exactly when their labels are equal (distinct leaves have distinct values almost
    surely), so the likelihood of a split assignment c is 1 when it puts equal labels in one leaf and different ones
    in different leaves, else 0 (the leaf values' density is the same for every such c). The posterior is uniform over
    the consistent c; the query's prediction is the label sharing its leaf, or 0 (the prior mean) if that leaf is
    empty. The sum over the d^(2^depth − 1) assignments factorises node by node:
    Z(node, P) = (1/d) Σ_c [c splits no label group of P] Z(left, P_c⁻) Z(right, P_c⁺), and the predictive sum the
    same with the query routed along. NumPy, per prompt and prefix."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    b, m, d = X.shape
    out = np.zeros((b, m))
    for p in range(b):
        signs = X[p] > 0  # (m, d)
        groups = np.unique(y[p], return_inverse=True)[1]
        for i in range(1, m):
            out[p, i] = _tree_posterior(signs[:i], groups[:i], y[p, :i], signs[i], depth, d)
    return out


def _tree_posterior(signs: np.ndarray, groups: np.ndarray, y: np.ndarray, query: np.ndarray, depth: int,
                    d: int) -> float:
    memo: dict = {}

    def split(idx, c):
        right = signs[idx, c]
        lo, hi = idx[~right], idx[right]
        if np.intersect1d(groups[lo], groups[hi]).size:
            return None  # the split separates two points of one label: not consistent
        return lo, hi

    def z(level, idx):  # (Σ over the subtree's assignments of the likelihood, and of likelihood × prediction)
        key = (level, idx.tobytes())
        if key in memo:
            return memo[key]
        if level == depth:
            memo[key] = 1.0 if len(np.unique(groups[idx])) <= 1 else 0.0
            return memo[key]
        total = 0.0
        for c in range(d):
            parts = split(idx, c)
            if parts is not None:
                total += z(level + 1, parts[0]) * z(level + 1, parts[1])
        memo[key] = total / d
        return memo[key]

    def zq(level, idx):  # the same with the query routed down: Σ likelihood × (the query's leaf label, or 0)
        if level == depth:
            return z(level, idx) * (y[idx[0]] if len(idx) else 0.0)
        total = 0.0
        for c in range(d):
            parts = split(idx, c)
            if parts is None:
                continue
            lo, hi = parts
            total += z(level + 1, lo) * zq(level + 1, hi) if query[c] else zq(level + 1, lo) * z(level + 1, hi)
        return total / d

    idx = np.arange(len(y))
    norm = z(0, idx)
    return zq(0, idx) / norm if norm > 0 else 0.0


# ------------------------------------------------------------------------------------ Monte Carlo: classification


def linear_classification(X: np.ndarray, y: np.ndarray, draws: int = 1 << 16, seed: int = 0,
                          chunk: int = 16) -> MonteCarlo:
    """E[y_i | (x_j, y_j)_{j<i}] = 2 P(sign(wᵀx_i) = 1 | data) − 1 for y = sign(wᵀx), w ~ N(0, I_d)
    (arXiv 2208.01066's linear classification), by rejection sampling: ``draws`` directions from the prior, those
    whose signs agree with every earlier label kept (the posterior is the prior restricted to that cone). Its sign
    is the Bayes classifier (0-1 error). Approximate: se = 2√(max(p(1 − p), 1/n)/n) with n the accepted draws (NaN
    mean and se where none was accepted: rejection thins as k grows, about as the number of sign patterns of k points,
    so it is for small d and k)."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    b, m, d = X.shape
    W = np.random.default_rng([seed, 13]).standard_normal((d, draws))
    mean, se, n = np.zeros((b, m)), np.zeros((b, m)), np.zeros((b, m))
    for s in range(0, b, chunk):
        S = np.einsum("bmd,dn->bmn", X[s:s + chunk], W) > 0  # (c, m, draws)
        agree = S == (y[s:s + chunk, :, None] > 0)
        ok = np.cumprod(np.concatenate([np.ones_like(agree[:, :1]), agree[:, :-1]], 1), axis=1).astype(bool)
        cnt = ok.sum(-1)
        p = np.sum(ok & S, -1) / np.maximum(cnt, 1)
        mean[s:s + chunk] = np.where(cnt > 0, 2 * p - 1, np.nan)
        n = np.maximum(cnt, 1)
        se[s:s + chunk] = np.where(cnt > 0, 2 * np.sqrt(np.maximum(p * (1 - p), 1 / n) / n), np.nan)
        n[s:s + chunk] = cnt
    return MonteCarlo(mean, se, n)


# --------------------------------------------------------------------------------- Monte Carlo: ReLU networks


@float64
def relu_network(X: np.ndarray, y: np.ndarray, hidden: int = 100, scale: float = 1.0, noise_var: float = 0.0,
                 draws: int = 256, seed: int = 0, jitter: float = 1e-9) -> MonteCarlo:
    """E[f(x_i) | data] for f(x) = s √(2/H) vᵀReLU(Ux), U ~ N(0, I), v ~ N(0, I_H) (arXiv 2208.01066's two-layer
    ReLU networks), by importance sampling of U from the prior with v integrated out exactly: given U the labels
    are Gaussian, y ~ N(0, K_U + σ²I) with K_U = (2s²/H) Φ Φᵀ, Φ = ReLU(XUᵀ), and the posterior mean at x_i is
    K_U(x_i, X)(K_U + σ²I)⁻¹y; each draw is weighted by that Gaussian likelihood. Approximate: ``draws`` first
    layers, se the weighted spread over √ESS, ``draws`` in the result the effective sample size (σ² = 0 adds
    ``jitter`` · (mean diag K + s²) to the diagonal)."""
    X, y = (jnp.asarray(a, jnp.float64) for a in (X, y))
    b, m, d = X.shape
    Us = key_draws.normal(jax.random.PRNGKey(seed), (draws, d, hidden), jnp.float64)

    def prompt(Xb, yb):
        def at(i):
            keep = jnp.arange(m) < i

            def per_draw(U):
                F = jax.nn.relu(Xb @ U) * jnp.sqrt(2.0 / hidden) * scale  # (m, H)
                K = F @ F.T
                Kc = jnp.where(keep[:, None] & keep[None, :], K, 0.0)
                reg = noise_var + jitter * (jnp.trace(Kc) / jnp.maximum(i, 1) + scale**2)  # dead units: K = 0
                Kc = Kc + jnp.diag(jnp.where(keep, reg, 1.0))
                L = jnp.linalg.cholesky(Kc)
                yk = jnp.where(keep, yb, 0.0)
                alpha = jax.scipy.linalg.cho_solve((L, True), yk)
                logdet = 2 * jnp.sum(jnp.where(keep, jnp.log(jnp.diagonal(L)), 0.0))
                return -0.5 * yk @ alpha - 0.5 * logdet, jnp.where(keep, K[i], 0.0) @ alpha

            logw, mu = jax.vmap(per_draw)(Us)
            w = jax.nn.softmax(logw)
            mean = w @ mu
            ess = 1.0 / jnp.sum(w * w)
            return mean, jnp.sqrt(w @ (mu - mean) ** 2 / ess), ess

        return jax.vmap(at)(jnp.arange(m))

    mean, se, ess = jax.jit(lambda X, y: jax.lax.map(lambda a: prompt(*a), (X, y)))(X, y)
    return MonteCarlo(np.asarray(mean), np.asarray(se), np.asarray(ess))


# ------------------------------------------------------------------------------------------- by the data's prior


class Predictor(NamedTuple):
    """The Bayes predictor of a data law: ``name`` (its label in tables and figures), ``fn`` (X, y) → (b, m)
    predictions or a :class:`MonteCarlo`, ``exact`` (False: Monte Carlo, marked approximate) and ``per_prompt``
    (costly: evaluated on the first ``data.per_prompt`` held-out prompts, as the zoo's prompt-by-prompt fits)."""

    name: str
    fn: Callable[[jax.Array, jax.Array], jax.Array | MonteCarlo]
    exact: bool
    per_prompt: bool


EXACT, APPROXIMATE = "Bayes (posterior mean)", "Bayes (Monte Carlo, approx.)"


def for_data(data) -> Predictor | None:
    """The Bayes predictor of a data section's prior (arXiv 2208.01066's function classes; the Gaussian prompt law
    with w ~ N(0, I) and Gaussian w), or None where icldyn has none."""
    kind, tau2 = data.kind, getattr(data, "scale", 1.0) ** 2
    if kind in ("linear_regression", "noisy_linear_regression"):
        s2 = getattr(data, "noise_std", 0.0) ** 2
        return Predictor(EXACT, lambda X, y: gaussian_linear(X, y, tau2, s2), True, False)
    if kind == "prompts" and data.w_prior == "identity" and data.w_law == "gaussian":
        return Predictor(EXACT, lambda X, y: gaussian_linear(X, y, 1.0, data.noise_std**2), True, False)
    if kind == "sparse_linear_regression":
        supports(data.d, data.sparsity)  # refused here, before any training, where there are too many
        return Predictor(EXACT, lambda X, y: sparse_linear(X, y, data.sparsity, tau2), True, False)
    if kind == "quadratic_regression":
        return Predictor(EXACT, gaussian_features, True, False)
    if kind == "decision_tree":
        return Predictor(EXACT, lambda X, y: decision_tree(X, y, data.depth), True, True)
    if kind == "linear_classification":
        return Predictor(APPROXIMATE, linear_classification, False, True)
    if kind == "relu_2nn_regression":
        return Predictor(APPROXIMATE, lambda X, y: relu_network(X, y, data.hidden, data.scale), False, True)
    return None
