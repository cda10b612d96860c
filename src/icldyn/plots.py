"""Figures drawn from a run's results (metric rows and point summaries); nothing here trains.

Every helper takes the run directory ``rd`` it saves into (PNG at 200 dpi and a vector PDF side by side) and
returns the PNG's relative path; given ``rd=None`` it returns the matplotlib ``Figure`` instead (for a notebook).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from icldyn.config import RunConfig  # noqa: E402


def series(rows: dict[str, list], point: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, min, max) over seeds of one metric of one grid point."""
    pt, mt = np.asarray(rows["point"]), np.asarray(rows["metric"])
    sel = (pt == point) & (mt == metric)
    steps, values = np.asarray(rows["step"])[sel], np.asarray(rows["value"])[sel]
    xs = np.unique(steps)
    by = [values[steps == s] for s in xs]
    return xs, np.array([v.mean() for v in by]), np.array([v.min() for v in by]), np.array([v.max() for v in by])


def draw_many(draw: Callable[..., list[str]], calls: list[tuple]) -> list[list[str]]:
    """``[draw(*args) for args in calls]`` — the figures of several runs (a sweep job's), drawn by a pool of
    fresh processes (one per core, at most 4) when there are enough of them to repay its start-up (~1 s)."""
    workers = min(os.cpu_count() or 1, 4, len(calls) // 3)
    if workers < 2:
        return [draw(*args) for args in calls]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(draw, *zip(*calls)))


