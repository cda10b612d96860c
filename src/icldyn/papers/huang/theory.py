"""Huang, Cheng, Liang: the exact population engine of the one-layer softmax transformer on feature
tokens, and its phases.

With orthonormal features and E[wwᵀ] = I the loss depends on Q only through the K×K matrix
``scores[k, n] = v_nᵀ Q v_k`` (k: query feature, n: key feature) and on a prompt only through its
feature counts c ~ Multinomial(N, p):

    Attn_n = c_n e^{s_{k,n}} / Σ_m c_m e^{s_{k,m}},   L_k = ½ E_c[(ν Attn_k − 1)² + Σ_{n≠k} (ν Attn_n)²],
    L = Σ_k p_k L_k.

The expectation over counts is exact (enumeration of every count vector with its multinomial weight)
when there are at most ``ENUM_LIMIT`` vectors, else a fixed Monte-Carlo set of count vectors (common
random numbers). GD on Q from 0 stays in span{v_n v_kᵀ} and is GD on ``scores`` with the same step.
"""

from __future__ import annotations

import itertools
from math import comb
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import gammaln

from icldyn.runtime import float64_module

ENUM_LIMIT = 200_000


class CountSet(NamedTuple):
    counts: np.ndarray  # (M, K) feature counts of N context tokens
    weights: np.ndarray  # (M,) probabilities (exact) or 1/M (Monte Carlo); sum to 1


def count_set(p, n_tokens: int, *, samples: int = 20_000, seed: int = 0, limit: int = ENUM_LIMIT) -> tuple[CountSet,
                                                                                                           bool]:
    """Every count vector of Multinomial(N, p) with its probability when C(N+K−1, K−1) ≤ ``limit``
    (returns exact = True), else ``samples`` seeded draws with equal weights (exact = False)."""
    p = np.asarray(p, np.float64)
    K = len(p)
    if comb(n_tokens + K - 1, K - 1) <= limit:
        bars = np.array(list(itertools.combinations(range(n_tokens + K - 1), K - 1)), dtype=np.int64)
        bars = bars.reshape(-1, K - 1)
        edges = np.concatenate([np.full((len(bars), 1), -1), bars, np.full((len(bars), 1), n_tokens + K - 1)], 1)
        counts = np.diff(edges, axis=1) - 1  # stars between bars
        with np.errstate(divide="ignore"):
            logw = gammaln(n_tokens + 1) - gammaln(counts + 1).sum(1) + (counts * np.log(p)).sum(1)
        return CountSet(counts.astype(np.float64), np.exp(logw)), True
    counts = np.random.default_rng([seed, 3]).multinomial(n_tokens, p, size=samples)
    return CountSet(counts.astype(np.float64), np.full(samples, 1.0 / samples)), False


def attention(scores, counts) -> jax.Array:
    """Attn[m, k, n] = c_n e^{s_{k,n}} / Σ_j c_j e^{s_{k,j}}: the attention mass a query v_k puts on the tokens
    equal to v_n, for count vector m (absent features get 0). The exponentials are taken once per score,
    not once per count vector."""
    E = jnp.exp(scores - jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True)))
    num = counts[:, None, :] * E[None]
    return num / jnp.sum(num, axis=-1, keepdims=True)


def _row_sums(scores, counts):
    """E = exp(s − row max), S[m, k] = Σ_j c_mj E_kj and T[m, k] = Σ_j c_mj² E_kj²: two (M, K)×(K, K)
    products, so that Attn_kk = c_k E_kk / S_k and Σ_n Attn_kn² = T_k / S_k² need no (M, K, K) array."""
    E = jnp.exp(scores - jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True)))
    return E, counts @ E.T, (counts * counts) @ (E * E).T


def per_query_loss(scores, counts, weights, nu=1.0, gram=None) -> jax.Array:
    """L_k (K,) = ½ E_c[eᵀ G e], e_n = ν Attn_n − δ_{nk}, G = VᵀE[wwᵀ]V (identity for the training law;
    another G gives the loss under an unseen task law). With G = I, ‖e‖² = ν²Σ_n Attn_n² − 2ν Attn_k + 1."""
    if gram is None:
        E, S, T = _row_sums(scores, counts)
        own = counts * jnp.diagonal(E)[None] / S
        return 0.5 * weights @ (nu * nu * T / (S * S) - 2.0 * nu * own + 1.0)
    err = nu * attention(scores, counts) - jnp.eye(scores.shape[0], dtype=scores.dtype)[None]
    return 0.5 * weights @ jnp.einsum("mkn,nl,mkl->mk", err, gram, err)


