"""Huang et al.: the exact population engine, the Monte-Carlo trainer, phases. `icldyn verify --paper huang
--quick` must pass and its runs have the numbers of docs/results/huang.md (:func:`check_verify_runs`, run by
tests/test_python_api.py on the documented example's verify run)."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from icldyn.papers.huang import theory as huang
from icldyn.plugins import get
from icldyn.runner import execute


def _summary(store, name):
    import json

    runs = [json.loads((d / "summary.json").read_text()) for d in sorted(store.glob(f"*-{name}-*"))]
    return [s for s in runs if s["experiment"] == name][-1]  # huang-imbalanced-large-n matches *-huang-imbalanced-*


HUANG_CLAIMS = ("vs Monte Carlo over prompts", "finite differences", "L* = inf L computed", "tracks the exact engine",
                "≥ 0.9", "dominant feature reaches", "four phases", "outside the assumptions: N = 64, K³ = 64",
                "T*(ε) ∝ ε⁻¹ as ε → 0", "ε·T_ε → (K − 1)/(4η)", "Stage II: A_k(T_ε)",
                "attention concentrates", "tracks exact population GD at N = 640 = 10 K³",
                "(K=4, N=640): every E[Attn_k]", "(K=8, N=5120, p₁=0.5): the dominant feature",
                "(K=8, N=5120, p₁=0.5): four phases")


def check_verify_runs(store: Path) -> None:
    """The SPEC numbers of the runs `icldyn verify --paper huang --quick` wrote into ``store``. Called by
    tests/test_python_api.py on the runs of docs/python.md's `icldyn.verify("huang", quick=True)` (one verify run
    for both, to keep the suite under 5 minutes), after it checked that every claim of HUANG_CLAIMS passed."""
    s = _summary(store, "huang-imbalanced")
    assert s["assumptions_not_met"] == ["N = 512, K³ = 512 (N/K³ = 1): Theorems 3.1-3.2 assume N ≫ K³ "
                                        "(flagged below 10 K³)"]
    feats = s["points"][0]["seeds"][0]["features"]
    # SPEC §2.6, K = 8, N = 512, p₁ = ½, η = 1: dominant converged at t = 520, the others at 3830;
    # initial |ΔB_k1|/ΔA_k = 1.66; switch of leading influence at t ≈ 50; E[Attn_k] ≥ ½ at t = 210
    assert feats["0"]["converged_at"] == pytest.approx(520, abs=20)
    for k, f in feats.items():
        if k == "0":
            continue
        assert f["converged_at"] == pytest.approx(3830, rel=0.03)
        assert f["phases"]["initial_ratio"] == pytest.approx(1.66, abs=0.05)
        assert f["phases"]["phase_II_end"] == pytest.approx(50, abs=10)
        assert f["phases"]["phase_III_end"] == pytest.approx(210, abs=10)
    # balanced: the Monte-Carlo trainer tracks the exact engine; t_½
    s = _summary(store, "huang-balanced")
    ex = next(p for p in s["points"] if p["oracle"] == "population")
    assert ex["exact_counts"] and ex["seeds"][0]["t_half"] == pytest.approx(18, abs=5)  # SPEC: K = 4 → 18
    assert s["tracking"]["A"]["max_rel_gap"] < 0.02
    # L* (theory.optimal_loss) beside L_low: 1.344 L_low for K = 4, N = 64, balanced
    assert ex["optimal_loss"] == pytest.approx(1.344 * ex["unavoidable_loss"], rel=1e-3)
    # N = 10 K³: inside the assumptions; the sampled-counts engine on exact GD's curve, the imbalanced phases
    big = _summary(store, "huang-balanced-large-n")
    assert big["assumptions_not_met"] == [] and big["exact_gd"]["max_rel_gap"] < 1e-4
    imb = _summary(store, "huang-imbalanced-large-n")
    assert imb["assumptions_not_met"] == [] and imb["points"][0]["N"] == 10 * 8**3


@pytest.mark.e2e
def test_phase_scaling_exponent(session_store):
    cfg = get("huang-phase-scaling").config({"grid": {"data.features": [4, 6, 8, 12]}}, quick=True)
    rd, s = execute(cfg, session_store)
    assert [a.split(":")[0] for a in s["assumptions_not_met"]] == [f"data.features={K}" for K in (4, 6, 8, 12)]
    assert "Outside the paper's assumptions" in (rd.path / "report.md").read_text()
    lo, hi = s["exponent_ci"]
    # SPEC §2.6: t_½ ∝ K² (1.13 K² … 1.44 K² for K = 4…32)
    assert lo <= s["exponent"] <= hi and 1.6 < s["exponent"] < 2.4, s["t_half"]


def test_sampled_counts_gradient_is_the_population_gradient_in_expectation():
    """The sampled-counts engine's own batches and loss (``train.oracle = counts``, built by the plug-in) against the
    exact engine (every count vector with its multinomial weight): the mean of 200 batches' gradients is the exact
    gradient within 4 s.e. per entry; the same batches with the counts of the wrong law (uniform p) are not."""
    import jax
    import jax.numpy as jnp

    from icldyn.papers.huang.problem import build
    from icldyn.runtime import jit_once

    cfg = get("huang-balanced-large-n").config({"data": {"n": 9, "features": 3, "d": 3, "p_dominant": 0.5},
                                                 "train": {"batch": 256}}, quick=True)
    setup = build(cfg)
    task = jax.tree.map(lambda a: a[0], setup.tasks)
    p, K = np.asarray(task.p), 3
    s = {"s": jnp.asarray(np.random.default_rng(0).normal(0, 1, (K, K)))}
    cs, exact = huang.count_set(p, 9)
    grad = jax.jit(jax.grad(setup.problem.loss))
    want = np.asarray(grad(s, (jnp.asarray(cs.counts), jnp.asarray(cs.weights), jnp.asarray(p)))["s"])
    batches = jit_once(jax.vmap(lambda k: setup.problem.sample(task, k)))(jax.random.split(jax.random.PRNGKey(1), 200))
    assert batches[0].shape == (200, 256, K) and np.all(np.asarray(batches[0]).sum(-1) == 9)

    def z(batches):
        g = np.asarray(jax.vmap(lambda b: grad(s, b))(batches)["s"])
        return np.max(np.abs(g.mean(0) - want) / (g.std(0, ddof=1) / np.sqrt(len(g)) + 1e-300))

    assert exact and p[0] > 1.5 * p[1] and z(batches) < 4.0
    uniform = jit_once(jax.vmap(lambda k: jax.random.multinomial(k, 9, jnp.full((256, K), 1 / K), dtype=jnp.float64)))(
        jax.random.split(jax.random.PRNGKey(1), 200))
    assert z((uniform, *batches[1:])) > 10.0


def test_count_set_enumeration_is_a_distribution():
    cs, exact = huang.count_set([0.5, 0.3, 0.2], 6)
    assert exact and len(cs.counts) == 28 and np.all(cs.counts.sum(1) == 6)
    assert cs.weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert (cs.weights @ cs.counts) == pytest.approx(6 * np.array([0.5, 0.3, 0.2]))
    big, exact = huang.count_set(np.full(8, 1 / 8), 512, samples=500)
    assert not exact and big.counts.shape == (500, 8)


def test_zero_scores_loss_closed_form():
    # at Q = 0 with a single feature present the attention is exact: L_k = ½(1 − c_k/N)² + ½Σ(c_n/N)²
    cs, _ = huang.count_set([0.5, 0.5], 3)
    L = huang.population_loss(jnp.zeros((2, 2)), [0.5, 0.5], 3)
    c = cs.counts / 3
    expect = 0.5 * cs.weights @ ((1 - c[:, 0]) ** 2 + c[:, 1] ** 2)
    assert float(L) == pytest.approx(float(expect), abs=1e-12)


def test_phase_detection_on_synthetic_curves():
    t = np.arange(0, 400, 10.0)
    A = 0.01 * t + 1e-4 * t**2  # growth accelerating
    B = -0.03 * t * np.exp(-t / 150)  # suppression decelerating
    attn = 1 / (1 + np.exp(-(t - 250) / 30))
    ph = huang.underrepresented_phases(t, A, B, attn)
    assert ph["ordered"] and ph["initial_ratio"] > 1 and ph["phase_III_end"] == 250


def test_assumption_report_inside_and_outside():
    from icldyn.papers.huang.recipes import assumptions_not_met

    inside = get("huang-balanced").config({"data": {"features": 4, "d": 4, "n": 640}}, quick=True)
    assert assumptions_not_met(inside) == []
    outside = get("huang-balanced").config({"data": {"n": 639}, "train": {"oracle": "sampled"},
                                            "model": {"train_value": True}}, quick=True)
    got = assumptions_not_met(outside)
    assert len(got) == 3 and "N/K³ = 9.98" in got[0] and "ν = 1" in got[1] and "population" in got[2]
    odd = get("huang-balanced").config({"data": {"features": 4, "d": 4, "n": 640,
                                                 "feature_probs": [0.04, 0.32, 0.32, 0.32]}, "train": {"lr": 2.0}},
                                       quick=True)
    got = assumptions_not_met(odd)
    assert len(got) == 2 and "neither balanced" in got[0] and "η = 2" in got[1]


def test_optimal_loss_claim_fails_for_a_wrong_l_star():
    from icldyn.papers.huang import claims, theory

    assert claims.optimal_loss_claim().passed  # (also in verify)
    low = lambda p, N: theory.optimal_loss(p, N)._replace(value=theory.unavoidable_loss(p, N))  # noqa: E731
    double = lambda p, N: theory.optimal_loss(p, N)._replace(value=2 * theory.optimal_loss(p, N).value)  # noqa: E731
    assert not claims.optimal_loss_claim(low).passed  # L_low is never reached: the attention term is missing
    assert not claims.optimal_loss_claim(double).passed  # undercut


def test_epsilon_claims_fail_for_a_growing_weight_or_spreading_attention():
    from icldyn.papers.huang.claims import epsilon_claims
    from icldyn.papers.huang.results import EpsilonTime

    eps = 0.04 * 2.0 ** -np.arange(4)
    good = [EpsilonTime(eps=e, t=int(10 / e**0.7), A=0.4 * np.log(4 / e), A_over_log=0.4,
                        q99_miss_over_sqrt_eps=2.0) for e in eps]
    assert all(c.passed for c in epsilon_claims(good, 4, 64))
    grows = [x.model_copy(update={"A_over_log": 0.01 / x.eps}) for x in good]  # A_k ∝ 1/ε, not O(log(K/ε))
    spreads = [x.model_copy(update={"q99_miss_over_sqrt_eps": 0.05 / x.eps}) for x in good]  # 1 − Attn_k ≫ ε^½
    assert [c.passed for c in epsilon_claims(grows, 4, 64)] == [False, True]
    assert [c.passed for c in epsilon_claims(spreads, 4, 64)] == [True, False]


def test_balanced_reduced_gd_is_the_engine_and_its_epsilon_time_claims_fail_off_the_asymptote():
    """theory.balanced_gd_losses (u = A − B) is the K×K engine's GD curve; Thm 3.1's ε-time claims pass on it (deep
    curve, ε → 1.2e-6) and fail for a T_ε ∝ ε^-½ profile, an ε⁻² one, one levelling off at the quick run's 0.7, and
    a wrong constant (issue #29)."""
    import jax

    from icldyn.papers.huang.claims import DEEP_EPS, epsilon_time_claims

    p, N = np.full(4, 0.25), 64
    cs, exact = huang.count_set(p, N)
    assert exact
    f = jax.jit(lambda s: jnp.asarray(p) @ huang.per_query_loss(s, jnp.asarray(cs.counts), jnp.asarray(cs.weights)))
    g = jax.jit(jax.grad(f))
    s, engine = jnp.zeros((4, 4)), []
    for _ in range(31):
        engine.append(float(f(s)))
        s = s - g(s)
    assert np.max(np.abs(np.array(engine) - huang.balanced_gd_losses(4, N, 30))) <= 1e-12

    losses = huang.balanced_gd_losses(4, N, 650_000)
    eps, T = huang.epsilon_times_of(losses, huang.optimal_loss(p, N).value, DEEP_EPS)
    assert len(eps) == len(DEEP_EPS) and [c.passed for c in epsilon_time_claims(eps, T, 4)] == [True, True]
    assert T[:4].tolist() == [53, 84, 137, 232]  # the audit's 12 000-step curve: local slopes 0.66 → 0.71 → 0.76 …
    half = 50 / np.sqrt(eps)  # T_ε ∝ ε^-½
    steep = 0.75 / eps**2  # T_ε ∝ ε⁻²
    level = 10 / eps**0.7  # the quick run's pre-asymptotic slope, held
    assert [c.passed for c in epsilon_time_claims(eps, half, 4)][0] is False
    assert [c.passed for c in epsilon_time_claims(eps, steep, 4)][0] is False
    assert [c.passed for c in epsilon_time_claims(eps, level, 4)][0] is False
    assert epsilon_time_claims(eps, T * 4 / 3, 4)[1].passed is False  # ε·T_ε → K/(4η) instead of (K − 1)/(4η)


def test_initial_ratio_is_the_engine_gradient_at_zero():
    """r₀ = |β_{k,1}|/α_k at Q = 0 (Thm 3.2, phase I): theory.initial_ratio equals the exact engine's gradient ratio;
    SPEC's (K − 1)/5 drops terms (docs/results/huang.md, "Where SPEC is wrong")."""
    import jax

    K, N = 4, 64
    p = np.r_[0.5, np.full(K - 1, 0.5 / (K - 1))]
    cs, exact = huang.count_set(p, N)
    g = jax.grad(lambda s: jnp.asarray(p) @ huang.per_query_loss(s, jnp.asarray(cs.counts),
                                                                 jnp.asarray(cs.weights)))(jnp.zeros((K, K)))
    assert exact and huang.initial_ratio(p, N) == pytest.approx(float(abs(g[1, 0]) / abs(g[1, 1])), rel=1e-12)
    p8 = np.r_[0.5, np.full(7, 0.5 / 7)]
    assert huang.initial_ratio(p8, 512) == pytest.approx(1.7462, abs=1e-4)  # SPEC: (K − 1)/5 = 1.4
    assert huang.initial_ratio_limit(p8) == pytest.approx(1.75)