def final_vs_axis(title: str, axis: str, metric: str, series: dict[str, tuple], rd) -> str:
    """A sweep's axis against the final value of a metric: mean over seeds with its min–max band, one line
    per combination of the other axes (and in-run grid point)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs, ys = [], []
    for name, (x, m, lo, hi) in series.items():
        (line,) = ax.plot(x, m, "o-", label=name or metric)
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
        xs += list(x)
        ys += list(lo)
    if min(xs) > 0 and max(xs) >= 10 * min(xs):
        ax.set_xscale("log")
    if min(ys) > 0:
        ax.set_yscale("log")
    ax.set(xlabel=axis, ylabel=f"final {metric} (mean over seeds, band: min–max)", title=title)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    return _save(fig, rd, f"final_vs_{axis.replace('.', '_')}")


DPI = 200  # raster copy; every figure is also saved as a vector PDF beside it


def _save(fig, rd, name: str):
    """``figures/<name>.png`` (200 dpi) and ``figures/<name>.pdf`` (vector), legends placed outside the axes
    included (tight bounding box); returns the PNG's path relative to the run directory. With ``rd=None``
    (a notebook) nothing is written and the matplotlib Figure itself is returned."""
    fig.tight_layout()
    if rd is None:
        return fig
    png = rd.figure(name)
    for path in (png, png.with_suffix(".pdf")):
        fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return f"figures/{name}.png"


def _subtitle(cfg: RunConfig) -> str:
    d = cfg.data
    return (f"d={d.d}, Σ={d.covariance}, w~{'N(0,I)' if d.w_prior == 'identity' else 'N(0,Σ⁻¹)'}, "
            f"{cfg.seeds} seed(s), {cfg.train.dtype}")


def loss_curves(cfg: RunConfig, points: list[dict], rows: dict[str, list], rd) -> str:
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for p in points:
        x, m, lo, hi = series(rows, p["point"], "test_loss")
        (line,) = ax.plot(x, m, label=p["point"] or "test loss")
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set(yscale="log", xlabel="step", ylabel="held-out loss E[(TF − y)²]",
           title=f"{cfg.experiment}: test loss\n{_subtitle(cfg)}")
    ax.legend(fontsize=8)
    return _save(fig, rd, "loss_curves")


def loss_vs(cfg: RunConfig, points: list[dict], key: str, rd) -> str:
    """Trained transformer vs the baselines against a grid axis (``layers`` or ``n``): Figs. 6-7."""
    x = [p[key] for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.errorbar(x, [p["test_loss"] for p in points], yerr=[p["test_loss_std"] for p in points], marker="o",
                label=f"trained TF ({points[0]['parameterization']})")
    ax.plot(x, [p["gd"] for p in points], "s--", label="GD, tuned step")
    ax.plot(x, [p["pgd"] for p in points], "^--", label="preconditioned GD (Σ⁻¹), tuned step")
    if key == "n":
        ols = [max(p["ols"], 1e-8) for p in points]
        ax.plot(x, ols, "x:", label="OLS (0 for n ≥ d; floored at 1e-8)")
    if "optimal_loss" in points[0]:
        ax.plot(x[:1], [points[0]["optimal_loss"]], "k*", ms=12, label="Theorem 1 optimum")
    ax.set(yscale="log", xlabel="layers L (= GD steps)" if key == "layers" else "context examples n",
           ylabel="test loss", title=f"{cfg.experiment}\n{_subtitle(cfg)}")
    ax.set_xticks(x)
    ax.legend(fontsize=8)
    return _save(fig, rd, f"loss_vs_{key}")


def structure(cfg: RunConfig, points: list[dict], rows: dict[str, list], rd) -> list[str]:
    """Distances to Σ⁻¹ and I over training (Thms 3-4), heat maps of Σ^½A_ℓΣ^½ and B_ℓ, ‖A_ℓ‖."""
    names = []
    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 4.0), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p["layers"]):
            for metric, style in ((f"dist_sigma_A{ell}", "-"), (f"dist_I_A{ell}", ":"), (f"dist_I_B{ell}", "--")):
                x, m, _, _ = series(rows, p["point"], metric)
                if len(x):
                    ax.plot(x, m, style, color=f"C{ell}", label=metric.replace("dist_sigma_", "Dist(Σ½AΣ½,I) ").replace(
                        "dist_I_", "Dist(·,I) "))
        ax.set(xlabel="step", ylabel="distance", ylim=(0, 1.05), title=p["point"] or p["parameterization"])
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))  # same lines in every panel
    fig.suptitle(f"{cfg.experiment}: scale-invariant distances\n{_subtitle(cfg)}", fontsize=9)
    names.append(_save(fig, rd, "distances"))

    fig, axes = plt.subplots(1, len(points), figsize=(5.2 * len(points), 3.6), squeeze=False)
    for ax, p in zip(axes[0], points):
        for ell in range(p["layers"]):
            x, m, lo, hi = series(rows, p["point"], f"norm_A{ell}")
            ax.plot(x, m, color=f"C{ell}", label=f"‖A{ell}‖_F")
            ax.fill_between(x, lo, hi, color=f"C{ell}", alpha=0.2)
        ax.set(xlabel="step", ylabel="Frobenius norm", title=p["point"] or p["parameterization"])
    axes[0][-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"{cfg.experiment}: per-layer step sizes ‖A_ℓ‖ (Thm 4 figure: ‖A₀‖ ≤ ‖A₁‖ ≤ ‖A₂‖)\n"
                 f"{_subtitle(cfg)}", fontsize=9)
    names.append(_save(fig, rd, "norms"))

    for p in points:
        seed = p["seeds"][0]
        A = np.asarray(seed["A"])
        S = np.asarray(seed.get("sigma_sqrt", np.eye(A.shape[-1])))
        mats = [(f"Σ½A{ell}Σ½", S @ A[ell] @ S) for ell in range(len(A))]
        if p["parameterization"] != "sparse":
            mats += [(f"B{ell}", np.asarray(seed["B"])[ell]) for ell in range(len(A) - 1)]
        fig, axes = plt.subplots(1, len(mats), figsize=(2.6 * len(mats), 2.8), squeeze=False)
        for ax, (title, M) in zip(axes[0], mats):
            v = np.abs(M).max() or 1.0
            im = ax.imshow(M, cmap="RdBu_r", vmin=-v, vmax=v)
            fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=7)
            ax.set_title(title, fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.suptitle(f"{cfg.experiment}: final weights, seed {seed['seed']}, {p['point'] or p['parameterization']} "
                     "(Thms 3-4, w ~ N(0, Σ⁻¹): scaled identities at the critical point)", fontsize=9)
        tag = (p["point"] or p["parameterization"]).replace("model.parameterization=", "").replace("=", "")
        names.append(_save(fig, rd, f"heatmaps_{tag}"))
    return names


def ahn_figures(cfg: RunConfig, points: list[dict[str, Any]], rows: dict[str, list], rd) -> list[str]:
    figs = [loss_curves(cfg, points, rows, rd)]
    if "model.layers" in cfg.grid and len(points) > 1:
        figs.append(loss_vs(cfg, points, "layers", rd))
    if "data.n" in cfg.grid and len(points) > 1:
        figs.append(loss_vs(cfg, points, "n", rd))
    if cfg.experiment == "ahn-structure" or any(p["layers"] > 1 for p in points):
        figs += structure(cfg, [p for p in points if p["layers"] > 1], rows, rd)
    return figs


def goel_figures(cfg: RunConfig, result: dict[str, Any], rows: dict[str, list], rd) -> list[str]:
    """Goel et al.: excess loss and P-distance to S against iteration (log scale) per method; the floor
    against n beside n⁻² log⁶ n; iterations to the target against κ(Σ)."""
    from icldyn.theory.goel import sample_size_bound

    points = [p for p in result["points"] if p.get("tuned_best", True)]
    sub = (f"d={cfg.data.d}, p={cfg.data.p}, ‖MΣ½‖={cfg.data.m_norm:g}, σ={cfg.data.noise_std:g}, "
           f"{cfg.seeds} seed(s), {cfg.train.dtype}")
    names = []
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 4.3))
    for i, p in enumerate(points):
        style = "-" if p["oracle"] == "population" else ":"
        for ax, metric in zip(axes, ("excess_loss", "p_distance")):
            x, m, lo, hi = series(rows, p["point"], metric)
            ax.plot(x, np.maximum(m, 1e-17), style, color=f"C{i % 10}", label=p["point"])
            ax.fill_between(x, np.maximum(lo, 1e-17), np.maximum(hi, 1e-17), color=f"C{i % 10}", alpha=0.15)
    axes[0].axhline(result.get("target", 1e-8), color="k", lw=0.6, ls="--")
    axes[0].set(yscale="log", xlabel="iteration", ylabel="L(θ) − L* (exact)", title="excess population loss")
    axes[1].set(yscale="log", xlabel="iteration", ylabel="‖θ − Π_S(θ)‖_P", title="P-distance to the manifold S")
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))  # outside: the curves stay visible
    fig.suptitle(f"{cfg.experiment} (solid: exact population gradient; dotted: sampled prompts, n={cfg.data.n})\n"
                 f"{sub}", fontsize=9)
    names.append(_save(fig, rd, "convergence"))

    if "slope" in result:
        ns = np.array([p["n"] for p in points], float)
        floors = np.array([p["floor"] for p in points])
        per_seed = [[s["floor"] for s in p["seeds"]] for p in points]
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        for n, fs in zip(ns, per_seed):
            ax.plot([n] * len(fs), fs, ".", color="C0", alpha=0.4)
        ax.plot(ns, floors, "o-", color="C0", label=f"measured floor, slope {result['slope']:.2f} "
                f"[{result['slope_ci'][0]:.2f}, {result['slope_ci'][1]:.2f}]")
        bound = sample_size_bound(ns)
        ax.plot(ns, bound * floors[-1] / bound[-1], "k--",
                label=f"n⁻² log⁶ n (scaled), slope {result['bound_slope']:.2f}")
        ax.plot(ns, floors[0] * (ns / ns[0]) ** -2.0, "k:", lw=0.8, label="n⁻²")
        ax.set(xscale="log", yscale="log", xlabel="samples per prompt n", ylabel="floor L(θ) − L*",
               title=f"{cfg.experiment}: Algorithm 1, sampled gradients\n{sub}")
        ax.legend(fontsize=8)
        names.append(_save(fig, rd, "floor_vs_n"))

    if cfg.experiment == "goel-conditioning":
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        reached = False
        for i, name in enumerate(dict.fromkeys(p["method"] for p in points)):
            sel = [p for p in points if p["method"] == name]
            steps = [p["steps_to_target"] if p["steps_to_target"] is not None else np.nan for p in sel]
            reached = reached or bool(np.isfinite(steps).any())
            ax.plot([p["kappa"] for p in sel], steps, "o-", color=f"C{i}", label=name)
        ax.axhline(cfg.train.steps, color="k", lw=0.6, ls="--", label="budget (not reached above)")
        scale = "log" if reached else "linear"  # none reached: nothing to draw on log axes
        ax.set(xscale=scale, yscale=scale, xlabel="κ(Σ)",
               ylabel=f"iterations to L − L* < {result.get('target', 1e-8):g}",
               title=f"{cfg.experiment}\n{sub}")
        ax.legend(fontsize=8)
        names.append(_save(fig, rd, "iterations_vs_kappa"))
    return names


def huang_figures(cfg: RunConfig, result: dict[str, Any], rows: dict[str, list], rd) -> list[str]:
    """Huang et al.: A_k, B_{k,n}, E[Attn_k], L_k against t per point (exact solid, Monte-Carlo GD dashed;
    the detected phases of an under-represented feature shaded); t_½ against K."""
    names = []
    by_grid: dict[str, list[dict]] = {}
    for p in result["points"]:
        by_grid.setdefault(",".join(f"{k}={v}" for k, v in p["grid"].items()), []).append(p)
    metric_names = sorted(set(rows["metric"]))
    if cfg.experiment != "huang-phase-scaling":
        for tag, pts in by_grid.items():
            fig, axes = plt.subplots(1, 4, figsize=(17, 3.9))
            info = pts[0]["seeds"][0]["features"]
            feats = list(info)
            balanced = all(f["role"] == "balanced" for f in info.values())
            mc = any(p["oracle"] != "population" for p in pts)
            for p in pts:
                style = "-" if p["oracle"] == "population" else "--"
                for j, k in enumerate(feats):
                    color = ("C0" if style == "-" else "C3") if balanced else f"C{j % 10}"
                    # the paper counts features from 1 (k = 1 dominant); balanced curves coincide by symmetry
                    label = (f"every k (equal by symmetry, {len(feats)} curves)" if balanced else
                             f"k={int(k) + 1} ({info[k]['role']})") + ("" if style == "-" else ", Monte-Carlo GD")
                    for ax, metric in zip(axes, (f"A{k}", None, f"attn{k}", f"L{k}")):
                        if metric is None:
                            continue
                        x, m, _, _ = series(rows, p["point"], metric)
                        ax.plot(x, m, style, color=color, lw=1.2,
                                label=label if ax is axes[0] and (j == 0 or not balanced) else None)
                    for b in [m for m in metric_names if m.startswith(f"B{k}_")][:3]:
                        x, m, _, _ = series(rows, p["point"], b)
                        axes[1].plot(x, m, style, color=color, lw=0.9, alpha=0.8)
            under = [(k, f) for k, f in pts[0]["seeds"][0]["features"].items() if f["role"] == "under-represented"]
            if under:
                ph = under[0][1]["phases"]
                bounds = [0, ph["phase_I_end"], ph["phase_II_end"], ph["phase_III_end"], cfg.train.steps]
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
            fig.suptitle(f"{cfg.experiment} {tag}: K={p0['K']}, N={p0['N']}, p={np.round(p0['p'][:3], 3).tolist()}…, "
                         f"η={cfg.train.lr:g}, GD from Q=0 ({drawn})", fontsize=9)
            names.append(_save(fig, rd, "curves" + (f"_{tag}".replace("=", "").replace(".", "_") if tag else "")))
    if "t_half" in result:
        ks = np.array([k for k, t in result["t_half"].items() if t is not None], float)
        t = np.array([t for t in result["t_half"].values() if t is not None], float)
        fig, ax = plt.subplots(figsize=(6.4, 4.3))
        ax.plot(ks, t, "o-", label=f"measured t_½, exponent {result.get('exponent', float('nan')):.2f}")
        ax.plot(ks, t[0] * (ks / ks[0]) ** 2, "k:", label="∝ K²")
        ax.plot(ks, t[0] * ks**2 * np.log(ks) / (ks[0] ** 2 * np.log(ks[0])), "k--", label="∝ K² log K (bound)")
        ax.set(xscale="log", yscale="log", xlabel="K (N = K³)", ylabel="t_½: E[Attn_k] ≥ ½",
               title=f"{cfg.experiment}: phase-I length, η={cfg.train.lr:g}")
        ax.legend(fontsize=8)
        names.append(_save(fig, rd, "phase_scaling"))
    return names
