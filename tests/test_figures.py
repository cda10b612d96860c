"""Every recipe's figures (issue #28), drawn from a tiny recorded result (tests/data/figures/, written by its make.py;
no training here): a PNG saved at 200 dpi and a PDF each (one PNG rendered and its dpi read back: the sweep test), a colour bar on every heat map, legends outside the data, every log
axis said to be one, every labelled line drawn, and no raw config key (``data.covariates=normal``) in any text."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from PIL import Image

from icldyn import plugins

FIXTURES = Path(__file__).parent / "data" / "figures"
RAW_KEY = re.compile(r"\b(data|model|train|grid)\.[a-z_]+")


class Out:
    """Where combine() saves (a run directory's figure() method)."""

    def __init__(self, path: Path):
        self.path = path
        (path / "figures").mkdir(exist_ok=True)

    def figure(self, name: str) -> Path:
        return self.path / "figures" / f"{name}.png"


def recorded(name: str) -> dict:
    path = FIXTURES / f"{name}.json.gz"
    assert path.is_file(), f"no recorded result for {name}: python tests/data/figures/make.py {name}"
    with gzip.open(path, "rt") as f:
        return json.load(f)


def texts(fig: Figure) -> list[str]:
    out = [fig._suptitle.get_text()] if fig._suptitle else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), *(t.get_text() for t in ax.texts)]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    return [t for t in out if t]


def problems(fig: Figure) -> list[str]:
    """What is wrong with one saved figure, one line each (empty: nothing)."""
    bad = [f"raw config key in {t!r}" for t in texts(fig) if RAW_KEY.search(t)]
    renderer = FigureCanvasAgg(fig).get_renderer()  # a closed figure has lost its canvas
    colorbars = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    for ax in fig.axes:
        if getattr(ax, "_colorbar", None) is not None:
            continue
        for art in [*ax.images, *(c for c in ax.collections if isinstance(c, QuadMesh))]:
            if isinstance(art, AxesImage | QuadMesh) and art.colorbar is None:
                bad.append(f"heat map without a colour bar in {ax.get_title()!r}")
        coloured = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_array() is not None]
        if coloured and not colorbars:
            bad.append(f"points coloured by value without a colour bar in {ax.get_title()!r}")
        for axis, scale, label in (("x", ax.get_xscale(), ax.get_xlabel()), ("y", ax.get_yscale(), ax.get_ylabel())):
            if scale in ("log", "symlog") and "log" not in label + ax.get_title():
                bad.append(f"{axis} axis on a {scale} scale not said to be ({label!r}, {ax.get_title()!r})")
        for line in ax.get_lines():
            if not line.get_label().startswith("_") and not np.isfinite(np.asarray(line.get_ydata(), float)).any():
                bad.append(f"legend entry {line.get_label()!r} with nothing drawn")
        legend = ax.get_legend()
        if legend is not None and legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)):
            bad.append(f"legend over the axes of {ax.get_title()!r}")
    return bad


# a recipe whose runner returns a finished Result draws its figures there (no combine): checked on its own below
@pytest.mark.parametrize("name", sorted(n for n, r in plugins.recipes().items() if r.combine is not None))
def test_every_recipe_figure(name, tmp_path, monkeypatch):
    exp = plugins.get(name)
    rec = recorded(name)
    cfg = exp.config(rec["overrides"], quick=rec["quick"])
    points = [exp.result.point_type().model_validate(p) for p in rec["points"]]
    rows = {k: list(v) for k, v in rec["rows"].items()}
    rows["run_id"] = ["recorded"] * len(rows["step"])
    saved: list[tuple[Figure, str, float]] = []

    def spy(self, fname, *args, **kw):  # recorded, not rendered (the sweep test renders one and reads its dpi back)
        saved.append((self, kw.get("format"), kw.get("dpi")))

    monkeypatch.setattr(Figure, "savefig", spy)
    result = exp.result.model_validate(exp.combine(cfg, points, rows, Out(tmp_path)))
    assert result.figures, f"{name} draws no figure"
    for fig in result.figures:
        assert (tmp_path / fig).is_file() and (tmp_path / fig).with_suffix(".pdf").is_file(), fig
    formats = {}
    for fig, fmt, dpi in saved:
        formats.setdefault(id(fig), set()).add(fmt)
        assert fmt == "pdf" or dpi == 200, (fmt, dpi)
    assert all(f == {"png", "pdf"} for f in formats.values()), formats
    figures = {id(fig): fig for fig, _, _ in saved}.values()
    found = sorted({p for fig in figures for p in problems(fig)})
    assert not found, found


