"""Figures drawn from a run's results (metric rows and point summaries); nothing here trains.

Every helper takes the run directory ``rd`` it saves into (PNG at 200 dpi and a vector PDF side by side) and
returns the PNG's relative path; given ``rd=None`` it returns the matplotlib ``Figure`` instead (for a notebook).
"""

from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# the paper's symbol of a config key in a legend, axis label or title (figures never show raw config keys)
SYMBOLS = {"model.layers": "L", "data.n": "n", "data.d": "d", "data.p": "p", "data.features": "K", "train.lr": "η",
           "data.condition_number": "κ", "data.noise_std": "σ", "train.batch": "batch",
           "train.steps": "steps", "data.p_dominant": "p₁", "data.m_norm": "‖MΣ½‖", "data.eigenvalues": "eig(Σ)",
           "data.covariance": "Σ", "data.w_prior": "w prior", "data.covariates": "x", "data.task": "task",
           "model.init_std": "init std", "train.b2": "β₂", "train.b1": "β₁", "train.momentum": "momentum",
           "train.weight_decay": "weight decay", "train.clip": "clip", "seeds": "seeds", "seed": "seed"}
# keys whose value alone names the setting (an optimiser, a parameterization, an activation)
BY_VALUE = {"train.optimizer": {"adam": "Adam", "adamw": "AdamW", "sgd": "SGD", "lbfgs": "L-BFGS"},
            "model.parameterization": {}, "model.activation": {"linear": "linear attention",
                                                                "relu": "ReLU attention",
                                                                "softmax": "softmax attention"},
            "data.covariates": {"normal": "normal x", "gamma": "gamma x", "sphere": "sphere x"},
            "train.oracle": {"population": "exact gradient", "sampled": "sampled gradients",
                             "counts": "sampled-counts gradients"}}
RAW_KEY = re.compile(r"\b(?:grid\.)?((?:data|model|train)\.[a-z_0-9]+|seeds?)=(\[[^\]]*\]|[^,;]*)")


def symbol(key: str) -> str:
    """A config key's name in a figure: the paper's symbol (``train.lr`` → η), else the field's name."""
    key = key.removeprefix("grid.")
    return SYMBOLS.get(key, key.split(".")[-1].replace("_", " "))


def setting(key: str, value: Any) -> str:
    """``key = value`` as a figure says it: ``κ=10``, ``AdamW``, ``normal x``, ``L=3``."""
    key = key.removeprefix("grid.")
    if isinstance(value, str):
        value = value.strip()
    if key in BY_VALUE:
        return BY_VALUE[key].get(str(value), str(value))
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return f"{symbol(key)}={value}"
    return f"{symbol(key)}={value:g}" if isinstance(value, float) else f"{symbol(key)}={value}"


def readable(label: str | None, empty: str = "") -> str:
    """A point label (``data.covariates=normal,train.optimizer=adamw``; a sweep's ``train.lr=0.01, L=2``) in the
    paper's names: ``normal x, AdamW``."""
    if not label:
        return empty
    out = RAW_KEY.sub(lambda m: setting(m.group(1), m.group(2)), label)
    out = re.sub(r"\blr=", "η=", out)
    return re.sub(r",(?=\S)", ", ", out)


def log_ticks(ax, values, axis: str = "x") -> None:
    """Ticks of a log axis at the values drawn, as plain numbers (K = 4, 8, 16, not 4×10⁰), no minor labels."""
    values = sorted({float(v) for v in values if v is not None and np.isfinite(v) and v > 0})
    ticks = getattr(ax, f"set_{axis}ticks")
    ticks(values, [f"{v:g}" for v in values])
    getattr(ax, f"{axis}axis").set_minor_formatter(matplotlib.ticker.NullFormatter())


def legend(ax, *args, **kw):
    """A legend outside the axes, on the right (it never covers data; saved inside the tight bounding box)."""
    kw = {"fontsize": 8, "loc": "center left", "bbox_to_anchor": (1.02, 0.5), "frameon": False, **kw}
    return ax.legend(*args, **kw)


