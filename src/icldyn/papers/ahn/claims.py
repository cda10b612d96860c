"""Claims of Ahn et al. (2023), arXiv 2306.00297, for ``icldyn verify --paper ahn``."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.claims import Claim
from icldyn.papers.ahn import theory as ahn
from icldyn.papers.ahn.data import GaussianTask, sample_prompts
from icldyn.papers.ahn.model import Columns, LinearTransformer, moments
from icldyn.papers.ahn.results import AhnPoint, AhnResult
from icldyn.plugins import get
from icldyn.recipe import Reporter
from icldyn.runner import execute, typed

# SPEC §4.1: d = 5, n = 20, official Σ, w ~ N(0, Σ⁻¹), 800k-prompt Monte Carlo, tuned constant steps.
SPEC_L2 = {"gd": 1.6467, "pgd": 0.5002, "relaxed_best": 0.0869}


def _random_task(d: int, seed: int) -> tuple[np.ndarray, GaussianTask]:
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((d, d)))
    lam = np.geomspace(2.0, 0.2, d)
    sigma = (U * lam) @ U.T
    task = GaussianTask(jnp.asarray(sigma), jnp.asarray((U * np.sqrt(lam)) @ U.T), jnp.eye(d, dtype=jnp.float64),
                        jnp.asarray(0.0))
    return sigma, task


def exact_identities(d: int = 4, n: int = 7, layers: int = 3, batch: int = 64) -> list[Claim]:
    """Lemma 1 and the moment form, float64, on random (non-symmetric) parameters."""
    _, task = _random_task(d, 0)
    p = sample_prompts(task, key=jax.random.PRNGKey(1), batch=batch, n=n)
    out = []
    sparse = LinearTransformer(d, layers, parameterization="sparse", init_std=0.3, form="columns")
    params = sparse.init(key=jax.random.PRNGKey(2), dtype=jnp.float64)
    tf = np.asarray(sparse.predict(params, sparse.prepare(p)))
    pgd = ahn.preconditioned_gd(np.asarray(p.X), np.asarray(p.y), list(np.asarray(sparse.A(params))))
    err = float(np.max(np.abs(tf - pgd)))
    out.append(Claim("ahn", "Lemma 1: sparse (eq. 8) forward = L steps of preconditioned GD", "0",
                     f"{err:.1e}", "≤ 1e-10 (float64)", err <= 1e-10))
    full = LinearTransformer(d, layers, heads=2, parameterization="full", init_std=0.3)
    fp = full.init(key=jax.random.PRNGKey(3), dtype=jnp.float64)
    a = np.asarray(full.readout(fp, moments(p)))
    b = np.asarray(full.readout(fp, Columns(sparse.prepare(p).Z, p.y[:, -1])))
    rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    out.append(Claim("ahn", "moment form = column form (full, 2 heads, 3 layers)", "0", f"{rel:.1e}",
                     "≤ 1e-10 relative (float64)", rel <= 1e-10))
    return out


def theorem1_monte_carlo(d: int = 5, n: int = 20, prompts: int = 200_000) -> Claim:
    """Theorem 1's closed-form loss against the Monte-Carlo loss of the Γ* predictor."""
    sigma, task = _random_task(d, 4)
    p = sample_prompts(task, key=jax.random.PRNGKey(5), batch=prompts, n=n)
    X, y = np.asarray(p.X), np.asarray(p.y)
    G = ahn.optimal_preconditioner(sigma, n)
    err = np.square(ahn.preconditioned_gd(X, y, [G.T]) - y[:, -1])
    mean, se = err.mean(), err.std() / np.sqrt(prompts)
    theory = ahn.optimal_loss(sigma, n)
    return Claim("ahn", f"Thm 1 closed-form optimal loss = Monte Carlo ({prompts} prompts)", f"{theory:.4f}",
                 f"{mean:.4f} ± {se:.4f}", "within 3 s.e.", abs(mean - theory) <= 3 * se)


