"""Claims of Goel, Soltanolkotabi, Bartlett for ``icldyn verify --paper goel``."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.claims import Claim
from icldyn.plugins import get
from icldyn.recipe import Reporter
from icldyn.runner import execute, typed


def _goel_law(d: int = 3, p: int = 4, kappa: float = 4.0, m_norm: float = 0.05, noise_std: float = 0.1, seed: int = 0):
    from icldyn.papers.goel.config import RegressionData
    from icldyn.papers.goel.data import make_regression_task

    cfg = RegressionData(d=d, p=p, covariance="condition", condition_number=kappa, m_norm=m_norm,
                     noise_std=noise_std)
    return jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), make_regression_task(cfg, seed))


def goel_exact(prompts: int = 200, n: int = 1600) -> list[Claim]:
    """Closed forms of SPEC §1.3-1.5 against Monte Carlo, finite differences and each other (float64)."""
    from icldyn.papers.goel import theory as goel
    from icldyn.papers.goel.data import sample_regression
    from icldyn.papers.goel.model import SoftmaxRegressor

    task = _goel_law()
    sigma, M = task.sigma, task.M
    d, p = M.shape[1], M.shape[0]
    model = SoftmaxRegressor(d, p)
    rng = np.random.default_rng(0)
    J, _ = np.linalg.qr(rng.standard_normal((d, d)))
    A_s, B_s = goel.theta_star(M, sigma, jnp.asarray(J))
    out = []

    # θ*(J): L = L*, R = 0, ∇Q = 0
    gA, gB = jax.grad(lambda A, B: goel.excess_loss(A, B, M, sigma) + goel.regulariser(A, B, sigma),
                      argnums=(0, 1))(A_s, B_s)
    worst = max(float(goel.excess_loss(A_s, B_s, M, sigma)), float(goel.regulariser(A_s, B_s, sigma)),
                float(jnp.max(jnp.abs(gA))), float(jnp.max(jnp.abs(gB))))
    out.append(Claim("goel", "θ*(J) (SVD construction, random J): L − L*, R and ∇Q vanish", "0", f"{worst:.1e}",
                     "≤ 1e-10 (float64)", worst <= 1e-10))

    # a moderate θ off the manifold: population loss vs Monte-Carlo mean of L̂ (noise included)
    A = A_s + 0.3 * jnp.asarray(rng.standard_normal(A_s.shape)) * jnp.std(A_s)
    B = B_s + 0.3 * jnp.asarray(rng.standard_normal(B_s.shape)) * jnp.std(B_s)
    theta = {"A": A, "B": B}
    X, Y = sample_regression(task, jax.random.PRNGKey(11), prompts, n)
    per_prompt = jax.lax.map(lambda xy: model.empirical_loss(theta, xy[0][None], xy[1][None]), (X, Y))
    mean, se = float(jnp.mean(per_prompt)), float(jnp.std(per_prompt) / np.sqrt(prompts))
    pop = float(goel.population_loss(A, B, M, sigma, task.noise_std**2 * jnp.eye(p)))
    out.append(Claim("goel", f"population loss closed form = Monte-Carlo mean of L̂ (n = {n}, {prompts} prompts)",
                     f"{pop:.6f}", f"{mean:.6f} ± {se:.1e}", "within 3 s.e.", abs(mean - pop) <= 3 * se))

    # gradients: autodiff vs central finite differences (L, R, L̂) and vs the closed forms of SPEC §1.4
    Xs, Ys = X[:2, :50], Y[:2, :50]
    fns = {"L": lambda t: goel.excess_loss(t["A"], t["B"], M, sigma), "R": lambda t: goel.regulariser(t["A"], t["B"],
                                                                                                      sigma),
           "L̂": lambda t: model.empirical_loss(t, Xs, Ys)}
    errs = []
    for f in fns.values():
        g = jax.grad(f)(theta)
        for k in ("A", "B"):
            for idx in np.ndindex(*theta[k].shape):
                e = jnp.zeros_like(theta[k]).at[idx].set(1e-6)
                fd = (f({**theta, k: theta[k] + e}) - f({**theta, k: theta[k] - e})) / 2e-6
                errs.append(abs(float(fd - g[k][idx])))
    gq = jax.grad(lambda t: fns["L"](t) + fns["R"](t))(theta)
    cA, cB = goel.population_grads(A, B, M, sigma)
    closed = max(float(jnp.max(jnp.abs(gq["A"] - cA))), float(jnp.max(jnp.abs(gq["B"] - cB))))
    fd_err = max(errs)
    out.append(Claim("goel", "autodiff ∇L, ∇R, ∇L̂ = central finite differences; ∇Q = SPEC §1.4 closed form",
                     "0", f"FD {fd_err:.1e}, closed form {closed:.1e}", "≤ 1e-8 / ≤ 1e-12",
                     fd_err <= 1e-8 and closed <= 1e-12))

    # Lemma 1: at the P-projection onto S, ΔᵀPθ*Σ is symmetric
    proj = goel.project(A, B, M, sigma)
    asym = float(goel.lemma1_asymmetry(A, B, M, sigma, proj.J))
    out.append(Claim("goel", "Lemma 1: ΔᵀPθ*Σ symmetric at the computed P-projection onto S", "0", f"{asym:.1e}",
                     "≤ 1e-6 relative", asym <= 1e-6))
    return out


def claims(quick: bool, store: str | Path, reporter: Reporter | None) -> list[Claim]:
    out = goel_exact()
    conv = typed(execute(get("goel-convergence").config(None, quick=quick), store, reporter)[1])
    shown = [p for p in conv.points if p.tuned_best is not False]
    alg = next(p for p in shown if p.method == "algorithm 1")
    worst = max(s.final_excess for s in alg.seeds)
    rates = [s.rate for s in alg.seeds]
    mu = max(r.high for r in rates) if all(rates) else float("nan")
    out.append(Claim("goel", "Algorithm 1, population gradients: L − L* → 0 with geometric P-distance",
                     "< 1e-12; μ < 1", f"max L − L* {worst:.1e}; μ ≤ {mu:.4f} (95% CI upper, slowest seed)",
                     "L − L* < 1e-12 and μ < 1", worst < 1e-12 and mu < 1))
    pairs = [(s.rate.mu, s.predicted.mu) for s in alg.seeds if s.rate and s.predicted]
    err = max((abs(np.log(f / q)) / abs(np.log(q)) for f, q in pairs), default=float("nan"))
    out.append(Claim("goel", f"Algorithm 1's fitted μ = the linearisation at θ* (theory.local_rate, η = {alg.lr:g})",
                     ", ".join(f"{q:.4f}" for _, q in pairs), ", ".join(f"{f:.4f}" for f, _ in pairs),
                     "≤ 10% in log μ, every seed", len(pairs) == len(alg.seeds) and err <= 0.1))
    samp = next(p for p in shown if p.method == "algorithm 1, sampled")
    ok = all(s.floor < s.initial_excess for s in samp.seeds)
    out.append(Claim("goel", f"Algorithm 1, sampled gradients (n = {samp.n}): floor below the spectral "
                     "initialisation's excess loss", f"initial {samp.initial_excess:.2e}",
                     f"floor {samp.floor:.2e}",
                     "floor < initial, every seed", ok))
    return out
