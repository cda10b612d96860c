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
    full = gpt.predict(params, X, y, n_head)
    worst = max(float(jnp.max(jnp.abs(gpt.predict(params, X[:, :k], y[:, :k], n_head) - full[:, :k])))
                for k in (ks or range(1, X.shape[1])))
    scale = float(jnp.max(jnp.abs(full)))
    rel = worst / scale
    tol = 1e-5 if X.dtype == jnp.float32 else 1e-12
    return Claim(paper="garg", claim="a k-point prefix's predictions = the first k of the whole prompt's (trained GPT, "
                 f"k = {', '.join(map(str, ks or range(1, X.shape[1])))})", theory=0.0, measured=rel, tolerance=tol,
                 test="max |Δ| / max |ŷ| ≤ tol", passed=rel <= tol, fmt=".1e")


# Figure 2 at the CPU size: "on least squares' curve once k ≥ d" as error/d ≤ 0.1 at k = d and ≤ 0.05 for every
# k > d (10% and 5% of the error with no examples): at least as close to least squares as ridge with λ = 0.1 (error/d
# 0.096, 0.034, 0.014 at k = 5, 6, 7; λ = 0.3: 0.153, 0.078, 0.042 fails; Monte Carlo, d = 5, in
# docs/results/garg.md). At k = d the system is square and ill-conditioned, so any algorithm that does not invert it
# exactly pays most there. Tuned one-step GD (0.35–0.6) fails by ≥ 7×.
REACH_AT_D, REACH_AFTER_D = 0.1, 0.05


def reach_claim(p: CurvePoint) -> Claim:
    """Figure 2 at the CPU size: once k ≥ d the trained transformer's error/d is on least squares' curve (zero there)
    within ``REACH_AT_D`` at k = d and ``REACH_AFTER_D`` beyond (the largest ratio of its error to that bound; at most
    1 passes)."""
    k, m = np.asarray(p.k), np.asarray(p.model)
    sel = k >= p.d
    bound = np.where(k == p.d, REACH_AT_D, REACH_AFTER_D)
    ratio = float(np.max(m[sel] / bound[sel]))
    return Claim(paper="garg", claim=f"for k ≥ d = {p.d} the trained GPT reaches least squares' error (0): error/d ≤ "
                 f"{REACH_AT_D:g} at k = d, ≤ {REACH_AFTER_D:g} beyond (largest ratio to the bound)", theory=0.0,
                 measured=ratio, tolerance=1.0, test="m ≤ tol", passed=ratio <= 1.0, fmt=".3f",
                 detail="GPT at k ≥ d: " + ", ".join(f"{x:.4f}" for x in m[sel]))


def beats_claim(p: CurvePoint) -> Claim:
    """Once k ≥ d the trained transformer beats every baseline but least squares at every k (the largest ratio of
    its error to the best of them; below 1 passes)."""
    k, m = np.asarray(p.k), np.asarray(p.model)
    sel = k >= p.d
    others = np.min([np.asarray(v) for n, v in p.baselines.items() if n != "least squares"], axis=0)
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


def claims(quick: bool, store: str | Path, reporter: Reporter | None = None) -> list[Claim]:
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
    out = zoo_claims(p) + [causal_claim(params, cfg.model.dims()[2], P.X, P.y, ks=[1, m // 2, m - 1])]
    if not quick:  # the quick model (200 steps) is still on the initial plateau: measured in docs/results/garg.md
        out += [learns_claim(p), reach_claim(p), beats_claim(p)]
    return out