def expected_attention(scores, counts, weights) -> jax.Array:
    """E_c[Attn_k] (K,): the target attention of each query feature."""
    E, S, _ = _row_sums(scores, counts)
    return weights @ (counts * jnp.diagonal(E)[None] / S)


def population_loss(scores, p, n_tokens: int, nu=1.0, counts: CountSet | None = None) -> jax.Array:
    """L(Q) = Σ_k p_k L_k with ``scores[k, n] = v_nᵀ Q v_k`` (K×K), feature probabilities p and N context
    tokens; exact by enumeration of the counts when feasible, else Monte Carlo over counts."""
    cs = counts if counts is not None else count_set(p, n_tokens)[0]
    return jnp.asarray(p) @ per_query_loss(scores, jnp.asarray(cs.counts), jnp.asarray(cs.weights), nu)


def scores_of(Q, V) -> jax.Array:
    """scores[k, n] = v_nᵀ Q v_k = (VᵀQV)ᵀ[k, n]."""
    return (V.T @ Q @ V).T


def unavoidable_loss(p, n_tokens: int) -> float:
    """L_low = ½ Σ_k p_k (1 − p_k)^N: the loss of prompts whose query feature is absent."""
    p = np.asarray(p, np.float64)
    return float(0.5 * np.sum(p * (1 - p) ** n_tokens))


class OptimalLoss(NamedTuple):
    value: float  # L* = Σ_k p_k L*_k
    per_query: np.ndarray  # L*_k (K,)
    off_logits: np.ndarray  # (K, K) the minimising off-target logits b_{k,n} (diagonal unused, 0)
    unavoidable: float  # L_low = ½ Σ_k p_k (1 − p_k)^N, the part of L* from the absent query feature alone


def optimal_loss(p, n_tokens: int, samples: int = 20_000) -> OptimalLoss:
    """L* = inf_Q L(Q), the loss the theorems converge to (Thms 3.1-3.2: L* = Θ(e^{−poly K})).

    With A_k → ∞ every prompt that holds its query feature is answered exactly. One that does not (c_k = 0,
    probability (1 − p_k)^N) spreads its attention over the other features, Attn_n = c_n e^{b_n} / Σ_m c_m e^{b_m},
    at loss ½(1 + Σ_n Attn_n²). Hence L*_k = ½(1 − p_k)^N (1 + min_b E[Σ_n Attn_n² | c_k = 0]), where the counts
    given c_k = 0 are Multinomial(N, p_{−k}/(1 − p_k)) (enumerated, or ``samples`` draws) and the K − 1 off-target
    logits b are minimised by L-BFGS with the exact gradient; L* = Σ_k p_k L*_k ≥ L_low."""
    from scipy import optimize

    p = np.asarray(p, np.float64)
    K = len(p)
    per, logits = np.zeros(K), np.zeros((K, K))
    done: dict[tuple, int] = {}  # features with the same law of the others (balanced, or the p_k ≥ 2 of Thm 3.2)
    for k in range(K):
        if K == 1:
            break
        q = np.delete(p, k)
        key = (round(p[k], 14), tuple(np.round(q, 14)))
        if key in done:
            per[k], logits[k] = per[done[key]], logits[done[key]]
            continue
        done[key] = k
        cs, _ = count_set(q / q.sum(), n_tokens, samples=samples, seed=0)
        c, w = jnp.asarray(cs.counts), jnp.asarray(cs.weights)

        def spread(b, c=c, w=w):  # E[Σ_n Attn_n²] over the counts, attention weights c_n e^{b_n}
            a = c * jnp.exp(b - jnp.max(b))
            return w @ (jnp.sum(a * a, axis=1) / jnp.sum(a, axis=1) ** 2)

        f = jax.jit(jax.value_and_grad(spread))
        res = optimize.minimize(lambda b: tuple(np.asarray(x, np.float64) for x in f(jnp.asarray(b))),
                                np.zeros(K - 1), jac=True, method="L-BFGS-B", options={"gtol": 1e-13})
        per[k] = 0.5 * (1 - p[k]) ** n_tokens * (1 + res.fun)
        logits[k, np.arange(K) != k] = res.x - res.x.max()
    return OptimalLoss(float(p @ per), per, logits, unavoidable_loss(p, n_tokens))


