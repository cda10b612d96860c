"""Known answers of the model-against-algorithm metrics (icldyn.components.agreement): each is zero (or one) against
the algorithm the learner is, and not against a swapped reference."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from icldyn.components import agreement, baselines
from icldyn.components.linear_attention import LinearTransformer
from icldyn.components.prompts import Prompts, PromptsData, make_task, sample_prompts

D, N, B, K = 3, 10, 200, 6  # one small shape for every test


@pytest.fixture(scope="module")
def setting():
    data = PromptsData(kind="prompts", d=D, n=N, covariance="eigenvalues", eigenvalues=[2.0, 1.0, 0.25],
                       w_prior="identity")
    task = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), make_task(data, 0))
    p = sample_prompts(task, key=jax.random.PRNGKey(1), batch=B, n=N)
    probes = np.asarray(jax.random.normal(jax.random.PRNGKey(2), (B, K, D), jnp.float64)) @ np.asarray(task.sigma_sqrt)
    G = baselines.optimal_preconditioner(np.asarray(task.sigma), N)  # Theorem 1's Γ* (arXiv 2306.00297)
    algs = {"pgd_star": lambda X, y: baselines.preconditioned_gd(X, y, [G.T]),
            "gd": lambda X, y: baselines.preconditioned_gd(X, y, [0.5 * np.eye(D)]),
            "ols": baselines.ols}
    return p, agreement.reference(p, probes, algs), G


def _ols(q: Prompts):
    """A learner that *is* least squares, in JAX."""
    Xc, yc = q.X[:, :-1], q.y[:, :-1]
    w = jnp.linalg.solve(jnp.einsum("bip,biq->bpq", Xc, Xc), jnp.einsum("bid,bi->bd", Xc, yc)[..., None])[..., 0]
    return jnp.einsum("bd,bd->b", w, q.X[:, -1])


@pytest.fixture(scope="module")
def measured(setting):
    """Every learner's metrics in one compiled program: Theorem 1's optimum, OLS, and ŷ = ⟨w, x⟩ + ‖x‖² (nonlinear in
    the query: its implicit weights and sensitivity)."""
    _, ref, G = setting
    model = LinearTransformer(d=D, layers=1, parameterization="sparse")
    w = jnp.asarray(ref.weights["ols"])

    def quad(q: Prompts):  # q: B prompts, or B·K (context-major: with_queries)
        return jnp.einsum("bd,bd->b", jnp.repeat(w, q.X.shape[0] // B, 0), q.X[:, -1]) + jnp.sum(q.X[:, -1] ** 2, -1)

    @jax.jit
    def run(ref, A):
        star = agreement.agreement(lambda q: model.predict({"A": A}, model.prepare(q)), ref)
        return star, agreement.agreement(_ols, ref), (agreement.implicit_weights(quad, ref.prompts, ref.probes),
                                                      agreement.sensitivity(quad, ref.prompts))

    star, ols, quad_out = run(ref, jnp.asarray(G.T)[None, None])
    floats = lambda m: {k: float(v) for k, v in m.items()}
    return floats(star), floats(ols), quad_out


def test_algorithm_weights_reproduce_the_algorithms_predictions(setting):
    p, ref, _ = setting
    X, y = np.asarray(p.X), np.asarray(p.y)
    for name, alg in (("ols", baselines.ols), ("gd", lambda X, y: baselines.preconditioned_gd(X, y, [0.5 * np.eye(D)]))):
        w = np.asarray(ref.weights[name])
        np.testing.assert_allclose(np.einsum("bd,bd->b", w, X[:, -1]), alg(X, y), rtol=1e-10, atol=1e-12)


def test_theorem1_optimum_is_one_step_of_preconditioned_gd(measured):
    """Ahn et al.'s one-layer model at Theorem 1's optimum (A = Γ*) has zero SPD, ILWD and sensitivity difference
    and cosine 1 against one PGD step with Γ*, and not against GD or OLS (the reference swapped)."""
    m = measured[0]
    assert m["spd_pgd_star"] < 1e-20 and m["ilwd_pgd_star"] < 1e-20 and m["sdiff_pgd_star"] < 1e-9
    assert abs(m["cos_pgd_star"] - 1) < 1e-12
    for other in ("gd", "ols"):
        assert m[f"spd_{other}"] > 1e-2 and m[f"ilwd_{other}"] > 1e-2 and m[f"sdiff_{other}"] > 1e-1
        assert m[f"cos_{other}"] < 0.999


def test_a_model_that_is_ols(measured):
    """A learner that computes least squares: zero SPD / ILWD to OLS, cosine 1; not to one step of GD."""
    m = measured[1]
    assert m["spd_ols"] < 1e-20 and m["ilwd_ols"] < 1e-18 and abs(m["cos_ols"] - 1) < 1e-12
    assert m["spd_gd"] > 1e-2 and m["ilwd_gd"] > 1e-2 and m["cos_gd"] < 0.999


def test_implicit_weights_and_sensitivity_of_a_learner_nonlinear_in_the_query(setting, measured):
    """ŷ = ⟨w, x⟩ + ‖x‖²: ILWD's weights are the least-squares fit of its own probe predictions (checked against
    NumPy's lstsq for one context) and its sensitivity at the query is w + 2x."""
    p, ref, _ = setting
    w_fit, sens = measured[2]
    w, probes = np.asarray(ref.weights["ols"]), np.asarray(ref.probes)
    w0 = np.linalg.lstsq(probes[0], w[0] @ probes[0].T + np.sum(probes[0] ** 2, -1), rcond=None)[0]
    np.testing.assert_allclose(np.asarray(w_fit)[0], w0, rtol=1e-8)
    np.testing.assert_allclose(sens, w + 2 * np.asarray(p.X[:, -1]), rtol=1e-10)
