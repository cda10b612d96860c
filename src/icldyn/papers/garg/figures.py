"""Figures of Garg et al.'s recipes (arXiv 2208.01066): error against in-context examples (their Figures 2 and 4),
and the training curve."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import MaxNLocator

from icldyn import plots
from icldyn.papers.garg.problem import LINEAR
from icldyn.papers.garg.results import CurvePoint

CLASS_TITLES = {"linear_regression": "linear regression", "sparse_linear_regression": "sparse linear regression",
                "noisy_linear_regression": "noisy linear regression", "linear_classification": "linear classification",
                "quadratic_regression": "quadratic regression", "relu_2nn_regression": "two-layer ReLU networks",
                "decision_tree": "decision trees", "prompts": "Gaussian prompts", "laws": "the official code's law"}


def error_vs_k(cfg, points: list[CurvePoint], rd) -> str:
    """Garg et al.'s Figure 2: the trained transformer's error at each number of in-context examples k beside the
    baselines on the same prompts (bands: ± 2 standard errors), k = d marked; the Bayes predictor solid, and below,
    where there is one, the gap transformer − Bayes at every k (± 2 paired s.e.)."""
    gaps = any(p.gap is not None for p in points)
    fig, axes = plt.subplots(2 if gaps else 1, len(points), figsize=(6.4 * len(points), 6.6 if gaps else 4.4),
                             squeeze=False, height_ratios=[2.2, 1] if gaps else None)
    for col, p in enumerate(points):
        ax = axes[0, col]
        k = np.asarray(p.k)
        for name, curve in p.baselines.items():
            c, se = np.asarray(curve), np.asarray(p.baselines_se[name])
            (line,) = ax.plot(k, c, "-" if name == p.bayes else "--", lw=2.0 if name == p.bayes else 1.3,
                              color="tab:red" if name == p.bayes else None, label=name)
            ax.fill_between(k, c - 2 * se, c + 2 * se, color=line.get_color(), alpha=0.12)
        m, se = np.asarray(p.model), np.asarray(p.model_se)
        ax.plot(k, m, "k-", lw=2.4, label=f"transformer ({len(p.seeds)} seed{'s' * (len(p.seeds) > 1)})")
        ax.fill_between(k, m - 2 * se, m + 2 * se, color="k", alpha=0.15)
        if p.bayes_risk is not None:
            ax.plot(k, p.bayes_risk, ":", color="tab:red", lw=1.2, label="Bayes risk, closed form")
        if p.function_class not in ("decision_tree", "linear_classification"):
            ax.axvline(p.d, color="0.5", lw=0.8, ls=":")
            ax.annotate(f"k = d = {p.d}", (p.d, 0.97), xycoords=("data", "axes fraction"), xytext=(3, 0),
                        textcoords="offset points", fontsize=8, ha="left", va="top")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel="in-context examples k", ylabel=p.metric, ylim=(-0.03, 1.25 if p.metric != "0-1 error" else 0.7),
               title=f"{CLASS_TITLES.get(p.function_class, p.function_class)}, d = {p.d}" + (
                   f" ({p.point})" if p.point else ""))
        plots.legend(ax)
        if gaps:
            ax = axes[1, col]
            if p.gap is not None:
                g, gse = np.asarray(p.gap), np.asarray(p.gap_se)
                ax.plot(k, g, "k-", lw=1.8, label="transformer − Bayes")
                ax.fill_between(k, g - 2 * gse, g + 2 * gse, color="k", alpha=0.15, label="± 2 s.e. (paired)")
                plots.legend(ax)
            ax.axhline(0, color="tab:red", lw=1.0)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set(xlabel="in-context examples k", ylabel="gap to Bayes")
    figure = 2 if cfg.data.kind in LINEAR else 4
    fig.suptitle(f"{cfg.experiment}: error vs in-context examples (Garg et al. 2022, Fig. {figure} style)",
                 fontsize=10)
    return plots.save(fig, rd, "error_vs_k")


def training(cfg, points: list[CurvePoint], rows, rd) -> str:
    E, L, H = cfg.model.dims()
    return plots.loss_curves(points, rows, rd, title=f"{cfg.experiment}: GPT {E}/{L}/{H} (n_embd/layers/heads), "
                             f"batch {cfg.train.batch}", ylabel="held-out error (mean over positions)",
                             metric="error")
