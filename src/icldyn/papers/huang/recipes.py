"""Huang, Cheng, Liang recipes: balanced features (Thm 3.1; exact engine against the Monte-Carlo trainer),
imbalanced features (Thm 3.2; stage-wise convergence and four phases), phase-I length against K, and
tests on task laws unseen in training.

Two trainers, one loop: ``train.oracle = population`` runs GD on the K×K scores with the exact
expectation over feature counts (:mod:`icldyn.papers.huang.theory`); ``sampled`` runs GD on the full model's Q
(d×d) with fresh Monte-Carlo prompts. Both log the same exact metrics of their current parameters.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from icldyn.components.feature_attention import SoftmaxICL
from icldyn.components.features import (
    W_LAWS,
    FeatureTask,
    feature_probs,
    sample_feature_prompts,
    w_second_moment,
)
from icldyn.config import RunConfig, with_overrides
from icldyn.papers.huang import theory
from icldyn.papers.huang.figures import figures as draw_figures
from icldyn.papers.huang.problem import FULL_B, Setup, build
from icldyn.papers.huang.results import HuangPoint, HuangResult
from icldyn.recipe import Job, Recipe, Reporter, Rows, Table, Target, curve, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.loop import History
from icldyn.train.optimizers import build_optimizer

CONVERGED = 1e-3  # L_k below this counts as converged (the imbalanced claim)


class Method(NamedTuple):
    name: str
    overrides: dict[str, Any]


EXACT = Method("exact engine", {"train.oracle": "population"})
MONTE_CARLO = Method("Monte-Carlo GD", {"train.oracle": "sampled"})
COUNTS = Method("sampled-counts engine", {"train.oracle": "counts"})


def is_imbalanced(p: np.ndarray) -> bool:
    return bool(p[0] > 1.5 * p[1:].max()) if len(p) > 1 else False


EPSILONS = tuple(0.04 * 2.0**-j for j in range(10))  # ε of the ε-times: 0.04 … 8e-5, those a run reaches


def summarise_point(label: str, method: Method, pcfg: RunConfig, setup: Setup, hist: History, wall: float) -> dict:
    """Per seed: final loss and attention, and phase boundaries per tracked feature."""
    p = np.asarray(setup.tasks.p[0], np.float64)
    imbalanced = is_imbalanced(p)
    out_seeds = []
    for i, seed in enumerate(setup.seeds):
        features = {}
        for k in setup.tracked:
            steps, attn = curve(hist, f"attn{k}", i)
            _, Lk = curve(hist, f"L{k}", i)
            info = {"final_attn": float(attn[-1]), "final_L": float(Lk[-1]),
                    "converged_at": theory.first_step(steps, Lk < CONVERGED)}
            if imbalanced and k != 0:
                _, A = curve(hist, f"A{k}", i)
                _, B = curve(hist, f"B{k}_0", i)
                info["role"] = "under-represented"
                info["phases"] = theory.underrepresented_phases(steps, A, B, attn)
            else:
                info["role"] = "dominant" if imbalanced else "balanced"
                info["phases"] = theory.balanced_phases(steps, attn)
            features[str(k)] = info
        steps, loss = curve(hist, "loss", i)
        _, amean = curve(hist, "attn_mean", i)
        eps = None
        if not imbalanced:  # Theorem 3.1's ε-times, Stage II's A_k and attention concentration along the curve
            k = setup.tracked[0]
            _, A = curve(hist, f"A{k}", i)
            _, B = curve(hist, f"B{k}_{(k + 1) % len(p)}" if len(p) <= FULL_B else f"B{k}_rest", i)  # all equal
            eps = theory.epsilon_times(steps, loss, A, B, _optimal_loss(tuple(p), pcfg.data.n,
                                                                       pcfg.train.count_samples),
                                       len(p), pcfg.data.n, EPSILONS)
        out_seeds.append({"final_loss": float(loss[-1]),
                          "t_half": theory.first_step(steps, amean >= 0.5), "features": features,
                          "epsilon_times": eps})
    return {"point": label, "method": method.name, "oracle": pcfg.train.oracle, "K": pcfg.data.features,
            "N": pcfg.data.n, "p": p.tolist(), "imbalanced": imbalanced, "exact_counts": setup.exact,
            "unavoidable_loss": theory.unavoidable_loss(p, pcfg.data.n),
            "optimal_loss": _optimal_loss(tuple(p), pcfg.data.n, pcfg.train.count_samples),
            "seeds": out_seeds, "wall_s": wall,
            "final_loss": float(np.mean([s["final_loss"] for s in out_seeds])),
            "final_attn_min": float(np.mean([min(f["final_attn"] for f in s["features"].values())
                                             for s in out_seeds]))}


@functools.lru_cache(maxsize=64)
def _optimal_loss(p: tuple[float, ...], n_tokens: int, samples: int) -> float:
    """theory.optimal_loss, once per law: the exact and Monte-Carlo points of a run share it."""
    return theory.optimal_loss(np.asarray(p), n_tokens, samples=samples).value


def tracking(exact: History, mc: History) -> dict:
    """How closely the Monte-Carlo trainer follows the exact engine: at every logged step, the MC mean over
    seeds of the feature-averaged A_k and of the loss against the exact curve, in units of the MC standard
    error over seeds (plus the relative gap)."""
    out = {}
    for metric in ("A", "loss"):
        def per_seed(hist: History) -> np.ndarray:
            names = ["loss"] if metric == "loss" else [m for m in hist.metrics[0] if m[0] == "A" and m[1:].isdigit()]
            seeds = len(hist.metrics[0]["loss"])
            return np.array([np.mean([curve(hist, m, i)[1] for m in names], axis=0) for i in range(seeds)])

        ex, mcs = per_seed(exact), per_seed(mc)
        n = min(ex.shape[1], mcs.shape[1])
        ref, mean = ex[0, :n], mcs[:, :n].mean(0)
        se = mcs[:, :n].std(0, ddof=1) / np.sqrt(len(mcs)) if len(mcs) > 1 else np.zeros(n)
        gap = np.abs(mean - ref)
        scale = np.maximum(np.abs(ref), 1e-12)
        z = gap[1:] / np.maximum(se[1:], 1e-15)
        out[metric] = {"max_rel_gap": float(np.max(gap[1:] / scale[1:])), "median_z": float(np.median(z)),
                       "max_z": float(np.max(z)), "seeds": len(mcs)}
    return out


def exact_gd_tracking(hist: History, K: int, N: int, lr: float) -> dict:
    """Balanced features at any N: the run's u = A_k − B_{k,n} (mean over the tracked k and their off-target n)
    against exact population GD's (:func:`icldyn.papers.huang.theory.balanced_gd`, exact at any N) at every logged
    step: the largest relative gap (seed mean), and the gap in standard errors over seeds."""
    seeds = len(hist.metrics[0]["loss"])
    names = [m for m in hist.metrics[0] if m[0] == "A" and m[1:].isdigit()]

    def u(i):
        steps, _ = curve(hist, names[0], i)
        per_k = []
        for a in names:
            k = a[1:]
            Bs = [m for m in hist.metrics[0] if m.startswith(f"B{k}_")]
            per_k.append(curve(hist, a, i)[1] - np.mean([curve(hist, b, i)[1] for b in Bs], axis=0))
        return np.asarray(steps), np.mean(per_k, axis=0)

    steps = u(0)[0]
    runs = np.array([u(i)[1] for i in range(seeds)])
    _, exact = theory.balanced_gd(K, N, int(steps[-1]), lr)
    ref = exact[steps]
    mean = runs.mean(0)
    se = runs.std(0, ddof=1) / np.sqrt(seeds) if seeds > 1 else np.zeros_like(mean)
    gap = np.abs(mean - ref)[1:]
    z = gap / np.maximum(se[1:], 1e-15)
    return {"max_rel_gap": float(np.max(gap / np.maximum(np.abs(ref[1:]), 1e-12))), "median_z": float(np.median(z)),
            "max_z": float(np.max(z)), "seeds": seeds}


def scaled_point(over: dict[str, Any], cfg: RunConfig, n_power: int = 3) -> dict[str, Any]:
    """The overrides that go with a grid point's K: N = K^n_power and d = max(K, d) (phase scaling)."""
    K = over.get("data.features", cfg.data.features)
    return {"data.n": K**n_power, "data.d": max(K, cfg.data.d)}


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter, methods: tuple[Method, ...],
        n_power: int | None = None) -> HuangResult:
    """Train every (grid point × method). ``n_power``: set N = K^n_power and d = K at each point. The result adds
    what the points alone do not hold: the exact engine's tracking of Monte-Carlo GD, and huang-ood's tests."""
    hists: dict[str, History] = {}
    last: list = []  # the last trained parameters (huang-ood tests them)

    def jobs():
        for glabel, gover in grid_points(cfg):
            for method in methods:
                over = {**gover, **method.overrides}
                if n_power:
                    over.update(scaled_point(over, cfg, n_power))
                pcfg = with_overrides(cfg, over)
                setup = build(pcfg)
                label = ", ".join(x for x in (glabel, method.name) if x)

                def summarise(trained, wall, label=label, method=method, pcfg=pcfg, setup=setup, gover=gover):
                    [(params, hist)] = trained
                    hists[label] = hist
                    last[:] = [params]
                    return [{**summarise_point(label, method, pcfg, setup, hist, wall), "grid": gover}]

                yield Job(cfg=pcfg, targets=[Target(0, label, setup.seeds)], problem=setup.problem,
                          opt=build_optimizer(pcfg.train), tasks=setup.tasks, keys=setup.keys, summarise=summarise)

    [(points, rows)] = run_jobs([rd], reporter, jobs())
    result: dict[str, Any] = {}
    ex = [p for p in points if p["oracle"] == "population"]
    mc = [p for p in points if p["oracle"] == "sampled"]
    if ex and mc:
        result["tracking"] = tracking(hists[ex[0]["point"]], hists[mc[0]["point"]])
        result["speed_ratio"] = mc[0]["wall_s"] / ex[0]["wall_s"]
    if cfg.experiment == "huang-ood":
        result["ood"] = ood(cfg, last[0])
    counts = [p for p in points if p["oracle"] == "counts" and not p["imbalanced"]]
    if counts:
        result["exact_gd"] = exact_gd_tracking(hists[counts[0]["point"]], counts[0]["K"], counts[0]["N"], cfg.train.lr)
    return combine(cfg, points, rows, rd, **result)