def first_step(steps, mask) -> int | None:
    idx = np.nonzero(np.asarray(mask))[0]
    return int(np.asarray(steps)[idx[0]]) if len(idx) else None


def balanced_phases(steps, attn, level: float = 0.5) -> dict:
    """Thm 3.1: phase I (target-feature growth) ends when E[Attn_k] reaches ``level``; phase II
    (convergence) follows. Returns the boundary (None if not reached)."""
    return {"phase_I_end": first_step(steps, np.asarray(attn) >= level)}


def underrepresented_phases(steps, A, B_dom, attn, level: float = 0.5) -> dict:
    """Thm 3.2's four phases of an under-represented feature k, from its logged curves:

    With r(t) = (−dB_{k,1}/dt) / (dA_k/dt), the rate of dominant suppression over target growth, and
    r₀ = r(0) (> 1 when suppression leads; exactly :func:`initial_ratio`):

    I   dominant suppression: ends when r has fallen to √r₀ (half-way from r₀ to 1 on a log scale);
    II  switch of leading influence: ends when r ≤ 1 (A_k's growth overtakes B_{k,1}'s decline);
    III target growth: ends when E[Attn_k] reaches ``level`` (1 − Attn_k = Ω(1) before);
    IV  convergence.

    The paper's own text gives II and III by which weight leads and whether 1 − Attn_k = Ω(1); I's end
    condition (√r₀) is this library's, since the paper's was not recovered. Each boundary is the
    first step meeting its own condition over the whole curve, not searched after the previous one.
    Returns the three boundaries (None where not reached), r₀ and whether the phases came in order."""
    steps = np.asarray(steps, float)
    rise = np.gradient(np.asarray(A, float), steps)
    fall = -np.gradient(np.asarray(B_dom, float), steps)
    ratio = fall / np.maximum(rise, 1e-300)
    r0 = float(ratio[0])
    # each boundary from its own condition over the whole curve, so that their order is a finding
    t1 = first_step(steps, ratio <= np.sqrt(max(r0, 1.0))) if r0 > 1 else None
    t2 = first_step(steps, ratio <= 1.0)
    t3 = first_step(steps, np.asarray(attn) >= level)
    return {"phase_I_end": t1, "phase_II_end": t2, "phase_III_end": t3, "initial_ratio": r0,
            "ordered": None not in (t1, t2, t3) and 0 < t1 < t2 < t3}


def epsilon_times(steps, loss, A, B, optimal: float, K: int, n_tokens: int, eps) -> list[dict]:
    """Theorem 3.1 (balanced) along a GD curve, per ε (those reached): the ε-time T_ε, the first logged step with
    L − L* ≤ ε (the paper's T* = O(log(K)K²/η + K log(K ε^{−½})/(ηε))); the target weight A_k(T_ε) against
    Stage II's bound O(log(K/ε)) (ratio A_k/log(K/ε)); and the attention concentration at T_ε, the 99th
    percentile over prompts with x_query = v_k of 1 − Attn_k (exact over the counts), against O(ε^½).
    A, B: the target and off-target weights s_kk, s_kn (balanced: one of each)."""
    steps, gap = np.asarray(steps), np.asarray(loss) - optimal
    out = []
    for e in eps:
        t = first_step(steps, gap <= e)
        if t is None:
            continue
        i = int(np.nonzero(steps == t)[0][0])
        out.append({"eps": float(e), "t": t, "A": float(A[i]), "A_over_log": float(A[i] / np.log(K / e)),
                    "q99_miss_over_sqrt_eps": miss_quantile(float(A[i] - B[i]), K, n_tokens, 0.99) / np.sqrt(e)})
    return out


