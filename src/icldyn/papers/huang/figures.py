"""Figures of Huang, Cheng, Liang (2023), arXiv 2310.05249: the per-feature dynamics and their phases,
phase-I length against K."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn.config import RunConfig
from icldyn.papers.huang.results import HuangResult
from icldyn.plots import save, series


def figures(cfg: RunConfig, result: HuangResult, rows: dict[str, list], rd) -> list[str]:
    """Huang et al.: A_k, B_{k,n}, E[Attn_k], L_k against t per point (exact solid, Monte-Carlo GD dashed;
    the detected phases of an under-represented feature shaded); t_½ against K."""
    names = []
    by_grid: dict[str, list] = {}
    for p in result.points:
        by_grid.setdefault(",".join(f"{k}={v}" for k, v in p.grid.items()), []).append(p)
    metric_names = sorted(set(rows["metric"]))
    if cfg.experiment != "huang-phase-scaling":
        for tag, pts in by_grid.items():
            fig, axes = plt.subplots(1, 4, figsize=(17, 3.9))
            info = pts[0].seeds[0].features
            feats = list(info)
            balanced = all(f.role == "balanced" for f in info.values())
            mc = any(p.oracle != "population" for p in pts)
            for p in pts:
                style = "-" if p.oracle == "population" else "--"
                for j, k in enumerate(feats):
                    color = ("C0" if style == "-" else "C3") if balanced else f"C{j % 10}"
                    # the paper counts features from 1 (k = 1 dominant); balanced curves coincide by symmetry
                    label = (f"every k (equal by symmetry, {len(feats)} curves)" if balanced else
                             f"k={int(k) + 1} ({info[k].role})") + ("" if style == "-" else ", Monte-Carlo GD")
                    for ax, metric in zip(axes, (f"A{k}", None, f"attn{k}", f"L{k}")):
                        if metric is None:
                            continue
                        x, m, _, _ = series(rows, p.point, metric)
                        ax.plot(x, m, style, color=color, lw=1.2,
                                label=label if ax is axes[0] and (j == 0 or not balanced) else None)
                    for b in [m for m in metric_names if m.startswith(f"B{k}_")][:3]:
                        x, m, _, _ = series(rows, p.point, b)
                        axes[1].plot(x, m, style, color=color, lw=0.9, alpha=0.8)
            under = [(k, f) for k, f in pts[0].seeds[0].features.items() if f.role == "under-represented"]
            if under:
                ph = under[0][1].phases
                bounds = [0, ph.phase_I_end, ph.phase_II_end, ph.phase_III_end, cfg.train.steps]
                for ax in axes:
                    for i, name in enumerate(("I", "II", "III", "IV")):
                        if bounds[i] is not None and bounds[i + 1] is not None:
                            ax.axvspan(max(bounds[i], 1), bounds[i + 1], color=f"C{i}", alpha=0.12, lw=0)
                            if ax is axes[2]:
                                ax.text(np.sqrt(max(bounds[i], 1) * bounds[i + 1]), 0.5, name, ha="center", fontsize=8)
                axes[2].text(0.02, 0.02, f"phases of k={int(under[0][0]) + 1} shaded", transform=axes[2].transAxes,
                             fontsize=7)
            for ax, title in zip(axes, ("A_k = v_kᵀQv_k", "B_{k,n} = v_nᵀQv_k", "E[Attn_k]", "L_k")):
                ax.set(xlabel="t (log scale past 10)", title=title)
                ax.set_xscale("symlog", linthresh=10)
            axes[3].set_yscale("log")
            if len(feats) > 8:
                axes[0].set_title("A_k (tracked k)")
            axes[3].legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="center left",
                           bbox_to_anchor=(1.02, 0.5))
            p0 = pts[0]
            drawn = "solid: exact population engine" + (", dashed: Monte-Carlo GD over sampled prompts" if mc else "")
            fig.suptitle(f"{cfg.experiment} {tag}: K={p0.K}, N={p0.N}, p={np.round(p0.p[:3], 3).tolist()}…, "
                         f"η={cfg.train.lr:g}, GD from Q=0 ({drawn})", fontsize=9)
            names.append(save(fig, rd, "curves" + (f"_{tag}".replace("=", "").replace(".", "_") if tag else "")))
    if result.t_half is not None:
        ks = np.array([k for k, t in result.t_half.items() if t is not None], float)
        t = np.array([t for t in result.t_half.values() if t is not None], float)
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        exponent = result.exponent if result.exponent is not None else float("nan")
        ax.plot(ks, t, "o-", label=f"measured t_½, exponent {exponent:.2f}")
        ax.plot(ks, t[0] * (ks / ks[0]) ** 2, "k:", label="∝ K²")
        ax.plot(ks, t[0] * ks**2 * np.log(ks) / (ks[0] ** 2 * np.log(ks[0])), "k--", label="∝ K² log K (bound)")
        ax.set(xscale="log", yscale="log", xlabel="K (N = K³)", ylabel="t_½: E[Attn_k] ≥ ½",
               title=f"{cfg.experiment}: phase-I length, η={cfg.train.lr:g}")
        ax.legend(fontsize=8)
        names.append(save(fig, rd, "phase_scaling"))
    return names