def combine(cfg: RunConfig, points: list[HuangPoint], rows: Rows, out: RunDir | None, **found: Any) -> HuangResult:
    """The recipe's summary (phase scaling), figures, table and notes from its points — a run's, or a
    sweep's gathered (:func:`icldyn.sweep.report`); ``found``: the run's findings beyond its points."""
    points = [HuangPoint.model_validate(p) for p in points]
    fields = {**found, "points": points}
    if cfg.experiment == "huang-phase-scaling":
        fields.update(phase_scaling(points))
    res = HuangResult(**fields)
    lines = headline(res)
    return HuangResult(**fields, figures=draw_figures(cfg, res, rows, out), table=table(points), headline=lines,
                       report_lines=lines + report_lines(res))


def phase_scaling(points: list[HuangPoint]) -> dict:
    """Fitted exponent of the phase-I length t_½ (mean E[Attn_k] ≥ ½) in K, with a 95% CI (Thm 3.1 bound
    O(K² log K / η))."""
    ks = np.array([p.K for p in points], float)
    t = np.array([np.mean([s.t_half if s.t_half is not None else np.nan for s in p.seeds])
                  for p in points])
    ok = np.isfinite(t)
    out = {"t_half": dict(zip([int(k) for k in ks], [None if not np.isfinite(x) else float(x) for x in t]))}
    if ok.sum() >= 3:
        fit = stats.linregress(np.log(ks[ok]), np.log(t[ok]))
        half = stats.t.ppf(0.975, ok.sum() - 2) * fit.stderr
        bound = np.polyfit(np.log(ks[ok]), np.log(ks[ok] ** 2 * np.log(ks[ok])), 1)[0]
        out.update({"exponent": float(fit.slope), "exponent_ci": [float(fit.slope - half), float(fit.slope + half)],
                    "bound_exponent": float(bound)})
    return out