def theorem3_stationarity(layers: int = 3, n: int = 20, fit: int = 400_000, test: int = 100_000,
                          scale: float = 1.0) -> Claim:
    """Theorem 3 (sparse, eq. 8; x ~ N(0, Σ), w ~ N(0, Σ⁻¹), the official Σ): S = {A_ℓ = a_ℓΣ⁻¹} holds stationary
    points, and on S the population gradient is ∇_{A_ℓ} f = c_ℓΣ (SPEC §3.4). S's best point a* is fitted by BFGS
    on ``fit`` prompts (from several starts: the loss is symmetric in the a_ℓ, and equal steps never leave the
    diagonal); on ``test`` fresh prompts the full gradient over every A_ℓ entry is compared with its Monte-Carlo
    noise, R = ‖ḡ‖² / (tr Cov / m) (≈ 1 for a zero-mean gradient; a norm ratio rather than Hotelling's T², which
    the heavy-tailed per-prompt gradients inflate), at a*·``scale`` and at a*·1.25, a point of S that is not
    stationary, where the gradient must be large and ∝ Σ."""
    from scipy import optimize

    from icldyn.papers.ahn.config import PromptsData
    from icldyn.papers.ahn.data import make_task

    task = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64),
                        make_task(PromptsData(covariance="official", w_prior="inverse_covariance"), 0))
    sigma = np.asarray(task.sigma)
    sigma_inv = jnp.linalg.inv(task.sigma)

    def moments_of(key, m):
        p = sample_prompts(task, key=key, batch=m, n=n)
        X, y = p.X[:, :n], p.y[:, :n]
        return jnp.einsum("bni,bnj->bij", X, X) / n, jnp.einsum("bni,bn->bi", X, y) / n, p.X[:, n], p.y[:, n]

    def err(As, S, h, xq, yq):  # Lemma 1: L steps of preconditioned GD from w = 0
        w = jnp.zeros_like(h)
        for A in As:
            w = w - jnp.einsum("ji,bj->bi", A, jnp.einsum("bij,bj->bi", S, w) - h)
        return jnp.einsum("bi,bi->b", w, xq) - yq

    on_s = lambda a: jnp.stack([a[ell] * sigma_inv for ell in range(layers)])  # noqa: E731
    train, fresh = moments_of(jax.random.PRNGKey(31), fit), moments_of(jax.random.PRNGKey(32), test)
    value_grad = jax.jit(jax.value_and_grad(lambda a: jnp.mean(err(on_s(a), *train) ** 2)))
    fun = lambda a: tuple(np.asarray(v, np.float64) for v in value_grad(jnp.asarray(a)))  # noqa: E731
    starts = [np.linspace(0.4, 1.7, layers), np.full(layers, 0.7), np.linspace(1.5, 0.5, layers)]
    a_star = min((optimize.minimize(fun, x0, jac=True, method="BFGS", options={"gtol": 1e-12}) for x0 in starts),
                 key=lambda r: r.fun).x
    per_prompt = jax.jit(jax.vmap(jax.grad(lambda As, *d: err(As, *(x[None] for x in d))[0] ** 2),
                                  in_axes=(None, 0, 0, 0, 0)))

    def ratio(a):
        G = np.asarray(per_prompt(on_s(a), *fresh)).reshape(test, -1)
        g = G.mean(0)
        gl = g.reshape(layers, *sigma.shape)
        off = max(float(np.linalg.norm(x - np.sum(x * sigma) / np.sum(sigma * sigma) * sigma) / np.linalg.norm(x))
                  for x in gl)
        return float(g @ g / (np.sum(G.var(0)) / test)), off

    r_star, _ = ratio(a_star * scale)
    r_off, off = ratio(a_star * 1.25)
    return Claim("ahn", f"Thm 3: S's best point is stationary (sparse, L={layers}, official Σ, a* = "
                 f"{', '.join(f'{x:.3f}' for x in a_star)}); on S the gradient is ∝ Σ",
                 "‖∇f‖² at noise level (R ≈ 1); at a*·1.25 large and ∝ Σ",
                 f"R = {r_star:.2f} at a*{'·' + format(scale, 'g') if scale != 1 else ''}; R = {r_off:.0f} at a*·1.25, "
                 f"Dist(∇_{{A_ℓ}}f, ∝Σ) ≤ {off:.2f}", f"R ≤ 3; R ≥ 30 and Dist ≤ 0.25 ({test} fresh prompts)",
                 r_star <= 3 and r_off >= 30 and off <= 0.25)


