"""Goel, Soltanolkotabi, Bartlett recipes: Algorithm 1 against GD / Adam / SGD and its ablations
(goel-convergence), the statistical floor against n (goel-sample-size), and iterations against κ(Σ)
with and without the preconditioner (goel-conditioning).

Each recipe trains a list of *methods* (named config overrides) at every grid point. A method with
several learning rates trains them on the trainer's learning-rate axis (one vmapped program) and
reports the best one ("tuned").
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, NamedTuple

import numpy as np

from icldyn.components.regression import make_regression_task
from icldyn.config import RunConfig, with_overrides
from icldyn.papers.goel import theory
from icldyn.papers.goel.figures import figures as draw_figures
from icldyn.papers.goel.problem import GoelTask, build, stack
from icldyn.papers.goel.results import GoelPoint, GoelResult
from icldyn.recipe import Job, Recipe, Reporter, Rows, Table, Target, Trained, curve, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.loop import History

TARGET = 1e-8  # excess population loss the convergence recipes time


class Method(NamedTuple):
    name: str
    overrides: dict[str, Any]
    lrs: tuple[float, ...] = ()  # several: trained together, the best reported as tuned


# what a sweep's runs may differ in and still be one program (the seed axis or the optimiser state, never a
# shape): the seeds, the data law (Σ, M, noise) and the learning rate of the methods that do not tune it
GROUP_FIELDS = ("train.lr", "seed", "seeds", "data.covariance", "data.eigenvalues", "data.condition_number",
                "data.m_norm", "data.m_singular_values", "data.noise_std")
ADAM_LRS = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
ETAS = (2.5, 5.0, 10.0, 20.0, 40.0)  # GD step sizes tried (η = 40 diverges at ‖MΣ^½‖ = 0.05)
RANDOM = {"model.init": "random", "train.precondition": False, "train.regularizer": 0.0}
CONVERGENCE_METHODS = (
    Method("algorithm 1", {}, ETAS),
    Method("no preconditioner", {"train.precondition": False}),
    Method("no regulariser", {"train.regularizer": 0.0}),
    Method("random init", {"model.init": "random"}),
    Method("GD", RANDOM, ETAS),
    Method("Adam", {**RANDOM, "train.optimizer": "adam"}, ADAM_LRS),
    Method("Adam, cosine", {**RANDOM, "train.optimizer": "adam", "train.schedule": "cosine"}, ADAM_LRS),
    Method("SGD", {**RANDOM, "train.oracle": "sampled"}),
    Method("algorithm 1, sampled", {"train.oracle": "sampled"}),
)
ALGORITHM1 = (Method("algorithm 1", {}),)
CONDITIONING_METHODS = (Method("algorithm 1", {}, ETAS),
                        Method("no preconditioner", {"train.precondition": False}, ETAS))


def predicted_rate(pcfg: RunConfig, tasks: GoelTask, i: int, lr: float, params: dict) -> dict[str, float] | None:
    """Seed i's local rate of the P-distance from theory (:func:`icldyn.papers.goel.theory.local_rate`) at the point of
    S its run converges to (the projection of its final parameters: with P̂ that is close to the projection of
    the start, without it the iterates drift along S first), for plain GD with the population oracle and the
    regulariser from the spectral initialisation (with or without P̂); None for every other method."""
    t = pcfg.train
    if (pcfg.model.init != "spectral" or t.oracle != "population" or not t.regularizer or t.optimizer != "sgd"
            or t.momentum or t.schedule != "constant" or t.clip):
        return None
    M, sigma, sigma_hat = (np.asarray(a[i], np.float64) for a in (tasks.M, tasks.sigma, tasks.sigma_hat))
    A, B = (np.asarray(params[k][i], np.float64) for k in ("A", "B"))
    if not (np.isfinite(A).all() and np.isfinite(B).all()):  # a diverged slot has no limit point
        return None
    J = theory.project_jit(A, B, M, sigma).J
    r = theory.local_rate(M, sigma, lr, sigma_hat, J, t.precondition, t.regularizer)
    return {"mu": r.mu, "eta_best": r.eta_best, "mu_best": r.mu_best}


def summarise_point(label: str, method: Method, pcfg: RunConfig, lr: float, seeds: list[int], hist: History,
              wall: float, tasks: GoelTask, params: dict) -> dict[str, Any]:
    """Per-seed curves → iterations to TARGET, fitted μ of the P-distance (and theory's, where it applies),
    final and initial excess loss."""
    out_seeds = []
    for i, seed in enumerate(seeds):
        steps, excess = curve(hist, "excess_loss", i)
        _, dist = curve(hist, "p_distance", i)
        rate = theory.fit_rate(steps, dist)
        tail = excess[len(excess) * 3 // 4:]  # the floor: mean over the last quarter of the logged curve
        out_seeds.append({"initial_excess": float(excess[0]),
                          "final_excess": float(excess[-1]), "floor": float(np.mean(tail)),
                          "final_p_distance": float(dist[-1]),
                          "steps_to_target": theory.steps_to(steps, excess, TARGET),
                          "first_below_target": theory.steps_to(steps, excess, TARGET, stay=False),
                          "rate": rate._asdict() if rate else None,
                          "predicted": predicted_rate(pcfg, tasks, i, lr, params)})
    reached = [s["steps_to_target"] for s in out_seeds]
    mus = [s["rate"]["mu"] for s in out_seeds if s["rate"]]
    predicted = [s["predicted"]["mu"] for s in out_seeds if s["predicted"]]
    return {"point": label, "method": method.name, "lr": lr, "n": pcfg.data.n,
            "kappa": pcfg.data.condition_number if pcfg.data.covariance == "condition" else None,
            "oracle": pcfg.train.oracle, "seeds": out_seeds, "wall_s": wall,
            "steps_to_target": None if None in reached else int(max(reached)),  # the slowest seed
            "mu": float(np.mean(mus)) if mus else None,
            "mu_theory": float(np.mean(predicted)) if predicted else None,
            "final_excess": float(np.mean([s["final_excess"] for s in out_seeds])),
            "floor": float(np.mean([s["floor"] for s in out_seeds])),
            "initial_excess": float(np.mean([s["initial_excess"] for s in out_seeds])),
            "final_p_distance": float(np.mean([s["final_p_distance"] for s in out_seeds]))}


def _tuning_key(steps_to_target: int | None, final_excess: float) -> tuple:
    """Tuning order: reaches the target sooner; else lower final excess loss (a diverged setting last)."""
    return steps_to_target is None, steps_to_target or 0, final_excess if np.isfinite(final_excess) else np.inf


def _better(a: GoelPoint, b: GoelPoint) -> bool:
    return _tuning_key(a.steps_to_target, a.final_excess) < _tuning_key(b.steps_to_target, b.final_excess)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter, methods: tuple[Method, ...]) -> Trained:
    return run_group([cfg], [rd], reporter, methods)[0]


def run_group(cfgs: list[RunConfig], rds: list[RunDir], reporter: Reporter,
              methods: tuple[Method, ...]) -> list[Trained]:
    """Train every (grid point × method) of runs that differ only in ``GROUP_FIELDS`` (one run, or a sweep's
    job: the runs stacked on the seed axis); a method's learning rates are the trainer's learning-rate axis, the
    best one marked ``tuned_best`` and the others ``tuning`` (their divergence is a tuning result)."""
    cfg, runs = cfgs[0], range(len(cfgs))

    def jobs():
        for glabel, gover in grid_points(cfg):
            for method in methods:
                pcfgs = [with_overrides(c, {**gover, **method.overrides}) for c in cfgs]
                setups = [build(c) for c in pcfgs]
                data = stack(setups) if len(cfgs) > 1 else setups[0]
                name = ", ".join(x for x in (glabel, method.name) if x)
                labels = [name + f" (lr={lr:g})" for lr in method.lrs] or [name]
                # slots: rate-major, then the runs' seeds in order — one target per (rate, run)
                targets = [Target(m, label, setups[m].seeds) for label in labels for m in runs]
                untuned_stack = not method.lrs and len(cfgs) > 1  # each run's slots at its own train.lr
                slot_lrs = [c.train.lr for c, s in zip(pcfgs, setups) for _ in s.seeds] if untuned_stack else None

                def summarise(trained, wall, method=method, pcfgs=pcfgs, setups=setups, labels=labels, gover=gover):
                    out = []
                    for ((g, label), m), (params, hist) in zip(itertools.product(enumerate(labels), runs), trained):
                        lr = method.lrs[g] if method.lrs else pcfgs[m].train.lr
                        out.append((m, {**summarise_point(label, method, pcfgs[m], lr, setups[m].seeds, hist, wall,
                                                          setups[m].tasks, params),
                                        "grid": gover, "assumptions": setups[m].assumptions}))
                    for m in runs if method.lrs else ():
                        mine = [p for mm, p in out if mm == m]
                        best = min(mine, key=lambda p: _tuning_key(p["steps_to_target"], p["final_excess"]))
                        for p in mine:
                            p["tuned_best"], p["tuning"] = p is best, p is not best
                    return [p for _, p in out]

                yield Job(cfg=pcfgs[0], targets=targets, problem=data.problem, opt=data.opt, tasks=data.tasks,
                          keys=data.keys, summarise=summarise, lrs=list(method.lrs) or None, slot_lrs=slot_lrs,
                          description=name if len(cfgs) == 1 else f"{name} ({len(cfgs)} runs)")

    return run_jobs(rds, reporter, jobs())


def combine(cfg: RunConfig, points: list[GoelPoint], rows: Rows, out: RunDir | None) -> GoelResult:
    """The recipe's summary (speed-up, slope, iterations by κ), the paper's assumption checks, figures, table and
    notes from its points — a run's, or a sweep's gathered (:func:`icldyn.sweep.report`)."""
    checks = list({repr(a): a for p in points for a in p.assumptions}.values())
    fields = {"points": points, "target": TARGET, "assumptions": checks,
              "warnings": sorted({w for a in checks for w in a["warnings"]}),
              **RECIPE_SUMMARIES.get(cfg.experiment, lambda c, p: {})(cfg, points)}
    res = GoelResult(**fields)
    lines = headline(res)
    return GoelResult(**fields, figures=draw_figures(cfg, res, rows, out), table=table(points), headline=lines,
                      report_lines=lines + report_lines(res))


def _shown(points: list[GoelPoint]) -> list[dict]:
    """Points a summary shows: every untuned method, and the best learning rate of a tuned one."""
    return [p for p in points if p.tuned_best is not False]


def convergence_summary(cfg: RunConfig, points: list[GoelPoint]) -> dict[str, Any]:
    """Iterations (and seconds) to excess loss TARGET: Algorithm 1 against the best-tuned Adam."""
    alg = next(p for p in points if p.method == "algorithm 1" and p.tuned_best is not False)
    adams = [p for p in points if p.method.startswith("Adam") and p.tuned_best]
    adam = functools.reduce(lambda a, b: b if _better(b, a) else a, adams) if adams else None
    out = {"algorithm1_steps": alg.steps_to_target, "algorithm1_mu": alg.mu, "algorithm1_lr": alg.lr,
           "algorithm1_mu_theory": alg.mu_theory}
    best = [s.predicted for s in alg.seeds if s.predicted]
    if best:  # the slowest seed's best local rate over every step size
        slowest = max(best, key=lambda b: b.mu_best)
        out["algorithm1_mu_best"], out["algorithm1_eta_best"] = slowest.mu_best, slowest.eta_best
    if adam is not None:
        out["adam_best"] = adam.point
        out["adam_best_lr"] = adam.lr
        out["adam_first_below"] = max(s.first_below_target or cfg.train.steps for s in adam.seeds)
        out["adam_steps"] = adam.steps_to_target
        budget = cfg.train.steps
        if alg.steps_to_target:
            # Adam not reaching the target within the budget makes the ratio a lower bound
            out["speedup_lower_bound"] = adam.steps_to_target is None
            out["speedup"] = (adam.steps_to_target or budget) / alg.steps_to_target
    return out


def sample_size_summary(cfg: RunConfig, points: list[GoelPoint]) -> dict[str, Any]:
    """Log-log slope of the floor L(θ_∞) − L* against n, with a 95% confidence interval."""
    from scipy import stats

    points = [p for p in points if np.isfinite(p.floor)]  # a diverged point has no floor
    ns = np.array([p.n for p in points], float)
    floors = np.array([p.floor for p in points])
    if len(ns) < 3:
        return {}
    fit = stats.linregress(np.log(ns), np.log(floors))
    half = stats.t.ppf(0.975, len(ns) - 2) * fit.stderr
    bound = theory.sample_size_bound(ns)
    return {"slope": float(fit.slope), "slope_ci": [float(fit.slope - half), float(fit.slope + half)],
            "bound_slope": float(np.polyfit(np.log(ns), np.log(bound), 1)[0]),
            "floor_below_init": bool(all(p.floor < p.initial_excess for p in points))}


def conditioning_summary(cfg: RunConfig, points: list[GoelPoint]) -> dict[str, Any]:
    return {"steps_by_kappa": {p.point: p.steps_to_target for p in points}}


RECIPE_SUMMARIES = {"goel-convergence": convergence_summary, "goel-sample-size": sample_size_summary,
                    "goel-conditioning": conditioning_summary}


def _fmt(x: Any, spec: str = ".4g") -> str:
    return "—" if x is None else format(x, spec) if isinstance(x, (float, int)) else str(x)


def table(points: list[GoelPoint]) -> Table:
    cols = ["point", "oracle", f"iterations to stay < {TARGET:g}", "μ (P-distance)", "μ (theory)", "initial excess",
            "final excess", "floor", "final P-distance", "wall s"]
    rows = [[p.point, p.oracle, _fmt(p.steps_to_target), _fmt(p.mu, ".4f"),
             _fmt(p.mu_theory, ".4f"), _fmt(p.initial_excess),
             _fmt(p.final_excess), _fmt(p.floor), _fmt(p.final_p_distance), _fmt(p.wall_s, ".1f")]
            for p in _shown(points)]
    return Table(columns=cols, rows=rows)


def headline(result: GoelResult) -> list[str]:
    lines = [f"Assumption warning: {w}" for w in result.warnings]
    if result.speedup is not None:
        bound = "≥ " if result.speedup_lower_bound else ""
        lines += [f"Algorithm 1 reaches excess loss {TARGET:g} (and stays below) in {result.algorithm1_steps} "
                  f"iterations; the best-tuned Adam ({result.adam_best}) in {_fmt(result.adam_steps)} "
                  f"(first dips below at {result.adam_first_below}): {bound}{result.speedup:.1f}× fewer "
                  "iterations (slowest seed each).", ""]
    if result.algorithm1_mu_theory:
        lines += [f"Algorithm 1 (η = {result.algorithm1_lr:g}): the P-distance to S contracts by μ = "
                  f"{result.algorithm1_mu:.4f} per iteration (fitted), {result.algorithm1_mu_theory:.4f} "
                  "predicted by linearising at θ* (mean over seeds). No step size contracts faster than "
                  f"μ* = {result.algorithm1_mu_best:.4f} (η* = {result.algorithm1_eta_best:.3g}) for the "
                  "slowest seed.", ""]
    if result.slope is not None:
        lo, hi = result.slope_ci
        lines += [f"Floor vs n: log-log slope {result.slope:.2f} (95% CI [{lo:.2f}, {hi:.2f}]); the bound "
                  f"n⁻² log⁶ n has slope {result.bound_slope:.2f} over the same n.", ""]
    return lines


def _unstable(p: GoelPoint) -> str:
    steps = sorted(x.diverged_at for x in p.seeds if x.diverged_at is not None)
    return "unstable" + (f" (diverged from step {steps[0]})" if steps else "")


def report_lines(result: GoelResult) -> list[str]:
    lines = []
    tuned = [p for p in result.points if p.tuned_best is not None]
    if tuned and len(tuned) <= 30:
        lines += ["Learning-rate tuning (one program): " + ", ".join(
            f"{p.method} η {p.lr:g} → " + (_unstable(p) if any(x.status == "diverged" for x in p.seeds)
                                            else f"{_fmt(p.steps_to_target)} it., final {_fmt(p.final_excess)}")
            for p in tuned) + ". A rate marked unstable lies above the stable range: an intended point of the grid "
            "(a result), not a failure.", ""]
    a = result.assumptions[0]
    lines += ["", f"‖MΣ^½‖_op = {a['norm_M_sigma_half']:.4g}, σ_d(MΣ^½) = {a['sigma_d']:.4g}, κ(Σ) = "
              f"{a['kappa_sigma']:.3g} (seed 0). Excess loss L(θ) − L* and the P-distance to the manifold S are "
              "exact closed forms; 'floor' is the mean excess over the last quarter of the run.", ""]
    return lines


def assumptions_not_met(cfg: RunConfig) -> list[str]:
    """Goel et al.'s assumptions (p ≥ d, MΣ^½ of full column rank, ‖MΣ^½‖_op < 1/16) that a seed's
    regression task does not meet (:func:`icldyn.papers.goel.theory.assumptions`)."""
    tasks = [make_regression_task(cfg.data, s) for s in range(cfg.seed, cfg.seed + cfg.seeds)]
    found = [w for t in tasks for w in theory.assumptions(t.M, t.sigma)["warnings"]]
    return list(dict.fromkeys(found))


GOEL_DATA = {"kind": "regression", "d": 3, "p": 4, "covariance": "condition", "condition_number": 4.0,
             "m_norm": 0.05, "noise_std": 0.1, "n": 200}
GOEL_MODEL = {"kind": "softmax_regressor", "init": "spectral", "init_std": 0.01}
GOEL_TRAIN = {"optimizer": "sgd", "lr": 20.0, "precondition": True, "regularizer": 1.0, "oracle": "population",
              "schedule": "constant", "clip": 0.0, "dtype": "float64", "batch": 50, "steps": 2000, "log_every": 5,
              "max_loss": 1e3}

def _recipe(name: str, description: str, methods: tuple[Method, ...], defaults: dict, quick: dict) -> Recipe:
    """A Goel recipe: every method of ``methods`` at every grid point, grouped runs stacked on the seed axis. Where
    every method tunes its own step sizes, ``train.lr`` would be ignored: it is refused."""
    return Recipe(name=name, paper="goel", description=description, runner=functools.partial(run, methods=methods),
                  result=GoelResult, group_runner=functools.partial(run_group, methods=methods),
                  group_fields=GROUP_FIELDS, combine=combine, assumptions=assumptions_not_met, defaults=defaults,
                  quick=quick, losses=("excess_loss",), metric="excess_loss",
                  ignores=("train.lr",) if all(m.lrs for m in methods) else ())


RECIPES: list[Recipe] = [  # this module's recipes, in `icldyn list` order
    _recipe("goel-convergence",
            "Algorithm 1 vs GD / tuned Adam / SGD and its ablations: excess loss and P-distance to S, fitted rate μ",
            CONVERGENCE_METHODS,
            {"seeds": 5, "data": GOEL_DATA, "model": GOEL_MODEL, "train": {**GOEL_TRAIN, "steps": 5000}},
            {"seeds": 2, "train": {"steps": 1000, "batch": 16}}),
    _recipe("goel-sample-size",
            "Algorithm 1 with sampled gradients: the floor L(θ_∞) − L* against n, beside the n⁻² log⁶ n bound",
            ALGORITHM1,
            {"seeds": 5, "grid": {"data.n": [20, 50, 100, 200, 500, 1000, 2000]}, "data": GOEL_DATA,
             # small n makes the sampled gradient noisy: a smaller step than the population recipes' η = 20
             "model": GOEL_MODEL, "train": {**GOEL_TRAIN, "oracle": "sampled", "lr": 2.5, "batch": 16,
                                            "steps": 1500, "log_every": 10}},
            {"seeds": 2, "grid": {"data.n": [20, 40, 80, 160, 320]}, "train": {"steps": 800}}),
    _recipe("goel-conditioning",
            "iterations to excess loss 1e-8 against κ(Σ) ∈ {1, 10, 100}, with and without the preconditioner",
            CONDITIONING_METHODS,
            {"seeds": 5, "grid": {"data.condition_number": [1.0, 10.0, 100.0]}, "data": GOEL_DATA,
             "model": GOEL_MODEL, "train": {**GOEL_TRAIN, "steps": 20_000, "log_every": 10}},
            {"seeds": 2, "train": {"steps": 5000}}),
]