def ood(cfg: RunConfig, params, prompts: int = 100_000) -> list[dict]:
    """The trained model (seed 0) tested by Monte Carlo on task laws unseen in training, against the exact
    prediction with that law's E[wwᵀ] (only the second moment enters)."""
    pcfg = with_overrides(cfg, {"train.oracle": "population"})
    setup = build(pcfg)
    task = jax.tree.map(lambda a: jnp.asarray(a[0], jnp.float64), setup.tasks)
    s = jnp.asarray(params["s"][0] if "s" in params else theory.scores_of(params["Q"][0], task.V), jnp.float64)
    Q = task.V @ s.T @ task.V.T  # the full model's Q of these scores
    model = SoftmaxICL(cfg.data.d)
    out = []
    for i, law in enumerate(W_LAWS):
        batch = sample_feature_prompts(FeatureTask(task.V, task.p), jax.random.PRNGKey(1000 + i), prompts,
                                       cfg.data.n, w_law=law)
        err = 0.5 * (model.predict({"Q": Q}, batch.X, batch.y, batch.xq) - batch.yq) ** 2
        gram = task.V.T @ jnp.asarray(w_second_moment(law, cfg.data.d)) @ task.V
        pred = float(task.p @ theory.per_query_loss(s, task.counts, task.weights, 1.0, gram))
        mean, se = float(err.mean()), float(err.std() / np.sqrt(prompts))
        out.append({"law": law, "second_moment_identity": law in ("gaussian", "rademacher", "sphere"),
                    "predicted": pred, "measured": mean, "se": se, "within_3se": abs(mean - pred) <= 3 * se})
    return out


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "—" if x is None else format(x, spec) if isinstance(x, (float, int)) else str(x)