def _point(result: AhnResult, layers: int) -> AhnPoint:
    return next(p for p in result.points if p.layers == layers)


def claims(quick: bool, store: str | Path, reporter: Reporter | None) -> list[Claim]:
    def run(name: str, over: dict | None = None) -> AhnResult:
        return typed(execute(get(name).config(over, quick=quick), store, reporter)[1])


    out = exact_identities() + [theorem1_monte_carlo(), theorem3_stationarity()]

    qs = run("quickstart")
    p1, p3 = _point(qs, 1), _point(qs, 3)
    rel = p1.test_loss / p1.optimal_test_loss - 1  # paired: Γ* on the same held-out prompts
    out.append(Claim("ahn", "Thm 1: trained 1-layer full model reaches the optimum (d=5, n=20, non-isotropic Σ)",
                     f"{p1.optimal_loss:.4f} (Γ* on the test prompts {p1.optimal_test_loss:.4f})",
                     f"{p1.test_loss:.4f} ({rel:+.2%} vs Γ*)", "≤ 2% relative, paired", abs(rel) <= 0.02))
    out.append(Claim("ahn", "3-layer trained model beats 3 steps of tuned GD", f"GD {p3.gd:.4f}",
                     f"{p3.test_loss:.4f}", "TF < GD", p3.test_loss < p3.gd))

    lv = run("ahn-loss-vs-layers", {"grid": {"model.layers": [2, 3]}})
    for L in (2, 3):
        p = _point(lv, L)
        out.append(Claim("ahn", f"L={L}: trained {p.parameterization} < tuned PGD < tuned GD (w~N(0,Σ⁻¹))",
                         f"PGD {p.pgd:.4f} < GD {p.gd:.4f}", f"TF {p.test_loss:.4f}", "strict order",
                         p.test_loss < p.pgd < p.gd))
    p2 = _point(lv, 2)
    for k in ("gd", "pgd"):
        rel = getattr(p2, k) / SPEC_L2[k] - 1
        out.append(Claim("ahn", f"L=2 tuned {k.upper()} baseline vs SPEC §4.1 reference", f"{SPEC_L2[k]:.4f}",
                         f"{getattr(p2, k):.4f} ({rel:+.1%})", "≤ 5% relative (Monte Carlo)", abs(rel) <= 0.05))

    st = run("ahn-structure", {"grid": {"model.parameterization": ["sparse"]}})
    ps = st.points[0]
    finals = [s.final for s in ps.seeds]
    L = ps.layers
    worst_sigma = max(f[f"dist_sigma_A{ell}"] for f in finals for ell in range(L))
    least_id = min(f[f"dist_I_A{ell}"] for f in finals for ell in range(L))
    out.append(Claim("ahn", f"Thm 3: sparse A_ℓ ∝ Σ⁻¹ — max_ℓ Dist(Σ½A_ℓΣ½, I), L={L}, κ(Σ)=16", "0",
                     f"{worst_sigma:.3f}", "≤ 0.2 (quick) / ≤ 0.05 (paper size)",
                     worst_sigma <= (0.2 if quick else 0.05)))
    out.append(Claim("ahn", "Thm 3: A_ℓ is not ∝ I — min_ℓ Dist(A_ℓ, I)", "≈ 0.78 for A ∝ Σ⁻¹",
                     f"{least_id:.3f}", "≥ 0.5", least_id >= 0.5))
    return out
