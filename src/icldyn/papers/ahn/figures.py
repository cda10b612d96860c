"""Figures of Ahn et al. (2023), arXiv 2306.00297: test-loss curves, loss against L and n (Figs. 6-7),
the structure of trained weights (Thms 3-4)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
from icldyn.config import RunConfig
from icldyn.papers.ahn.results import AhnPoint
from icldyn.plots import save, series


def subtitle(cfg: RunConfig) -> str:
    d = cfg.data
    return (f"d={d.d}, Σ={d.covariance}, w~{'N(0,I)' if d.w_prior == 'identity' else 'N(0,Σ⁻¹)'}, "
            f"{cfg.seeds} seed(s), {cfg.train.dtype}")


def loss_curves(cfg: RunConfig, points: list[AhnPoint], rows: dict[str, list], rd) -> str:
    return plots.loss_curves(points, rows, rd, f"{cfg.experiment}: test loss\n{subtitle(cfg)}")


def loss_vs(cfg: RunConfig, points: list[AhnPoint], key: str, rd) -> str:
    """Trained transformer vs the baselines against a grid axis (``layers`` or ``n``): Figs. 6-7."""
    x = [getattr(p, key) for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.errorbar(x, [p.test_loss for p in points], yerr=[p.test_loss_std for p in points], marker="o",
                label=f"trained TF ({points[0].parameterization})")
    ax.plot(x, [p.gd for p in points], "s--", label="GD, tuned step")
    ax.plot(x, [p.pgd for p in points], "^--", label="preconditioned GD (Σ⁻¹), tuned step")
    if key == "n":
        ols = [max(p.ols, 1e-8) for p in points]
        ax.plot(x, ols, "x:", label="OLS (0 for n ≥ d; floored at 1e-8)")
    if points[0].optimal_loss is not None:
        ax.plot(x[:1], [points[0].optimal_loss], "k*", ms=12, label="Theorem 1 optimum")
    ax.set(yscale="log", xlabel="layers L (= GD steps)" if key == "layers" else "context examples n",
           ylabel="test loss", title=f"{cfg.experiment}\n{subtitle(cfg)}")
    ax.set_xticks(x)
    ax.legend(fontsize=8)
    return save(fig, rd, f"loss_vs_{key}")


def structure(cfg: RunConfig, points: list[AhnPoint], rows: dict[str, list], rd) -> list[str]:
    """Distances to Σ⁻¹ and I over training (Thms 3-4), heat maps of Σ^½A_ℓΣ^½ and B_ℓ, ‖A_ℓ‖."""
    names = []
    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 4.0), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p.layers):
            for metric, style in ((f"dist_sigma_A{ell}", "-"), (f"dist_I_A{ell}", ":"), (f"dist_I_B{ell}", "--")):
                x, m, _, _ = series(rows, p.point, metric)
                if len(x):
                    ax.plot(x, m, style, color=f"C{ell}", label=metric.replace("dist_sigma_", "Dist(Σ½AΣ½,I) ").replace(
                        "dist_I_", "Dist(·,I) "))
        ax.set(xlabel="step", ylabel="distance", ylim=(0, 1.05), title=p.point or p.parameterization)
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))  # same lines in every panel
    fig.suptitle(f"{cfg.experiment}: scale-invariant distances\n{subtitle(cfg)}", fontsize=9)
    names.append(save(fig, rd, "distances"))

    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 3.6), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p.layers):
            x, m, lo, hi = series(rows, p.point, f"norm_A{ell}")
            ax.plot(x, m, color=f"C{ell}", label=f"‖A{ell}‖_F")
            ax.fill_between(x, lo, hi, color=f"C{ell}", alpha=0.2)
        ax.set(xlabel="step", ylabel="Frobenius norm", title=p.point or p.parameterization)
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"{cfg.experiment}: per-layer step sizes ‖A_ℓ‖ (Thm 4 figure: ‖A₀‖ ≤ ‖A₁‖ ≤ ‖A₂‖)\n"
                 f"{subtitle(cfg)}", fontsize=9)
    names.append(save(fig, rd, "norms"))

    for p in points:
        seed = p.seeds[0]
        A = np.asarray(seed.A)
        S = np.asarray(seed.sigma_sqrt if seed.sigma_sqrt is not None else np.eye(A.shape[-1]))
        mats = [(f"Σ½A{ell}Σ½", S @ A[ell] @ S) for ell in range(len(A))]
        if p.parameterization != "sparse":
            mats += [(f"B{ell}", np.asarray(seed.B)[ell]) for ell in range(len(A) - 1)]
        fig, axes = plt.subplots(1, len(mats), figsize=(2.6 * len(mats), 2.8), squeeze=False)
        for ax, (title, M) in zip(axes[0], mats):
            v = np.abs(M).max() or 1.0
            im = ax.imshow(M, cmap="RdBu_r", vmin=-v, vmax=v)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
            ax.set_title(title, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.suptitle(f"{cfg.experiment}: final weights, seed {seed.seed}, {p.point or p.parameterization} "
                     "(Thms 3-4, w ~ N(0, Σ⁻¹): scaled identities at the critical point)", fontsize=9)
        tag = (p.point or p.parameterization).replace("model.parameterization=", "").replace("=", "")
        names.append(save(fig, rd, f"heatmaps_{tag}"))
    return names


def figures(cfg: RunConfig, points: list[AhnPoint], rows: dict[str, list], rd) -> list[str]:
    figs = [loss_curves(cfg, points, rows, rd)]
    if "model.layers" in cfg.grid and len(points) > 1:
        figs.append(loss_vs(cfg, points, "layers", rd))
    if "data.n" in cfg.grid and len(points) > 1:
        figs.append(loss_vs(cfg, points, "n", rd))
    if cfg.experiment == "ahn-structure" or any(p.layers > 1 for p in points):
        figs += structure(cfg, [p for p in points if p.layers > 1], rows, rd)
    return figs