def table(points: list[HuangPoint]) -> Table:
    cols = ["point", "K", "N", "counts", "final loss", "L*", "L_low", "min_k E[Attn_k]", "t_½", "phases (first "
            "tracked under-represented k)", "wall s"]
    out = []
    for p in points:
        s0 = p.seeds[0]
        under = [f for f in s0.features.values() if f.role == "under-represented"]
        ph = "—"
        if under:
            q = under[0].phases
            ph = f"{_fmt(q.phase_I_end)} / {_fmt(q.phase_II_end)} / {_fmt(q.phase_III_end)}"
        out.append([p.point, p.K, p.N, "exact" if p.exact_counts else "MC", _fmt(p.final_loss, ".4g"),
                    _fmt(p.optimal_loss), _fmt(p.unavoidable_loss), _fmt(p.final_attn_min, ".3f"), _fmt(s0.t_half), ph,
                    _fmt(p.wall_s, ".1f")])
    return Table(columns=cols, rows=out)


def headline(result: HuangResult) -> list[str]:
    lines = []
    if result.tracking is not None:
        t = result.tracking
        lines.append(f"Monte-Carlo GD ({t['A'].seeds} seeds) vs exact engine: mean A_k within "
                     f"{t['A'].max_rel_gap:.2%} (median {t['A'].median_z:.1f}, max {t['A'].max_z:.1f} s.e. "
                     f"over logged steps), loss within {t['loss'].max_rel_gap:.2%}; wall time (compile included) "
                     f"MC / exact = {result.speed_ratio:.1f}.")
    if result.exact_gd is not None:
        t = result.exact_gd
        lines.append(f"Sampled-counts engine ({t.seeds} seeds) vs exact population GD (u = A_k − B_k, exact at any N): "
                     f"within {t.max_rel_gap:.2g} relative (median {t.median_z:.1f}, max {t.max_z:.1f} s.e. over "
                     "logged steps).")
    if result.exponent is not None:
        lo, hi = result.exponent_ci
        lines.append(f"Phase-I length t_½ ∝ K^{result.exponent:.2f} (95% CI [{lo:.2f}, {hi:.2f}]); the bound "
                     f"K² log K has local exponent {result.bound_exponent:.2f} over these K.")
    for p in result.points:
        if p.imbalanced:
            s0 = p.seeds[0].features
            dom = s0["0"].converged_at
            under = {k: f.converged_at for k, f in s0.items() if f.role == "under-represented"}
            lines.append(f"{p.point}: dominant feature L_1 < {CONVERGED:g} at t = {_fmt(dom)}; under-represented "
                         f"at t = {', '.join(_fmt(v) for v in under.values())}.")
    if result.ood is not None:
        ok = all(o["within_3se"] for o in result.ood)
        lines.append("Unseen task laws, measured ± s.e. (exact prediction with the law's E[wwᵀ]): " + "; ".join(
            f"{o['law']} {o['measured']:.6f} ± {o['se']:.1e} ({o['predicted']:.6f})" for o in result.ood)
            + f" — all within 3 s.e.: {ok}.")
    return lines


