"""Figures of Goel, Soltanolkotabi, Bartlett: convergence of Algorithm 1 and its baselines, the floor
against n, iterations against κ(Σ)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

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
            ax.plot(x, np.maximum(m, 1e-17), style, color=f"C{i % 10}", label=p.point)
            ax.fill_between(x, np.maximum(lo, 1e-17), np.maximum(hi, 1e-17), color=f"C{i % 10}", alpha=0.15)
    axes[0].axhline(result.target or 1e-8, color="k", lw=0.6, ls="--")
    axes[0].set(yscale="log", xlabel="iteration", ylabel="L(θ) − L* (exact)", title="excess population loss")
    axes[1].set(yscale="log", xlabel="iteration", ylabel="‖θ − Π_S(θ)‖_P", title="P-distance to the manifold S")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: the curves stay visible
    fig.suptitle(f"{cfg.experiment} (solid: exact population gradient; dotted: sampled prompts, n={cfg.data.n})\n"
                 f"{sub}", fontsize=9)
    names.append(save(fig, rd, "convergence"))

    if result.slope is not None:
        ns = np.array([p.n for p in points], float)
        floors = np.array([p.floor for p in points])
        per_seed = [[s.floor for s in p.seeds] for p in points]
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        for n, fs in zip(ns, per_seed):
            ax.plot([n] * len(fs), fs, ".", color="C0", alpha=0.4)
        ax.plot(ns, floors, "o-", color="C0", label=f"measured floor, slope {result.slope:.2f} "
                f"[{result.slope_ci[0]:.2f}, {result.slope_ci[1]:.2f}]")
        bound = sample_size_bound(ns)
        ax.plot(ns, bound * floors[-1] / bound[-1], "k--",
                label=f"n⁻² log⁶ n (scaled), slope {result.bound_slope:.2f}")
        ax.plot(ns, floors[0] * (ns / ns[0]) ** -2.0, "k:", lw=0.8, label="n⁻²")
        ax.set(xscale="log", yscale="log", xlabel="samples per prompt n", ylabel="floor L(θ) − L*",
               title=f"{cfg.experiment}: Algorithm 1, sampled gradients\n{sub}")
        ax.legend(fontsize=8)
        names.append(save(fig, rd, "floor_vs_n"))

    if cfg.experiment == "goel-conditioning":
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        reached = False
        for i, name in enumerate(dict.fromkeys(p.method for p in points)):
            sel = [p for p in points if p.method == name]
            steps = [p.steps_to_target if p.steps_to_target is not None else np.nan for p in sel]
            reached = reached or bool(np.isfinite(steps).any())
            ax.plot([p.kappa for p in sel], steps, "o-", color=f"C{i}", label=name)
        ax.axhline(cfg.train.steps, color="k", lw=0.6, ls="--", label="budget (not reached above)")
        scale = "log" if reached else "linear"  # none reached: nothing to draw on log axes
        ax.set(xscale=scale, yscale=scale, xlabel="κ(Σ)",
               ylabel=f"iterations to L − L* < {result.target or 1e-8:g}",
               title=f"{cfg.experiment}\n{sub}")
        ax.legend(fontsize=8)
        names.append(save(fig, rd, "iterations_vs_kappa"))
    return names
