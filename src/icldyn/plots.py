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


def series(rows: dict[str, list], point: str, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(steps, mean, min, max) over seeds of one metric of one grid point."""
    pt, mt = np.asarray(rows["point"]), np.asarray(rows["metric"])
    sel = (pt == point) & (mt == metric)
    steps, values = np.asarray(rows["step"])[sel], np.asarray(rows["value"])[sel]
    xs = np.unique(steps)
    by = [values[steps == s] for s in xs]
    return xs, np.array([v.mean() for v in by]), np.array([v.min() for v in by]), np.array([v.max() for v in by])


def loss_curves(points, rows: dict[str, list], rd, title: str, ylabel: str = "held-out loss E[(TF − y)²]",
                metric: str = "test_loss"):
    """A metric over training per grid point (``points``: anything with a ``point`` label): the mean over seeds with
    its min–max band, log scale."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for p in points:
        x, m, lo, hi = series(rows, p.point, metric)
        (line,) = ax.plot(x, m, label=p.point or "test loss")
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set(yscale="log", xlabel="step", ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
    return save(fig, rd, "loss_curves")


def draw_many(draw: Callable[..., Any], calls: list[tuple]) -> list[Any]:
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
    return save(fig, rd, f"final_vs_{axis.replace('.', '_')}")


DPI = 200  # raster copy; every figure is also saved as a vector PDF beside it


def save(fig, rd, name: str):
    """``figures/<name>.png`` (200 dpi) and ``figures/<name>.pdf`` (vector), legends placed outside the axes
    included (tight bounding box), each written atomically (a temporary file, fsynced, renamed: a kill or a full
    disk leaves the old file or none, never a partial one); returns the PNG's path relative to the run directory.
    With ``rd=None`` (a notebook) nothing is written and the matplotlib Figure itself is returned."""
    from icldyn.store import atomic_write

    fig.tight_layout()
    if rd is None:
        return fig
    png = rd.figure(name)
    try:
        for path in (png, png.with_suffix(".pdf")):
            atomic_write(path, lambda f: fig.savefig(f, format=path.suffix[1:], dpi=DPI, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return f"figures/{name}.png"