def report_lines(result: HuangResult) -> list[str]:
    return ["", "Losses are ½E[(ŷ − y)²]. Metrics are population quantities of each trainer's current parameters "
            "(the Monte-Carlo trainer's Q projected onto the features), exact over the feature counts where the "
            "table's counts column says exact, else over a fixed Monte-Carlo set of train.count_samples count "
            "vectors (MC). L* = inf L (theory.optimal_loss: "
            "A_k → "
            "∞ with the best off-target logits); L_low = ½Σ p_k(1 − p_k)^N ≤ L* is its part from prompts whose query "
            "feature is absent. Phases of an under-represented k, with "
            "r = (−dB_{k,1}/dt)/(dA_k/dt): I ends when r has fallen from r₀ to √r₀, II when r ≤ 1 (the switch "
            "of leading influence), III when E[Attn_k] ≥ ½ (theory/huang.py).", ""]


def assumptions_not_met(cfg: RunConfig) -> list[str]:
    """Huang et al.'s assumptions that a valid config does not meet: N = poly(K) ≫ K³ (flagged below
    10 K³), p_k = Θ(1/K) (balanced) or p_1 = Θ(1), p_k = Θ(1/K) (imbalanced), η ≤ O(1) (flagged above 1), ν = 1
    fixed, population-gradient GD from Q = 0."""
    K, N = cfg.data.features, cfg.data.n
    out = []
    if N < 10 * K**3:
        out.append(f"N = {N}, K³ = {K**3} (N/K³ = {N / K**3:.3g}): Theorems 3.1-3.2 assume N ≫ K³ "
                   "(flagged below 10 K³)")
    p = feature_probs(cfg.data)
    balanced = K * p.max() <= 4 and K * p.min() >= 0.25  # p_k = Θ(1/K), within a factor 4
    imbalanced = K > 1 and p[0] >= 0.2 and K * p[1:].max() <= 4 and K * p[1:].min() >= 0.25
    if not (balanced or imbalanced):
        out.append(f"p = {np.round(p, 4).tolist()}: neither balanced (p_k = Θ(1/K), Thm 3.1) nor imbalanced "
                   "(p_1 = Θ(1), p_k = Θ(1/K) for k ≥ 2, Thm 3.2) within a factor 4")
    if cfg.train.lr > 1:
        out.append(f"train.lr = η = {cfg.train.lr:g}: the theorems take η ≤ O(1) (exact bound not stated; η = 1 is "
                   "stable)")
    if cfg.model.train_value:
        out.append("model.train_value = true: the theorems fix ν = 1")
    if cfg.train.oracle == "sampled":
        out.append("train.oracle = 'sampled': the theorems analyse GD on the population loss")
    if cfg.train.optimizer != "sgd" or cfg.train.momentum or cfg.train.schedule != "constant":
        out.append(f"train.optimizer = {cfg.train.optimizer!r}: the theorems analyse plain GD at a constant step")
    return out


HUANG_DATA = {"kind": "features", "features": 4, "d": 4, "n": 64, "feature_basis": "random"}
HUANG_MODEL = {"kind": "softmax_icl"}
HUANG_TRAIN = {"optimizer": "sgd", "lr": 1.0, "schedule": "constant", "clip": 0.0, "dtype": "float64",
               "oracle": "population", "batch": 2048, "steps": 400, "log_every": 5, "max_loss": 1e3}

