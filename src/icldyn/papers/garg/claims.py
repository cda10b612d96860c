"""Claims of Garg et al. (arXiv 2208.01066) for ``icldyn verify --paper garg``: the baseline zoo against its closed
forms on the run's own held-out prompts, the causal-prefix identity the curriculum rests on, and (at the CPU size)
the trained transformer on least squares' curve and below every other baseline once k ≥ d (their Figure 2)."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.claims import Claim
from icldyn.components import gpt
from icldyn.papers.garg import theory
from icldyn.papers.garg.results import CurvePoint, CurveResult
from icldyn.plugins import get
from icldyn.recipe import Reporter, nest_params
from icldyn.runner import execute, typed

Z = 4.0  # the zoo's curves against their closed forms: every |z| (in standard errors over prompts) within 4


def zoo_claims(p: CurvePoint) -> list[Claim]:
    """Least squares, averaging and tuned one-step GD at every k against (1 − k/d)₊, (d + 1)/k and
    (d + 1)/(k + d + 1) (:mod:`icldyn.papers.garg.theory`), in standard errors."""
    k = np.asarray(p.k)
    out = []
    for name, law, form in (("least squares", theory.least_squares_error, "(1 − k/d)₊"),
                            ("averaging", theory.averaging_error, "(d + 1)/k"),
                            ("GD, 1 step (tuned)", theory.one_step_gd_error, "(d + 1)/(k + d + 1)")):
        m, se, t = np.asarray(p.baselines[name]), np.asarray(p.baselines_se[name]), law(k, p.d)
        sel = k >= 1 if name != "least squares" else k < p.d  # least squares is exactly 0 from k = d (checked below)
        z = np.abs(m[sel] - t[sel]) / np.maximum(se[sel], 1e-12)
        exact_zero = name != "least squares" or float(np.max(m[k >= p.d])) <= 1e-6
        worst = int(k[sel][np.argmax(z)])
        out.append(Claim(paper="garg", claim=f"{name}'s error after k examples = {form} (d = {p.d}, every k"
                         f"{' < d; ≤ 1e-6 from k = d' if name == 'least squares' else ' ≥ 1'})",
                         theory=float(t[k == worst][0]), measured=float(m[k == worst][0]),
                         tolerance=Z, test=f"max |z| ≤ {Z:g} (s.e. over prompts)",
                         passed=bool(z.max() <= Z and exact_zero), fmt=".4f",
                         detail=f"max |z| = {z.max():.2f} at k = {worst}"))
    return out


def causal_claim(params, n_head: int, X: jax.Array, y: jax.Array, ks: list[int] | None = None) -> Claim:
    """The first k predictions on a prompt equal those on its k-point prefix (causal attention): what lets the
    curriculum train shorter prompts by masking the loss in one program. ``ks``: the prefixes (default every k)."""
    predict = jax.jit(lambda X, y, p: gpt.predict(p, X, y, n_head))  # a program per length (eager: one per op)
    full = predict(X, y, params)
    worst = max(float(jnp.max(jnp.abs(predict(X[:, :k], y[:, :k], params) - full[:, :k])))
                for k in (ks or range(1, X.shape[1])))
    scale = float(jnp.max(jnp.abs(full)))
    rel = worst / scale
    tol = 1e-5 if X.dtype == jnp.float32 else 1e-12
    return Claim(paper="garg", claim="a k-point prefix's predictions = the first k of the whole prompt's (trained GPT, "
                 f"k = {', '.join(map(str, ks or range(1, X.shape[1])))})", theory=0.0, measured=rel, tolerance=tol,
                 test="max |Δ| / max |ŷ| ≤ tol", passed=rel <= tol, fmt=".1e")


# Figure 2 at the CPU size: "on least squares' curve once k ≥ d" measured against ridge regression, whose penalty λ
# sets how far from least squares (λ → 0) an algorithm sits: the GPT's error/d at most ridge's with λ = REACH_LAMBDA
# at every k ≥ d (Monte Carlo, :func:`theory.ridge_error`). At k = d the system is square and ill-conditioned, so any
# algorithm that does not invert it exactly pays most there. The CPU default (the tiny GPT, 30 000 steps) sits at
# 0.187 at k = d (ridge λ = 1: 0.248; λ = 0.3: 0.150) and at 0.63–0.84 of λ = 1's error beyond; the small GPT, where
# it leaves the plateau, at λ ≈ 0.1 (docs/results/garg.md). λ = 3 and tuned one-step GD (0.35–0.6) fail.
REACH_LAMBDA = 1.0


def reach_claim(p: CurvePoint, lam: float = REACH_LAMBDA) -> Claim:
    """Figure 2 at the CPU size: once k ≥ d the trained transformer's error/d is at most ridge regression's with
    penalty ``lam`` on noiseless prompts (:func:`icldyn.papers.garg.theory.ridge_error`; least squares is λ → 0) at
    every k (the largest ratio of the two; at most 1 passes)."""
    k, m = np.asarray(p.k), np.asarray(p.model)
    sel = k >= p.d
    bound = theory.ridge_error(k[sel], p.d, lam)
    ratio = float(np.max(m[sel] / bound))
    return Claim(paper="garg", claim=f"for k ≥ d = {p.d} the trained GPT is on least squares' curve as close as ridge "
                 f"with λ = {lam:g}: error/d ≤ ridge's at every k (largest ratio)", theory=None,
                 measured=ratio, tolerance=1.0, test="m ≤ tol", passed=ratio <= 1.0, fmt=".3f",
                 detail="GPT / ridge at k ≥ d: " + ", ".join(f"{x:.4f}/{r:.4f}" for x, r in zip(m[sel], bound)))


def beats_claim(p: CurvePoint) -> Claim:
    """Once k ≥ d the trained transformer beats every baseline but least squares (and the Bayes predictor, which is
    least squares here) at every k (the largest ratio of its error to the best of them; below 1 passes)."""
    k, m = np.asarray(p.k), np.asarray(p.model)
    sel = k >= p.d
    others = np.min([np.asarray(v) for n, v in p.baselines.items() if n not in ("least squares", p.bayes)], axis=0)
    ratio = float(np.max(m[sel] / others[sel]))
    return Claim(paper="garg", claim=f"for k ≥ d = {p.d} the trained GPT beats 3-NN, averaging and tuned GD at every k "
                 "(largest error ratio to the best of them)", theory=None, measured=ratio, tolerance=1.0,
                 test="m < tol", passed=ratio < 1.0, fmt=".3f")


def learns_claim(p: CurvePoint) -> Claim:
    """The trained transformer has learned something in context: its error after n examples is below its error
    with none by more than 4 standard errors (the CPU size; the quick model, 200 steps, has not left the initial
    plateau — after 1000 steps neither had it, at lr 10⁻³ or 2·10⁻³)."""
    drop = (p.model[0] - p.model[-1]) / np.hypot(p.model_se[0], p.model_se[-1])
    return Claim(paper="garg", claim=f"the trained GPT learns in context: error after k = {p.k[-1]} examples below "
                 "k = 0's (in standard errors)", theory=None, measured=float(drop), tolerance=Z,
                 test=f"m ≥ {Z:g}", passed=bool(drop >= Z), fmt=".1f",
                 detail=f"k = 0: {p.model[0]:.3f}, k = {p.k[-1]}: {p.model[-1]:.3f}")


# The CPU-size GPTs against the Bayes error (full verify; docs/results/garg.md), error / E f². Where the GPT is
# near Bayes: within WITHIN[recipe] at every k (the largest gap + 2 paired s.e.). Noisy: measured 0.029 (gap
# 0.019 ± 0.005 at k = 10), the bound 0.05 four s.e. above it. Linear: measured 0.217 (gap 0.187 ± 0.015 at k = d,
# where Bayes = least squares is exact and the tiny GPT ridge-like, above), the bound 0.25 two s.e. above it. Where
# it is not: above the Bayes error by at least ABOVE[recipe] at some k (the largest gap − 2 s.e.). Sparse: it learns
# least squares, not the sparse prior; measured 0.38 (gap 0.454 ± 0.036 at k = s + 1 = 3, where Bayes is exact and
# least squares at 0.41).
WITHIN = {"garg-linear-cpu": 0.25, "garg-noisy-cpu": 0.05}
ABOVE = {"garg-sparse-cpu": 0.25}
CLASS = {"linear_regression": "linear regression", "noisy_linear_regression": "noisy linear regression",
         "sparse_linear_regression": "sparse linear regression"}


def bayes_risk_claim(p: CurvePoint) -> Claim:
    """Gaussian linear regression (noiseless or noisy): the Bayes predictor's error on the run's prompts against its
    exact risk at every k (:func:`icldyn.components.bayes.gaussian_linear_risk`), in standard errors over prompts (the
    noisy risk's Monte-Carlo s.e., over 20 000 Wishart draws, is under 2% of them and left out); noiseless, ≤ 1e-6
    from k = d as well."""
    k = np.asarray(p.k)
    m, se, t = np.asarray(p.baselines[p.bayes]), np.asarray(p.baselines_se[p.bayes]), np.asarray(p.bayes_risk)
    sel = t > 0
    z = np.abs(m[sel] - t[sel]) / np.maximum(se[sel], 1e-12)
    exact = bool(np.all(m[~sel] <= 1e-6))  # noiseless, k ≥ d: the risk is 0 and so is every prompt's error
    worst = int(k[sel][np.argmax(z)])
    form = "τ²(d − k)₊" if p.function_class == "linear_regression" else "σ²(1 + E tr(XᵀX + λI)⁻¹)"
    return Claim(paper="garg", claim=f"{CLASS[p.function_class]}: the Bayes predictor's error after k examples = its "
                 f"exact risk {form} (d = {p.d}, every k)", theory=float(t[k == worst][0]),
                 measured=float(m[k == worst][0]), tolerance=Z, test=f"max |z| ≤ {Z:g} (s.e. over prompts)",
                 passed=bool(z.max() <= Z and exact), fmt=".4f", detail=f"max |z| = {z.max():.2f} at k = {worst}")


def bayes_best_claim(p: CurvePoint, sparsity: int | None = None) -> Claim:
    """The Bayes predictor is at most every algorithm of the zoo at every k (the largest z of Bayes − baseline, paired
    on the prompts both were evaluated on, within 4); for sparse linear regression (``sparsity`` = s) also exact,
    ≤ 1e-6, once k > s (only the true support explains k > s noiseless labels)."""
    k = np.asarray(p.k)
    z = {n: np.asarray(v) / np.maximum(np.asarray(p.bayes_minus_se[n]), 1e-12) for n, v in p.bayes_minus.items()}
    name = max(z, key=lambda n: z[n].max())
    worst = int(k[np.argmax(z[name])])
    exact = float(np.max(np.asarray(p.baselines[p.bayes])[k > sparsity])) if sparsity is not None else 0.0
    what = CLASS.get(p.function_class, p.function_class)
    tail = f", and 0 once k > s = {sparsity}" if sparsity is not None else ""
    return Claim(paper="garg", claim=f"{what}: the Bayes predictor's error is at most every baseline's at every k"
                 f"{tail} (largest paired z of Bayes − baseline)", theory=None, measured=float(z[name].max()),
                 tolerance=Z, test=f"m ≤ {Z:g}" + (", error ≤ 1e-6 for k > s" if sparsity is not None else ""),
                 passed=bool(z[name].max() <= Z and exact <= 1e-6), fmt=".2f",
                 detail=f"{name} at k = {worst}: Bayes − it = {p.bayes_minus[name][worst]:+.4f}"
                 + (f"; k > s: ≤ {exact:.1e}" if sparsity is not None else ""))


def bayes_bound_claim(p: CurvePoint) -> Claim:
    """No in-context learner beats the posterior mean on average: the trained GPT's error is nowhere below the Bayes
    predictor's by more than 4 paired standard errors (the smallest gap / s.e. over k)."""
    g, gse = np.asarray(p.gap), np.asarray(p.gap_se)
    z = g / np.maximum(gse, 1e-12)
    worst = int(np.asarray(p.k)[np.argmin(z)])
    return Claim(paper="garg", claim=f"{CLASS.get(p.function_class, p.function_class)}: the trained GPT is nowhere "
                 "below the Bayes error (its error − Bayes, in paired s.e., smallest over k)", theory=None,
                 measured=float(z.min()), tolerance=-Z, test=f"m ≥ −{Z:g}", passed=bool(z.min() >= -Z), fmt=".2f",
                 detail=f"at k = {worst}: gap {g[worst]:+.4f} ± {gse[worst]:.4f}")


def bayes_gap_claim(p: CurvePoint, within: float) -> Claim:
    """The trained GPT's error within ``within`` of the Bayes error at every k (the largest gap + 2 paired s.e.)."""
    g, gse = np.asarray(p.gap), np.asarray(p.gap_se)
    upper = g + 2 * gse
    worst = int(np.asarray(p.k)[np.argmax(upper)])
    return Claim(paper="garg", claim=f"{CLASS.get(p.function_class, p.function_class)}: the trained GPT is within "
                 f"{within:g} of the Bayes error at every k (largest gap + 2 s.e.)", theory=0.0,
                 measured=float(upper.max()), tolerance=within, test="m ≤ tol", passed=bool(upper.max() <= within),
                 fmt=".4f", detail=f"at k = {worst}: gap {g[worst]:+.4f} ± {gse[worst]:.4f}")


def bayes_excess_claim(p: CurvePoint, above: float) -> Claim:
    """Where the trained GPT is *not* Bayes-optimal, how far: its error exceeds the Bayes error by at least ``above``
    at some k (the largest gap − 2 paired s.e.)."""
    g, gse = np.asarray(p.gap), np.asarray(p.gap_se)
    lower = g - 2 * gse
    worst = int(np.asarray(p.k)[np.argmax(lower)])
    return Claim(paper="garg", claim=f"{CLASS.get(p.function_class, p.function_class)}: the trained GPT is not the "
                 f"Bayes predictor: above the Bayes error by at least {above:g} at some k (largest gap − 2 s.e.)",
                 theory=None, measured=float(lower.max()), tolerance=above, test="m ≥ tol",
                 passed=bool(lower.max() >= above), fmt=".4f",
                 detail=f"at k = {worst}: gap {g[worst]:+.4f} ± {gse[worst]:.4f}")


def claims(quick: bool, store: str | Path, reporter: Reporter | None = None) -> list[Claim]:
    out = []
    for name in ("garg-noisy-cpu", "garg-sparse-cpu"):
        qcfg = get(name).config(quick=quick)
        _, summary = execute(qcfg, store, reporter)
        [q] = typed(summary).points
        out += ([bayes_risk_claim(q)] if q.bayes_risk is not None else []) + [
            bayes_best_claim(q, getattr(qcfg.data, "sparsity", None)), bayes_bound_claim(q)]
        if not quick:
            out.append(bayes_gap_claim(q, WITHIN[name]) if name in WITHIN else bayes_excess_claim(q, ABOVE[name]))
    rd, summary = execute(get("garg-linear-cpu").config(quick=quick), store, reporter)
    result: CurveResult = typed(summary)
    [p] = result.points
    cfg = get("garg-linear-cpu").config(quick=quick)
    with np.load(rd.path / "params.npz", allow_pickle=False) as f:
        seed = result.points[0].seeds[0].seed
        params = nest_params({k.split("/", 1)[1]: jnp.asarray(f[k]) for k in f.files if k.startswith(f"seed{seed}/")})
    from icldyn.components import function_classes as fc

    P = fc.sample(cfg.data, jax.random.PRNGKey(7), 64, dtype=jnp.float32)
    m = cfg.data.n + 1
    out += zoo_claims(p) + [bayes_risk_claim(p), bayes_best_claim(p), bayes_bound_claim(p),
                            causal_claim(params, cfg.model.dims()[2], P.X, P.y, ks=[1, m // 2, m - 1])]
    if not quick:  # the quick model (200 steps) is still on the initial plateau: measured in docs/results/garg.md
        out += [learns_claim(p), reach_claim(p), beats_claim(p), bayes_gap_claim(p, WITHIN["garg-linear-cpu"])]
    return out