def test_the_shift_figure_of_a_recipe_without_combine(tmp_path):
    """ahn-shift draws in its runner; its measured-against-exact figure, on a few cells, passes the same checks."""
    import matplotlib.pyplot as plt

    from icldyn.papers.ahn.results import ShiftCell
    from icldyn.papers.ahn.shift import figure
    assert {n for n, r in plugins.recipes().items() if r.combine is None} <= {"ahn-shift"}
    cells = [ShiftCell(shift=s, seed=0, k=k, measured=1 / k, se=0.01, exact=1 / k, theorem1=1.1 / k, in_law=0.9 / k)
             for s in ("skewed", "scale_x=2") for k in (1, 2, 4)]
    saved = []
    orig = plt.Figure.savefig

    def spy(self, fname, *a, **kw):
        saved.append(self)
        return orig(self, fname, *a, **kw)

    plt.Figure.savefig = spy
    try:
        figure(cells, Out(tmp_path))
    finally:
        plt.Figure.savefig = orig
    found = sorted({p for fig in saved for p in problems(fig)})
    assert saved and not found, found


def test_the_checks_catch_a_regression():
    """The checks fail on the defects the issue lists: a raw key in a legend, a heat map without a colour bar, a log
    axis not said to be one, a legend entry with nothing drawn, a legend over the data."""
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1, 2], [1, 10], label="data.covariates=normal,train.optimizer=adamw")
    a.plot([], [], label="hidden")
    a.set_yscale("log")
    a.legend()
    b.imshow(np.eye(3))
    fig.canvas.draw()
    found = problems(fig)
    plt.close(fig)
    assert any("raw config key" in p for p in found)
    assert any("colour bar" in p for p in found)
    assert any("log scale not said" in p or "not said to be" in p for p in found)
    assert any("nothing drawn" in p for p in found)
    assert any("legend over" in p for p in found)


def test_a_sweep_figure_has_a_log_learning_rate_axis_and_a_readable_title(tmp_path):
    """A sweep over train.lr (a factor 2 apart: no decade spanned) still gets a log axis, said to be one, ticks at
    the swept rates, a title naming the recipe and the axis in symbols, and legend entries without config keys."""
    from icldyn import plots

    saved = []
    original = Figure.savefig

    def spy(self, fname, *args, **kw):
        saved.append(self)
        return original(self, fname, *args, **kw) if kw.get("format") == "png" else None

    lr = np.array([0.01, 0.02, 0.04])
    series = {"model.layers=1": (lr, lr * 10, lr * 9, lr * 11), "model.layers=3": (lr, lr, lr * 0.9, lr * 1.1)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", spy)
        name = plots.final_vs_axis("quickstart", "train.lr", "test_loss", series, Out(tmp_path))
    fig = saved[0]
    ax = fig.axes[0]
    assert name == "figures/final_vs_train_lr.png"
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "learning rate η (log scale)"
    assert ax.get_title() == "quickstart: final test_loss against η"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["L=1", "L=3"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.01", "0.02", "0.04"]
    assert problems(fig) == []
    assert tuple(round(v) for v in Image.open(tmp_path / name).info["dpi"]) == (200, 200)  # as saved, read back