RECIPES: list[Recipe] = []  # this module's recipes, in `icldyn list` order
RECIPES.append(Recipe(
    name="huang-balanced", paper="huang",
    description="balanced features: A_k, B_{k,n}, E[Attn_k], L_k from Q = 0; exact engine vs Monte-Carlo GD (Thm 3.1)",
    runner=functools.partial(run, methods=(EXACT, MONTE_CARLO)), result=HuangResult,
    combine=combine, assumptions=assumptions_not_met, losses=("loss",), metric="loss",
    defaults={"seeds": 4, "data": {**HUANG_DATA, "features": 8, "d": 8, "n": 512},
              "model": HUANG_MODEL, "train": {**HUANG_TRAIN, "steps": 800, "batch": 1024}},
    quick={"data": HUANG_DATA, "train": {"steps": 300}},
))
RECIPES.append(Recipe(
    name="huang-imbalanced", paper="huang",
    description="imbalanced features (p_1 = ½): the dominant feature converges first; four phases of the others "
    "(Thm 3.2)",
    runner=functools.partial(run, methods=(EXACT,)), result=HuangResult,
    combine=combine, assumptions=assumptions_not_met, losses=("loss",), metric="loss",
    defaults={"data": {**HUANG_DATA, "features": 32, "d": 32, "n": 4096, "p_dominant": 0.5},
              "model": HUANG_MODEL, "train": {**HUANG_TRAIN, "steps": 25_000, "log_every": 20}},
    quick={"data": {"features": 8, "d": 8, "n": 512},
           "train": {"steps": 4500, "log_every": 10, "count_samples": 5000}},
))
# Inside Theorems 3.1-3.2's N ≫ K³ (N = 10 K³): no enumeration of the counts is feasible there, so GD runs on the
# sampled-counts engine (train.batch fresh multinomial count vectors a step, the population gradient in
# expectation) and the metrics on a fixed Monte-Carlo set of train.count_samples count vectors.
RECIPES.append(Recipe(
    name="huang-balanced-large-n", paper="huang",
    description="balanced features at N = 10 K³ (inside Thm 3.1's N ≫ K³) by the sampled-counts engine, held "
    "against exact population GD (reduced to u = A − B, exact at any N)",
    runner=functools.partial(run, methods=(COUNTS,)), result=HuangResult,
    combine=combine, assumptions=assumptions_not_met, losses=("loss",), metric="loss",
    defaults={"seeds": 4, "data": {**HUANG_DATA, "features": 8, "d": 8, "n": 5120}, "model": HUANG_MODEL,
              "train": {**HUANG_TRAIN, "oracle": "counts", "steps": 800, "batch": 1024}},
    quick={"seeds": 3, "data": {**HUANG_DATA, "n": 640}, "train": {"steps": 300, "count_samples": 5000}},
))
RECIPES.append(Recipe(
    name="huang-imbalanced-large-n", paper="huang",
    description="imbalanced features (p_1 = ½) at N = 10 K³ (inside Thm 3.2's N ≫ K³) by the sampled-counts engine: "
    "the dominant feature first, four phases of the others",
    runner=functools.partial(run, methods=(COUNTS,)), result=HuangResult,
    combine=combine, assumptions=assumptions_not_met, losses=("loss",), metric="loss",
    defaults={"data": {**HUANG_DATA, "features": 16, "d": 16, "n": 40_960, "p_dominant": 0.5},
              "model": HUANG_MODEL, "train": {**HUANG_TRAIN, "oracle": "counts", "steps": 25_000, "log_every": 20,
                                              "batch": 1024}},
    quick={"data": {"features": 8, "d": 8, "n": 5120},
           "train": {"steps": 4500, "log_every": 10, "count_samples": 2000, "batch": 256}},
))
RECIPES.append(Recipe(
    name="huang-phase-scaling", paper="huang",
    description="phase-I length t_½ against K = 4…32 (N = K³): fitted exponent vs the O(K² log K / η) bound",
    runner=functools.partial(run, methods=(EXACT,), n_power=3), result=HuangResult,
    combine=combine, derive=scaled_point, assumptions=assumptions_not_met,
    defaults={"grid": {"data.features": [4, 8, 16, 32]}, "data": HUANG_DATA, "model": HUANG_MODEL,
              "train": {**HUANG_TRAIN, "steps": 1600, "count_samples": 10_000}},
    quick={"grid": {"data.features": [4, 6, 8, 12, 16]}, "train": {"steps": 450}},
))
RECIPES.append(Recipe(
    name="huang-ood", paper="huang",
    description="the trained model on task laws unseen in training (Rademacher, sphere, anisotropic, shifted)",
    runner=functools.partial(run, methods=(EXACT,)), result=HuangResult,
    combine=combine, assumptions=assumptions_not_met, losses=("loss",), metric="loss",
    defaults={"data": HUANG_DATA, "model": HUANG_MODEL, "train": {**HUANG_TRAIN, "steps": 400}},
    quick={"train": {"steps": 300}},
))