def describe_gaussian(d) -> str:
    """A Gaussian prompt law of a data section, in symbols: ``d=5, n=20, eig(Σ) = (2, 1, 0.5, 0.25, 0.1),
    w ~ N(0, I)``; a kind it does not know is named as it is."""
    cov = getattr(d, "covariance", None)
    sigma = {"identity": "Σ = I", "official": "Σ = U diag(1, 1, ¼, 1/16, 1) Uᵀ (official)",
             "condition": f"κ(Σ) = {getattr(d, 'condition_number', float('nan')):g}"}.get(cov, f"Σ: {cov}")
    eig = getattr(d, "eigenvalues", None)
    if cov == "eigenvalues" and eig is not None:
        sigma = "eig(Σ) = (" + ", ".join(f"{e:g}" for e in eig) + ")"
    prior = getattr(d, "w_prior", None)
    w = {"identity": "w ~ N(0, I)", "inverse_covariance": "w ~ N(0, Σ⁻¹)"}.get(prior, f"w prior: {prior}")
    noise = getattr(d, "noise_std", 0.0) or 0.0
    return f"d={d.d}, n={d.n}, {sigma}, {w}" + (f", σ={noise:g}" if noise else "")


def mean_sd(mean: float, sd: float, seeds: int, spec: str = ".4g") -> str:
    """A table cell: ``mean ± sd`` over several seeds; one seed's value alone (no ``± 0``)."""
    if seeds <= 1 or not np.isfinite(sd):
        return format(mean, spec)
    return f"{format(mean, spec)} ± {sd:.2g}"


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
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    empty = []
    for p in points:
        x, m, lo, hi = series(rows, p.point, metric)
        if not len(x):
            empty.append(readable(p.point, "the run"))
            continue
        (line,) = ax.plot(x, m, label=readable(p.point, "test loss"))
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
    ax.set(yscale="log", xlabel="step", ylabel=f"{ylabel} (log scale)", title=title)
    note_missing(ax, empty)
    legend(ax)
    return save(fig, rd, "loss_curves")


def note_missing(ax, missing: list[str], what: str = "no logged rows") -> None:
    """Name on the axes the series that are not drawn (nothing is left out silently)."""
    if missing:
        ax.text(0.01, 0.01, f"not drawn ({what}): " + ", ".join(missing), transform=ax.transAxes, fontsize=7,
                va="bottom")


def draw_many(draw: Callable[..., Any], calls: list[tuple]) -> list[Any]:
    """``[draw(*args) for args in calls]`` — the figures of several runs (a sweep job's), drawn by a pool of
    fresh processes (one per core, at most 4) when there are enough of them to repay its start-up (~1 s)."""
    workers = min(os.cpu_count() or 1, 4, len(calls) // 3)
    if workers < 2:
        return [draw(*args) for args in calls]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(draw, *zip(*calls)))


LOG_AXES = ("train.lr", "data.n", "data.condition_number", "data.noise_std", "train.batch", "model.init_std")


def final_vs_axis(experiment: str, axis: str, metric: str, series: dict[str, tuple], rd) -> str:
    """A sweep's axis against the final value of a metric: mean over seeds with its min–max band, one line
    per combination of the other axes (and in-run grid point). A learning rate (and other scale parameters) is on
    a log axis; every log axis says so."""
    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    xs, ys = [], []
    for name, (x, m, lo, hi) in series.items():
        (line,) = ax.plot(x, m, "o-", label=readable(name, metric))
        ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
        xs += list(x)
        ys += [v for v in lo if np.isfinite(v)]
    logx = min(xs) > 0 and (axis.removeprefix("grid.") in LOG_AXES or max(xs) >= 10 * min(xs))
    logy = bool(ys) and min(ys) > 0
    if logx:
        ax.set_xscale("log")
        log_ticks(ax, xs)
    if logy:
        ax.set_yscale("log")
    named = {"train.lr": "learning rate η", "data.n": "context examples n", "model.layers": "layers L"}
    ax.set(xlabel=named.get(axis.removeprefix("grid."), symbol(axis)) + (" (log scale)" if logx else ""),
           ylabel=f"final {metric}" + (" (log scale)" if logy else "") + "\nmean over seeds, band: min–max",
           title=f"{experiment}: final {metric} against {symbol(axis)}")
    legend(ax, fontsize=7)
    return save(fig, rd, f"final_vs_{axis.replace('.', '_')}")


DPI = 200  # raster copy; every figure is also saved as a vector PDF beside it


def save(fig, rd, name: str, layout: bool = True):
    """``figures/<name>.png`` (200 dpi) and ``figures/<name>.pdf`` (vector), legends placed outside the axes
    included (tight bounding box), each written atomically (a temporary file, fsynced, renamed: a kill or a full
    disk leaves the old file or none, never a partial one); returns the PNG's path relative to the run directory.
    With ``rd=None`` (a notebook) nothing is written and the matplotlib Figure itself is returned. ``layout=False``:
    the caller has laid the figure out (a colour bar shared by several axes)."""
    from icldyn.store import atomic_write

    if layout:
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
