"""Figures of Goel, Soltanolkotabi, Bartlett: convergence of Algorithm 1 and its baselines, the floor
against n, iterations against κ(Σ)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
from icldyn.config import RunConfig
from icldyn.papers.goel.results import GoelResult
from icldyn.plots import save, series


def figures(cfg: RunConfig, result: GoelResult, rows: dict[str, list], rd) -> list[str]:
    """Goel et al.: excess loss and P-distance to S against iteration (log scale) per method; the floor
    against n beside n⁻² log⁶ n; iterations to the target against κ(Σ)."""
    from icldyn.papers.goel.theory import sample_size_bound

    points = [p for p in result.points if p.tuned_best is not False]
    sub = (f"d={cfg.data.d}, p={cfg.data.p}, ‖MΣ½‖={cfg.data.m_norm:g}, σ={cfg.data.noise_std:g}, "
           f"{cfg.seeds} seed(s), {cfg.train.dtype}")
    names = []
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.3))
    for i, p in enumerate(points):
        style = "-" if p.oracle == "population" else ":"
        for ax, metric in zip(axes, ("excess_loss", "p_distance")):
            x, m, lo, hi = series(rows, p.point, metric)
            if not len(x):
                continue
            ax.plot(x, np.maximum(m, 1e-17), style, color=f"C{i % 10}", label=plots.readable(p.point))
            ax.fill_between(x, np.maximum(lo, 1e-17), np.maximum(hi, 1e-17), color=f"C{i % 10}", alpha=0.15)
    target = result.target or 1e-8
    axes[0].axhline(target, color="k", lw=0.6, ls="--")
    axes[0].annotate(f"target {target:g}", (1.0, target), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                     fontsize=7)
    axes[0].set(yscale="log", xlabel="iteration", ylabel="L(θ) − L* (exact; log scale)",
                title="excess population loss (floored at 1e-17)")
    axes[1].set(yscale="log", xlabel="iteration", ylabel="‖θ − Π_S(θ)‖_P (log scale)",
                title="P-distance to the manifold S")
    plots.note_missing(axes[0], [plots.readable(p.point) for p in points
                                 if not len(series(rows, p.point, "excess_loss")[0])])
    plots.legend(axes[1], fontsize=7)  # outside: the curves stay visible
    fig.suptitle(f"{cfg.experiment} (solid: exact population gradient; dotted: sampled prompts, n={cfg.data.n})\n"
                 f"{sub}", fontsize=9)
    names.append(save(fig, rd, "convergence"))

    if result.slope is not None:
        gone = [p for p in points if not np.isfinite(p.floor)]  # a diverged point has no floor: named, not drawn
        points = [p for p in points if np.isfinite(p.floor)]
        ns = np.array([p.n for p in points], float)
        floors = np.array([p.floor for p in points])
        per_seed = [[s.floor for s in p.seeds] for p in points]
        fig, ax = plt.subplots(figsize=(8.0, 4.3))
        for j, (n, fs) in enumerate(zip(ns, per_seed)):
            ax.plot([n] * len(fs), fs, ".", color="C0", alpha=0.4, label="each seed" if j == 0 else None)
        ax.plot(ns, floors, "o-", color="C0", label=f"measured floor, slope {result.slope:.2f} "
                f"[{result.slope_ci[0]:.2f}, {result.slope_ci[1]:.2f}]")
        bound = sample_size_bound(ns)
        ax.plot(ns, bound * floors[-1] / bound[-1], "k--",
                label=f"n⁻² log⁶ n (scaled), slope {result.bound_slope:.2f}")
        ax.plot(ns, floors[0] * (ns / ns[0]) ** -2.0, "k:", lw=0.8, label="n⁻²")
        ax.set(xscale="log", yscale="log", xlabel="samples per prompt n (log scale)",
               ylabel="floor L(θ) − L* (log scale)", title=f"{cfg.experiment}: Algorithm 1, sampled gradients\n{sub}")
        plots.note_missing(ax, [f"n = {p.n}" for p in gone], "diverged, no floor")
        plots.log_ticks(ax, ns)
        plots.legend(ax)
        names.append(save(fig, rd, "floor_vs_n"))

    if cfg.experiment == "goel-conditioning":
        fig, ax = plt.subplots(figsize=(8.0, 4.3))
        budget = cfg.train.steps
        for i, name in enumerate(dict.fromkeys(p.method for p in points)):
            sel = sorted((p for p in points if p.method == name), key=lambda p: p.kappa or 0.0)
            steps = [p.steps_to_target if p.steps_to_target is not None else np.nan for p in sel]
            kap = [p.kappa for p in sel]
            # markers of decreasing size: methods that tie at a κ stay visible, one inside the other
            ax.plot(kap, steps, "-", marker="osD^v"[i % 5], ms=10 - 2.5 * (i % 3), color=f"C{i}",
                    label=f"{plots.readable(name)} (best η)")
            miss = [k for k, s in zip(kap, steps) if not np.isfinite(s)]
            if miss:  # not reached within the budget: an open marker on the budget line, never a silent gap
                ax.plot(miss, [budget] * len(miss), "^", mfc="none", mec=f"C{i}", ms=12 - 3 * (i % 3), mew=1.5,
                        label=f"{plots.readable(name)}: not reached by {budget} at κ = "
                        + ", ".join(f"{k:g}" for k in miss))
        ax.axhline(budget, color="k", lw=0.6, ls="--", label=f"budget ({budget} iterations)")
        ax.set(xscale="log", yscale="log", xlabel="κ(Σ) (log scale)",
               ylabel=f"iterations to stay below L − L* < {result.target or 1e-8:g} (log scale)",
               title=f"{cfg.experiment}\n{sub}")
        plots.log_ticks(ax, [p.kappa for p in points])
        plots.legend(ax)
        names.append(save(fig, rd, "iterations_vs_kappa"))
    return names