def miss_quantile(logit: float, K: int, n_tokens: int, q: float) -> float:
    """The q-quantile over prompts of 1 − Attn_k for a query v_k, balanced p = 1/K, target logit minus
    off-target logit ``logit``: 1 − Attn_k = (N − c)/(N − c + c e^{logit}) with c ~ Binomial(N, 1/K), exact."""
    from scipy.stats import binom

    c = np.arange(n_tokens + 1)
    miss = (n_tokens - c) / (n_tokens - c + c * np.exp(logit))
    order = np.argsort(miss)
    cdf = np.cumsum(binom.pmf(c[order], n_tokens, 1 / K))
    return float(miss[order][np.searchsorted(cdf, q)])


def balanced_reduced_loss(u, K: int, n_tokens: int) -> jax.Array:
    """Balanced p_k = 1/K along GD from Q = 0: every row of the scores is s_kk = A, s_kn = B (exchangeability),
    and the loss depends on u = A − B alone (softmax is shift invariant), exactly:

    .. math:: ℓ(u) = ½ Σ_c \\mathrm{Bin}(c; N, 1/K)\\,[(1 − c e^u/Z)² + E[Σ_{n≠k} c_n² | c]/Z²],  Z = c e^u + N − c,

    c = c_k the count of the query feature; given c the other N − c tokens are Multinomial over K − 1 equal
    features, and the loss is linear in Σ_{n≠k} c_n², so its conditional mean suffices."""
    from scipy.stats import binom

    c = np.arange(n_tokens + 1.0)
    m = n_tokens - c
    q = 1.0 / (K - 1)
    sq = (K - 1) * (m * q * (1 - q) + (m * q) ** 2)  # E[Σ_{n≠k} c_n² | c_k = c]
    w = binom.pmf(c, n_tokens, 1.0 / K)
    eu = jnp.exp(u)
    Z = c * eu + m
    return 0.5 * jnp.sum(w * ((1 - c * eu / Z) ** 2 + sq / Z**2))


def balanced_gd_losses(K: int, n_tokens: int, steps: int, eta: float = 1.0) -> np.ndarray:
    """L(Q^{(t)}), t = 0 … steps, of population GD from Q = 0 with balanced features (Theorem 3.1 of Huang, Cheng,
    Liang, arXiv:2310.05249), exact: :func:`balanced_gd`'s losses."""
    return balanced_gd(K, n_tokens, steps, eta)[0]


