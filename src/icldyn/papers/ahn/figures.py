"""Figures of Ahn et al. (2023), arXiv 2306.00297: test-loss curves, loss against L and n (Figs. 6-7),
the structure of trained weights (Thms 3-4)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
from icldyn.config import RunConfig
from icldyn.papers.ahn.results import AhnPoint
from icldyn.plots import save, series

SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def subtitle(cfg: RunConfig) -> str:
    """The prompt law and run size, as the config has them (grid axes are named per line, not here)."""
    law = plots.describe_gaussian(cfg.data)
    if "data.n" in cfg.grid:
        law = law.replace(f"n={cfg.data.n}, ", "")
    m = cfg.model
    model = "" if "model.layers" in cfg.grid else f"L={m.layers}, "
    model += "" if "model.parameterization" in cfg.grid else f"{m.parameterization}, "
    act = getattr(m, "activation", "linear")
    model += "" if act == "linear" or "model.activation" in cfg.grid else f"{act} attention, "
    return f"{model}{law}, {cfg.seeds} seed{'s' if cfg.seeds > 1 else ''}, {cfg.train.dtype}"


def loss_curves(cfg: RunConfig, points: list[AhnPoint], rows: dict[str, list], rd) -> str:
    return plots.loss_curves(points, rows, rd, f"{cfg.experiment}: test loss\n{subtitle(cfg)}")


def _gapped(x: list, *ys: list) -> tuple[np.ndarray, ...]:
    """Lines broken where a layer count is missing from the grid (L = 1, 2, 4: no line across L = 3)."""
    xs, out = [], [[] for _ in ys]
    for i, v in enumerate(x):
        if i and v - x[i - 1] > 1:
            xs.append(np.nan)
            for o in out:
                o.append(np.nan)
        xs.append(v)
        for o, y in zip(out, ys):
            o.append(y[i])
    return (np.asarray(xs, float), *(np.asarray(o, float) for o in out))


def loss_vs(cfg: RunConfig, points: list[AhnPoint], key: str, rd) -> str:
    """Trained transformer vs the baselines against a grid axis (``layers`` or ``n``): Figs. 6-7. Theorem 1's
    optimum (L = 1) is a hollow star drawn over the trained marker; a point with no finite seed is marked on the
    axis and named."""
    points = sorted(points, key=lambda p: getattr(p, key))
    x = [getattr(p, key) for p in points]
    tf = [p.test_loss if np.isfinite(p.test_loss) else np.nan for p in points]
    sd = [p.test_loss_std if np.isfinite(p.test_loss_std) else 0.0 for p in points]
    gap = key == "layers"
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    xx, yy, ee = _gapped(x, tf, sd) if gap else (np.asarray(x, float), np.asarray(tf), np.asarray(sd))
    ax.errorbar(xx, yy, yerr=ee if cfg.seeds > 1 else None, marker="o", zorder=3,
                label=f"trained TF ({points[0].parameterization})" + (", ± sd over seeds" if cfg.seeds > 1 else ""))
    for attr, style, label in (("gd", "s--", "GD, tuned step"), ("pgd", "^--", "preconditioned GD (Σ⁻¹), tuned step")):
        xs, ys = _gapped(x, [getattr(p, attr) if getattr(p, attr) is not None else np.nan for p in points]) if gap \
            else (x, [getattr(p, attr) for p in points])
        ax.plot(xs, ys, style, label=label)
    if key == "n":
        ols = [max(p.ols, 1e-8) for p in points]
        ax.plot(x, ols, "x:", label="OLS (0 for n ≥ d; floored at 1e-8)")
    opt = [(xv, p.optimal_loss) for xv, p in zip(x, points) if p.optimal_loss is not None]
    if opt:
        ax.plot(*zip(*opt), "*", ms=15, mfc="none", mec="k", mew=1.3, zorder=5,
                label="Theorem 1 optimum (population)" if points[0].layers == 1 or key == "layers" else "optimum")
    bad = [xv for xv, v in zip(x, tf) if not np.isfinite(v)]
    if bad:
        ax.plot(bad, [np.nanmin([v for v in tf if np.isfinite(v)] or [1.0])] * len(bad), "rx", ms=9,
                label=f"no finite seed (diverged) at {'L' if gap else 'n'} = {', '.join(map(str, bad))}")
    missing = [v for v in range(min(x), max(x) + 1) if v not in x] if gap else []
    across = f"\nno line across L = {', '.join(map(str, missing))} (not in the grid)" if missing else ""
    ax.set(yscale="log", xlabel=("layers L (= GD steps)" + across if gap else "context examples n"),
           ylabel="held-out test loss E[(ŷ − y)²] (log scale)", title=f"{cfg.experiment}\n{subtitle(cfg)}")
    ax.set_xticks(x)
    plots.legend(ax)
    return save(fig, rd, f"loss_vs_{key}")


def structure(cfg: RunConfig, points: list[AhnPoint], rows: dict[str, list], rd) -> list[str]:
    """Distances to Σ⁻¹ and I over training (Thms 3-4), heat maps of Σ^½A_ℓΣ^½ and B_ℓ, ‖A_ℓ‖."""
    names = []
    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 4.0), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p.layers):
            sub = str(ell).translate(SUBSCRIPT)
            for metric, style, name in ((f"dist_sigma_A{ell}", "-", f"Dist(Σ½A{sub}Σ½, I)"),
                                        (f"dist_I_A{ell}", ":", f"Dist(A{sub}, I)"),
                                        (f"dist_I_B{ell}", "--", f"Dist(B{sub}, I)")):
                x, m, _, _ = series(rows, p.point, metric)
                if len(x):
                    ax.plot(x, m, style, color=f"C{ell}", label=name)
        ax.set(xlabel="step", ylabel="scale-invariant distance", ylim=(0, 1.05),
               title=plots.readable(p.point, p.parameterization))
        ax.locator_params(axis="x", nbins=5)  # 20 000 steps in a 5-inch panel: the default ticks run together
        if not ax.lines:
            plots.note_missing(ax, ["distances"])
    if any(ax.lines for ax in axes[0]):  # the same lines in every panel: one legend, outside
        plots.legend(max(axes[0], key=lambda a: len(a.lines)), fontsize=7)
    fig.suptitle(f"{cfg.experiment}: scale-invariant distances\n{subtitle(cfg)}", fontsize=9)
    names.append(save(fig, rd, "distances"))

    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 3.6), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p.layers):
            x, m, lo, hi = series(rows, p.point, f"norm_A{ell}")
            ax.plot(x, m, color=f"C{ell}", label=f"‖A{str(ell).translate(SUBSCRIPT)}‖_F")
            ax.fill_between(x, lo, hi, color=f"C{ell}", alpha=0.2)
        ax.set(xlabel="step", ylabel="Frobenius norm", title=plots.readable(p.point, p.parameterization))
    plots.legend(max(axes[0], key=lambda a: len(a.lines)))
    fig.suptitle(f"{cfg.experiment}: per-layer step sizes ‖A_ℓ‖ (Thm 4 figure: ‖A₀‖ ≤ ‖A₁‖ ≤ ‖A₂‖)\n"
                 f"{subtitle(cfg)}", fontsize=9)
    names.append(save(fig, rd, "norms"))

    for p in points:
        seed = p.seeds[0]
        A = np.asarray(seed.A)
        S = np.asarray(seed.sigma_sqrt if seed.sigma_sqrt is not None else np.eye(A.shape[-1]))
        mats = [(f"Σ½A{str(ell).translate(SUBSCRIPT)}Σ½", S @ A[ell] @ S) for ell in range(len(A))]
        if p.parameterization != "sparse":
            mats += [(f"B{str(ell).translate(SUBSCRIPT)}", np.asarray(seed.B)[ell]) for ell in range(len(A) - 1)]
        fig, axes = plt.subplots(1, len(mats), figsize=(2.6 * len(mats), 2.8), squeeze=False)
        for ax, (title, M) in zip(axes[0], mats):
            v = np.abs(M).max() or 1.0
            im = ax.imshow(M, cmap="RdBu_r", vmin=-v, vmax=v)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
            ax.set_title(title, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        at = ("Thms 3-4: scaled identities at the critical point" if cfg.data.w_prior == "inverse_covariance"
              else "Thms 3-4 assume w ~ N(0, Σ⁻¹); this run's prior differs")
        fig.suptitle(f"{cfg.experiment}: final weights, seed {seed.seed}, "
                     f"{plots.readable(p.point, p.parameterization)} ({at})\n{subtitle(cfg)}", fontsize=9)
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
