"""Figures of the companion paper's recipes (arXiv 2310.01082): loss curves as the notebooks draw them (the median
over seeds and their range), the Hessian's condition number and smoothness against the gradient norm."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
from icldyn.config import RunConfig
from icldyn.papers.linattn.results import LawPoint


def loss_curves(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """log test loss against iterations per grid point (the notebooks' loss figure): the median over seeds, and the
    seeds' range shaded (with heavy-tailed covariates one seed's held-out loss can jump by orders of magnitude, which
    a mean would follow)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    def label(p: LawPoint) -> str:  # the median runs over the seeds still training: say how many stopped
        gone = [s.diverged_at for s in p.seeds if s.status == "diverged"]
        return (p.point or cfg.experiment) + (f" ({len(gone)} of {len(p.seeds)} seeds diverged, steps "
                                              f"{min(gone)}–{max(gone)})" if gone else "")

    _clip_excursions(ax, [_median_band(ax, rows, p.point, "test_loss", label(p), np.log) for p in points])
    d, m = cfg.data, cfg.model
    law = "" if "data.covariates" in cfg.grid else f"{d.covariates} x, "  # else each line names its law
    ax.set(xlabel="iteration", ylabel="log test loss (median over seeds; shaded: their range)",
           title=f"{cfg.experiment}: L = {m.layers}, d = {d.d}, "
           f"n = {d.n}, {law}{d.task} task, batch {cfg.train.batch}, {cfg.seeds} seeds")
    ax.legend(fontsize=8)
    return plots.save(fig, rd, "loss")


def _per_point(rows: dict[str, list], point: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values over seeds): the seeds' rows of one metric of one point, in step order."""
    pt, mt = np.asarray(rows["point"]), np.asarray(rows["metric"])
    sel = (pt == point) & (mt == metric)
    steps, values = np.asarray(rows["step"])[sel], np.asarray(rows["value"], float)[sel]
    order = np.argsort(steps, kind="stable")
    return steps[order], values[order]


def _median_band(ax, rows: dict[str, list], point: str, metric: str, label: str, transform=lambda v: v):
    """One metric of one point along training: the median over seeds, and the seeds' range shaded. Returns
    (steps, median, range's bottom, range's top)."""
    st, val = _per_point(rows, point, metric)
    val = transform(val)
    keep = np.isfinite(val)  # a diverged seed's last row is NaN: the others still have a median there
    st, val = st[keep], val[keep]
    steps = np.unique(st)
    by = [val[st == s] for s in steps]
    med, low, top = (np.array([f(v) for v in by]) for f in (np.median, np.min, np.max))
    (line,) = ax.plot(steps, med, label=label)
    ax.fill_between(steps, low, top, color=line.get_color(), alpha=0.15)
    return steps, med, low, top


def _clip_excursions(ax, curves) -> None:
    """Keep a linear y axis on the curves when a seed's range leaves them far behind (one seed's held-out log loss
    can jump by 100s for a single log and recover), and name the highest such excursion on the plot."""
    curves = [c for c in curves if len(c[0])]  # a point whose seeds all diverged at once has nothing to draw
    if not curves:
        return
    floor, high = min(c[2].min() for c in curves), max(c[1].max() for c in curves)
    cap = high + 0.5 * (high - floor)
    peak, at = max((c[3].max(), c[0][c[3].argmax()]) for c in curves)
    if peak > cap:
        ax.set_ylim(floor - 0.05 * (cap - floor), cap)
        ax.annotate(f"off scale: a seed at {peak:.3g} (step {at})", (0.99, 0.98), xycoords="axes fraction",
                    ha="right", va="top", fontsize=7)


def condition_figure(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """The notebook's condition number max|diag H| / median|diag H| along training: the median over seeds, their
    range shaded (with gamma covariates one extreme held-out prompt can dominate a seed's Hessian)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for p in points:
        _median_band(ax, rows, p.point, "hess_diag_ratio", p.point or cfg.experiment)
    ax.set(xlabel="iteration", ylabel="max |diag H| / median |diag H|", yscale="log",
           title=f"{cfg.experiment}: Hessian condition number (held-out batch)")
    ax.legend(fontsize=8)
    return plots.save(fig, rd, "condition_number")


def smoothness_figure(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """The notebook's figure: log smoothness along the optimiser's step against log ‖∇f‖ (both at the step's start)
    along training, coloured by iteration, per point; below, the smoothness along the gradient."""
    fig, axes = plt.subplots(2, len(points), figsize=(4.6 * len(points), 7.4), squeeze=False)
    for j, p in enumerate(points):
        for ax, (gname, sname, ylabel) in zip(axes[:, j], (
                ("grad_norm_step", "smoothness_along_update", "log uᵀHu, u = step/‖step‖"),
                ("grad_norm_test", "smoothness_along_grad", "log dᵀHd, d = ∇f/‖∇f‖"))):
            steps, g = _per_point(rows, p.point, gname)
            _, sm = _per_point(rows, p.point, sname)
            ok = (g > 0) & (sm > 0)
            sc = ax.scatter(np.log(g[ok]), np.log(sm[ok]), c=steps[ok], s=8)
            ax.set(xlabel="log ‖∇f‖", ylabel=ylabel, title=p.point or cfg.experiment)
            fig.colorbar(sc, ax=ax, label="iteration")
    fig.suptitle(f"{cfg.experiment}: smoothness against gradient norm (held-out batch)", fontsize=9)
    return plots.save(fig, rd, "smoothness_vs_gradnorm")