def balanced_gd(K: int, n_tokens: int, steps: int, eta: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(L(Q^{(t)}), u(t) = A − B), t = 0 … steps, of population GD from Q = 0 with balanced features, exact at any N:
    GD on the K×K scores moves A by −η ∂L/∂s_kk = −η ℓ'(u)/K and B by −η ∂L/∂s_kn = +η ℓ'(u)/(K(K − 1)), so
    u = A − B follows u ← u − η ℓ'(u)/(K − 1) (:func:`balanced_reduced_loss`; the same curve as the K×K engine,
    tests/test_huang.py). One scalar recursion over N + 1 terms: 10⁶ steps take a few seconds."""
    grad = jax.grad(lambda u: balanced_reduced_loss(u, K, n_tokens))

    def step(u, _):
        u = u - eta * grad(u) / (K - 1)
        return u, (balanced_reduced_loss(u, K, n_tokens), u)

    _, (L, u) = jax.jit(lambda: jax.lax.scan(step, jnp.float64(0.0), None, length=steps))()
    return np.r_[float(balanced_reduced_loss(0.0, K, n_tokens)), np.asarray(L)], np.r_[0.0, np.asarray(u)]


def epsilon_time_asymptote(K: int, eta: float = 1.0) -> float:
    """lim_{ε→0} ε·T_ε = (K − 1)/(4η) along balanced GD (:func:`balanced_gd_losses`): for large u,
    ℓ(u) − L* ≈ C e^{−2u} (every prompt with c_k > 0 misses by O(e^{−u})), so u' = 2ηC e^{−2u}/(K − 1), e^{2u} ≈
    4ηCt/(K − 1) and ℓ − L* ≈ (K − 1)/(4ηt), whatever C: T_ε ∝ ε⁻¹, the rate of Thm 3.1's K log(Kε^{−½})/(ηε)
    without its log."""
    return (K - 1) / (4 * eta)


def epsilon_times_of(losses, optimal: float, eps) -> tuple[np.ndarray, np.ndarray]:
    """T_ε = the first t with L(t) − L* ≤ ε, for each ε reached (losses[t] at t = 0, 1, …): (ε, T_ε)."""
    gap = np.asarray(losses) - optimal
    reached = [(e, int(np.argmax(gap <= e))) for e in eps if np.any(gap <= e)]
    return np.array([e for e, _ in reached]), np.array([t for _, t in reached], float)


def initial_ratio(p, n_tokens: int, k: int = 1, dominant: int = 0) -> float:
    """r₀ = |β_{k,1}|/α_k at Q = 0 (arXiv:2310.05249, Theorem 3.2's phase I: the dominant feature's suppression over
    the target's growth,
    under-represented query k, dominant feature 1 = index ``dominant``), exact at finite N. At Q = 0 the attention
    is the count share, Attn_n = c_n/N, so with α_k = p_k E[Attn_k((1 − Attn_k)² + Σ_{m≠k} Attn_m²)] and
    β_{k,1} = p_k E[Attn_1(Σ_{m≠k} Attn_m² − Attn_1 − Attn_k(1 − Attn_k))] both are polynomial in the counts:
    enumerated over (c_k, c_1) ~ Multinomial, the other features' Σ c_m² by its conditional mean (exact, linear).
    Requires the other K − 2 features to share one probability (Thm 3.2's imbalanced law)."""
    from scipy.stats import multinomial

    p = np.asarray(p, np.float64)
    K, N = len(p), n_tokens
    rest = np.delete(p, [k, dominant])
    if len(rest) and not np.allclose(rest, rest[0]):
        raise ValueError(f"initial_ratio needs the other features at one probability. Got {rest} instead.")
    ck, c1 = (a.ravel() for a in np.meshgrid(np.arange(N + 1.0), np.arange(N + 1.0), indexing="ij"))
    keep = ck + c1 <= N
    ck, c1 = ck[keep], c1[keep]
    m = N - ck - c1
    w = multinomial.pmf(np.c_[ck, c1, m], N, [p[k], p[dominant], max(1 - p[k] - p[dominant], 0.0)])
    q = 1.0 / max(K - 2, 1)
    sq_rest = (K - 2) * (m * q * (1 - q) + (m * q) ** 2) if K > 2 else 0.0 * m
    a_k, a_1 = ck / N, c1 / N
    spread = (c1**2 + sq_rest) / N**2  # Σ_{m≠k} Attn_m²
    alpha = w @ (a_k * ((1 - a_k) ** 2 + spread))
    beta = w @ (a_1 * (spread - a_1 - a_k * (1 - a_k)))
    return float(abs(beta) / alpha)


def initial_ratio_limit(p, k: int = 1, dominant: int = 0) -> float:
    """r₀ as N → ∞ (Attn_n → p_n, every term kept): |p_1(Σ_{m≠k} p_m² − p_1 − p_k(1 − p_k))| /
    (p_k((1 − p_k)² + Σ_{m≠k} p_m²)). The approximation (K − 1)/5 for p₁ = ½ keeps only the leading terms in 1/K."""
    p = np.asarray(p, np.float64)
    spread = np.sum(np.delete(p, k) ** 2)
    return float(abs(p[dominant] * (spread - p[dominant] - p[k] * (1 - p[k]))) / (p[k] * ((1 - p[k]) ** 2 + spread)))


def loglog_fit(x, y) -> tuple[float, float]:
    """Least-squares slope of log y on log x and its standard error."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    X = np.c_[np.ones_like(lx), lx]
    coef, res, *_ = np.linalg.lstsq(X, ly, rcond=None)
    dof = max(len(lx) - 2, 1)
    sigma2 = float(np.sum((ly - X @ coef) ** 2)) / dof
    return float(coef[1]), float(np.sqrt(sigma2 * np.linalg.inv(X.T @ X)[1, 1]))


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
