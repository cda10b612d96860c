"""Figures of the companion paper's recipes (arXiv 2310.01082): loss curves as the notebooks draw them (the median
over seeds and their range), the Hessian's condition number and smoothness against the gradient norm."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from icldyn import plots
from icldyn.config import RunConfig
from icldyn.papers.linattn.results import LawPoint


def _title(cfg: RunConfig) -> str:
    d, m = cfg.data, cfg.model
    law = "" if "data.covariates" in cfg.grid else f"{d.covariates} x, "  # else each line names its law
    return (f"L = {m.layers}, d = {d.d}, n = {d.n}, {law}{d.task} task, batch {cfg.train.batch}, "
            f"{cfg.seeds} seed{'s' if cfg.seeds > 1 else ''}")


def _label(cfg: RunConfig, p) -> str:
    """A point's legend entry; the median runs over the seeds still training: say how many stopped."""
    gone = [s.diverged_at for s in p.seeds if s.status == "diverged"]
    return plots.readable(p.point, cfg.experiment) + (
        f" ({len(gone)} of {len(p.seeds)} seeds diverged, steps {min(gone)}–{max(gone)})" if gone else "")


def loss_curves(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """The test loss against iterations per grid point on a log axis (the notebooks' loss figure, which plots its
    log): the median over seeds, and the seeds' range shaded (with heavy-tailed covariates one seed's held-out loss
    can jump by orders of magnitude, which a mean would follow)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    curves = [_median_band(ax, rows, p.point, "test_loss", _label(cfg, p)) for p in points]
    ax.set_yscale("log")
    _clip_excursions(ax, curves, log=True)
    plots.note_missing(ax, [plots.readable(p.point, cfg.experiment) for p, c in zip(points, curves) if not len(c[0])])
    ax.set(xlabel="iteration", ylabel="test loss (log scale)\nmedian over seeds; shaded: their range",
           title=f"{cfg.experiment}: {_title(cfg)}")
    plots.legend(ax)
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
    if not len(st):  # nothing logged (or every row NaN): no line, no legend entry; the caller names it
        return st, val, val, val
    steps = np.unique(st)
    by = [val[st == s] for s in steps]
    med, low, top = (np.array([f(v) for v in by]) for f in (np.median, np.min, np.max))
    (line,) = ax.plot(steps, med, label=label)
    ax.fill_between(steps, low, top, color=line.get_color(), alpha=0.15)
    return steps, med, low, top


def _clip_excursions(ax, curves, log: bool = False) -> None:
    """Keep the y axis on the curves when a seed's range leaves them far behind (one seed's held-out loss can jump
    by e^100 for a single log and recover), and name the highest such excursion on the plot. ``log``: the axis is
    logarithmic (the margins are then taken in log space)."""
    curves = [c for c in curves if len(c[0])]  # a point whose seeds all diverged at once has nothing to draw
    if not curves:
        return
    f, inv = (np.log, np.exp) if log else (lambda v: v, lambda v: v)
    floor, high = min(f(c[2]).min() for c in curves), max(f(c[1]).max() for c in curves)
    cap = high + 0.5 * (high - floor)
    peak, at = max((c[3].max(), c[0][c[3].argmax()]) for c in curves)
    if f(peak) > cap:
        ax.set_ylim(inv(floor - 0.05 * (cap - floor)), inv(cap))
        ax.annotate(f"off scale: a seed at {peak:.3g} (step {at})", (0.99, 0.98), xycoords="axes fraction",
                    ha="right", va="top", fontsize=7)


def condition_figure(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """The notebook's condition number max|diag H| / median|diag H| along training: the median over seeds, their
    range shaded (with gamma covariates one extreme held-out prompt can dominate a seed's Hessian)."""
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    curves = [_median_band(ax, rows, p.point, "hess_diag_ratio", _label(cfg, p)) for p in points]
    plots.note_missing(ax, [plots.readable(p.point, cfg.experiment) for p, c in zip(points, curves) if not len(c[0])])
    ax.set(xlabel="iteration", ylabel="max |diag H| / median |diag H| (log scale)\nmedian over seeds; shaded: range",
           yscale="log", title=f"{cfg.experiment}: the notebook's condition number of the Hessian,\n"
           f"max |diag H| / median |diag H| on a held-out batch; {_title(cfg)}")
    plots.legend(ax)
    return plots.save(fig, rd, "condition_number")


def smoothness_figure(cfg: RunConfig, points: list[LawPoint], rows: dict[str, list], rd) -> str:
    """The notebook's figure: ln smoothness along the optimiser's step against log ‖∇f‖ (both at the step's start)
    along training, coloured by iteration, per point; below, the smoothness along the gradient."""
    fig, axes = plt.subplots(2, len(points), figsize=(4.2 * len(points) + 1.0, 7.4), squeeze=False)
    last = max([int(s) for s in rows["step"]] or [1])
    sc = None
    for j, p in enumerate(points):
        for ax, (gname, sname, ylabel) in zip(axes[:, j], (
                ("grad_norm_step", "smoothness_along_update", "ln uᵀHu, u = step/‖step‖"),
                ("grad_norm_test", "smoothness_along_grad", "ln dᵀHd, d = ∇f/‖∇f‖"))):
            steps, g = _per_point(rows, p.point, gname)
            _, sm = _per_point(rows, p.point, sname)
            ok = (g > 0) & (sm > 0)
            sc = ax.scatter(np.log(g[ok]), np.log(sm[ok]), c=steps[ok], s=8, vmin=0, vmax=last)
            ax.set(xlabel="ln ‖∇f‖", ylabel=ylabel,
                   title=plots.readable(p.point, cfg.experiment))
            if not ok.any():
                plots.note_missing(ax, ["this point"], "no positive smoothness logged")
    fig.suptitle(f"{cfg.experiment}: smoothness against gradient norm (held-out batch), coloured by iteration; "
                 f"{_title(cfg)}", fontsize=9)
    fig.tight_layout()
    if sc is not None:  # one colour bar: every panel shares the iteration scale
        fig.colorbar(sc, ax=axes.ravel().tolist(), label="iteration", fraction=0.03, pad=0.02)
    return plots.save(fig, rd, "smoothness_vs_gradnorm", layout=False)


def noise_figure(cfg: RunConfig, points, rows: dict[str, list], rd) -> str:
    """Per grid point: the histogram of the stochastic-gradient noise norm ‖g_B − ∇f‖ pooled over seeds (log
    density) against Gaussian noise of the same covariance (plot_stochastic_noise.ipynb)."""
    fig, axes = plt.subplots(1, len(points), figsize=(4.6 * len(points), 3.8), squeeze=False)
    for ax, p in zip(axes[0], points):
        _, norms = _per_point(rows, p.point, "noise_norm")
        _, gauss = _per_point(rows, p.point, "gaussian_noise_norm")
        both = np.r_[norms, gauss]
        bins = np.linspace(0, np.quantile(both, 0.999) if len(both) else 1.0, 60)
        ax.hist(norms, bins, density=True, alpha=0.6, label="stochastic gradient noise")
        ax.hist(gauss, bins, density=True, histtype="step", color="k", label="Gaussian, same covariance")
        ax.set(xlabel="‖g_B − ∇f‖", ylabel="density (log scale)", yscale="log",
               title=f"{plots.readable(p.point, cfg.experiment)}\ntail index {p.hill_tail_index:.1f} "
               f"(Gaussian {p.gaussian_hill_tail_index:.1f})")
        if not len(norms):
            plots.note_missing(ax, ["noise norms"])
    plots.legend(axes[0][-1], fontsize=7)
    fig.suptitle(f"{cfg.experiment}: L = {cfg.model.layers}, d = {cfg.data.d}, n = {cfg.data.n}, batch "
                 f"{cfg.train.batch}, {cfg.train.steps} gradients per seed at initialisation, {cfg.seeds} seed(s)",
                 fontsize=9)
    return plots.save(fig, rd, "noise")
