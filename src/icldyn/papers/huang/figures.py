"""Figures of Huang, Cheng, Liang (2023), arXiv 2310.05249: the per-feature dynamics and their phases,
phase-I length against K."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
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
            groups = _coinciding(rows, pts[0].point, list(info))  # features whose curves are equal: one curve each
            mc = any(p.oracle != "population" for p in pts)
            for p in pts:
                style = "-" if p.oracle == "population" else "--"
                for j, ks in enumerate(groups):
                    k = ks[0]
                    color = f"C{j % 10}" if len(groups) > 1 else ("C0" if style == "-" else "C3")
                    label = _feature_label(ks, info) if style == "-" else (  # sampled: near-equal, one drawn
                        f"k={int(k) + 1} ({info[k].role}), Monte-Carlo GD"
                        + (f" (one of the {len(ks)})" if len(ks) > 1 else ""))
                    for ax, metric in zip(axes, (f"A{k}", None, f"attn{k}", f"L{k}")):
                        if metric is None:
                            continue
                        x, m, _, _ = series(rows, p.point, metric)
                        ax.plot(x, m, style, color=color, lw=1.2, label=label if ax is axes[0] else None)
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
                reached = sum(b is not None for b in bounds[1:4])
                axes[2].text(0.02, 0.02, f"phases of k={int(under[0][0]) + 1} shaded"
                             + ("" if reached == 3 else f" ({reached} of 3 boundaries reached)"),
                             transform=axes[2].transAxes, fontsize=7)
            for ax, title in zip(axes, ("A_k = v_kᵀQv_k", "B_{k,n} = v_nᵀQv_k (n ≠ k, up to 3)", "E[Attn_k]",
                                        "L_k (log scale)")):
                ax.set(xlabel="t (symlog: linear to 10, log past)", title=title)
                ax.set_xscale("symlog", linthresh=10)
            axes[3].set_yscale("log")
            if len(info) < pts[0].K:
                axes[0].set_title(f"A_k (tracked k: {', '.join(str(int(k) + 1) for k in info)} of K = {pts[0].K})")
            plots.legend(axes[3], *axes[0].get_legend_handles_labels(), fontsize=7)
            p0 = pts[0]
            drawn = "solid: exact population engine" + (", dashed: Monte-Carlo GD over sampled prompts" if mc else "")
            head = f"{cfg.experiment} {plots.readable(tag)}".rstrip()
            fig.suptitle(f"{head}: K={p0.K}, N={p0.N}, p={np.round(p0.p[:3], 3).tolist()}"
                         f"{'…' if len(p0.p) > 3 else ''}, η={cfg.train.lr:g}, {_optimiser(cfg)} from Q=0 ({drawn})", fontsize=9)
            names.append(save(fig, rd, "curves" + (f"_{tag}".replace("=", "").replace(".", "_") if tag else "")))
    if result.t_half is not None:
        ks = np.array([k for k, t in result.t_half.items() if t is not None], float)
        t = np.array([t for t in result.t_half.values() if t is not None], float)
        fig, ax = plt.subplots(figsize=(8.0, 4.3))
        if len(ks):
            exponent = "" if result.exponent is None else f", exponent {result.exponent:.2f}"
            ax.plot(ks, t, "o-", label=f"measured t_½{exponent}")
            ax.plot(ks, t[0] * (ks / ks[0]) ** 2, "k:", label="∝ K²")
            if ks[0] > 1:
                ax.plot(ks, t[0] * ks**2 * np.log(ks) / (ks[0] ** 2 * np.log(ks[0])), "k--",
                        label="∝ K² log K (bound)")
        never = [k for k, v in result.t_half.items() if v is None]
        plots.note_missing(ax, [f"K = {k}" for k in never], f"E[Attn_k] < ½ within {cfg.train.steps} steps")
        ax.set(xscale="log", yscale="log", xlabel="K (N = K³; log scale)", ylabel="t_½: mean E[Attn_k] ≥ ½ (log scale)",
               title=f"{cfg.experiment}: phase-I length, η={cfg.train.lr:g}")
        plots.log_ticks(ax, list(result.t_half))  # K as integers, not 4×10⁰
        plots.log_ticks(ax, t, "y")
        plots.legend(ax)
        names.append(save(fig, rd, "phase_scaling"))
    return names


SAME = 0.01  # curves closer than this share of their range are drawn once


def _coinciding(rows: dict[str, list], point: str, feats: list[str]) -> list[list[str]]:
    """The tracked features grouped where their A_k, E[Attn_k] and L_k curves coincide to within SAME of each curve's
    range (equal probabilities: equal by symmetry, up to the sampled feature counts; one would hide the other), in
    order."""
    def curves(k):
        return [series(rows, point, f"{m}{k}")[1] for m in ("A", "attn", "L")]

    groups: list[tuple[list, list[str]]] = []
    for k in feats:
        mine = curves(k)
        for ref, ks in groups:
            if all(len(a) == len(b) and np.allclose(a, b, rtol=0.0, atol=SAME * (np.ptp(a) + 1e-12))
                   for a, b in zip(ref, mine)):
                ks.append(k)
                break
        else:
            groups.append((mine, [k]))
    return [ks for _, ks in groups]


def _feature_label(ks: list[str], info: dict) -> str:
    """A legend entry of a group of features (the paper counts from 1, k = 1 dominant)."""
    role = info[ks[0]].role
    if len(ks) == 1:
        return f"k={int(ks[0]) + 1} ({role})"
    names = ", ".join(str(int(k) + 1) for k in ks)
    if len(ks) > 4:
        names = f"{int(ks[0]) + 1}…{int(ks[-1]) + 1}"
    return f"k={names} ({role}; {len(ks)} curves within {SAME:.0%}, one drawn)"


def _optimiser(cfg: RunConfig) -> str:
    """The optimiser as the title names it: GD (plain, constant step), else its name and schedule."""
    opt, schedule = getattr(cfg.train, "optimizer", "sgd"), getattr(cfg.train, "schedule", "constant")
    if opt == "sgd" and not getattr(cfg.train, "momentum", 0.0) and schedule == "constant":
        return "GD"
    return plots.setting("train.optimizer", opt) + (f", {schedule} schedule" if schedule != "constant" else "")
