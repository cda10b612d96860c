"""Goel et al.'s manifold claims (issue #16): the exact P-projection against a brute-force search, and every new
verify claim failing when the quantity it checks is perturbed (a claim that cannot fail checks nothing)."""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from scipy import optimize

from icldyn.papers.goel import claims as C
from icldyn.papers.goel import theory


def _brute_distance(A, B, M, sigma, starts: int = 12) -> float:
    """min over J ∈ O(d) of ‖θ − θ*(J)‖_P, θ*(J) written from SPEC §1.5 in NumPy, by BFGS over J = J₀ exp(skew)
    from random starts in both components of O(d) (QR of a Gaussian stays in one: every other start reflected)."""
    A, B, M, sigma = (np.asarray(x) for x in (A, B, M, sigma))
    d = sigma.shape[0]
    s_half = np.real(sl.sqrtm(sigma))
    s_mhalf = np.linalg.inv(s_half)
    U, g, Vt = np.linalg.svd(M @ s_half, full_matrices=False)
    rows, cols = np.triu_indices(d, 1)

    def dist2(w, J0):
        S = np.zeros((d, d))
        S[rows, cols] = w
        J = J0 @ sl.expm(S - S.T)
        As = U @ np.diag(np.sqrt(g)) @ J.T @ s_mhalf
        Bs = s_mhalf @ Vt.T @ np.diag(np.sqrt(g)) @ J.T @ s_mhalf
        return np.sum((A - As) ** 2) + np.sum(((B - Bs).T @ sigma) * (B - Bs).T)

    rng = np.random.default_rng(0)
    best = np.inf
    for s in range(starts):
        J0, _ = np.linalg.qr(rng.standard_normal((d, d)))
        J0[:, 0] *= (-1) ** s
        best = min(best, optimize.minimize(dist2, np.zeros(len(rows)), args=(J0,), method="BFGS",
                                           options={"gtol": 1e-14}).fun)
    return float(np.sqrt(best))


@pytest.mark.parametrize("kappa", [1.0, 10.0, 100.0])
def test_projection_matches_brute_force_off_the_manifold(kappa):
    project = theory.project_jit
    for seed, scale in ((0, 0.5), (1, 2.0)):
        task = C._goel_law(3, 4, kappa, noise_std=0.0, seed=seed)
        _, (A, B) = C._theta_off(task, scale, seed + 7)
        r = project(A, B, task.M, task.sigma)
        brute = _brute_distance(A, B, task.M, task.sigma)
        assert float(r.distance) <= brute * (1 + 1e-9), (kappa, seed, float(r.distance), brute)
        assert abs(float(r.distance) / brute - 1) <= 1e-8, (kappa, seed, float(r.distance), brute)
        norm = C._p_norm(A, B, task.sigma)
        assert float(r.grad_norm) <= 1e-10 * norm**2 and float(r.hess_min) >= 0  # a certified local minimum


def test_projection_claim_fails_with_an_inexact_solver():
    assert C.projection_claim().passed
    start_only = lambda *a: theory.project(*a, iters=0)  # noqa: E731  (the polar start, exact only for Σ ∝ I)
    assert not C.projection_claim(start_only).passed


def test_identity_claim_fails_with_a_wrong_constant():
    assert C.identity_claim().passed

    def quarter(A, B, M, sigma):  # ¼ instead of ⅛ in front of the norm
        c = 0.5 * jnp.sum((M @ jnp.asarray(np.real(sl.sqrtm(np.asarray(sigma))))) ** 2)
        return 2 * (theory.q_identity(A, B, M, sigma) + c) - c

    assert not C.identity_claim(quarter).passed


def test_population_claim_fails_for_a_wrongly_weighted_formula():
    def sigma_squared(A, B, M, sigma, noise):  # ½‖(AΣBᵀ − M)Σ‖² instead of ½‖(AΣBᵀ − M)Σ^½‖²
        return 0.5 * jnp.sum(((A @ sigma @ B.T - M) @ sigma) ** 2) + 0.5 * jnp.trace(noise)

    assert not C.population_limit_claim(sigma_squared, prompts=100).passed


def test_gradient_bias_claim_fails_when_the_bias_does_not_vanish():
    floor = lambda *a: C._empirical_grad(*a) + 3e-3  # noqa: E731  (a bias that stays as n grows)
    assert not C.gradient_bias_claim(floor, ns=(16, 32, 64)).passed


def test_spectral_init_claim_fails_when_the_initialisation_does_not_improve_with_n():
    def off(X, Y):  # the spectral initialisation of a fixed wrong M̂ = M̂ + 0.02
        sigma_hat, M_hat = theory.sample_moments(X, Y)
        return theory.theta_star(M_hat + 0.02, sigma_hat)

    assert not C.spectral_init_claim(off, ns=(100, 400, 1600), seeds=10).passed


# Issue #29: the rate claims of Theorems 2-3 are two-sided (CI ∋ −2 and excludes −1); their decision functions on
# synthetic measurements (no Monte Carlo, no training): an n⁻² decay passes, an n⁻¹ decay fails.
NOISE = np.array([0.06, -0.08, 0.05, -0.03])  # fixed multiplicative scatter (≈ 6% in log) of the synthetic points


@pytest.mark.parametrize("power, passes", [(-2.0, True), (-1.0, False), (-1.5, False), (-3.0, False)])
def test_bias_rate_claim_is_two_sided(power, passes):
    ns = np.array([16, 32, 64, 128])
    bias2 = 1e-2 * ns**power * np.exp(NOISE)
    var = (0.05 * bias2) ** 2  # 5% standard error, as the Monte Carlo of gradient_bias_claim gives
    c = C.bias_rate_claim(ns, bias2, var)
    assert c.passed is passes, (power, c.measured, c.detail)
    assert c.theory == -2.0 and abs(c.measured - power) < 0.2


def test_bias_rate_claim_fails_for_the_bound_itself_and_the_old_one_sided_check_did_not():
    ns = np.array([16, 32, 64, 128])
    bound = theory.sample_size_bound(ns)
    assert not C.bias_rate_claim(ns, 1e-2 / ns, (5e-4 / ns) ** 2).passed  # n⁻¹ (the old check passed it)
    assert not C.bias_rate_claim(ns, 1e-6 * bound, (5e-8 * bound) ** 2).passed  # n⁻² log⁶ n: local slope −0.39


@pytest.mark.parametrize("power, passes", [(-2.0, True), (-1.0, False)])
def test_floor_rate_claim_fails_for_an_n_inverse_floor(power, passes):
    from types import SimpleNamespace

    from icldyn.papers.goel.recipes import sample_size_summary

    ns = np.array([20, 40, 80, 160])
    points = [SimpleNamespace(n=int(n), floor=float(0.2 * n**power * np.exp(e)), initial_excess=1.0)
              for n, e in zip(ns, NOISE)]
    result = SimpleNamespace(points=points, **sample_size_summary(None, points))
    c = C.sample_size_claim(result)
    assert c.passed is passes, (power, c.measured, c.detail)
