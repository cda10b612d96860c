"""Runs side by side (``icldyn compare RUN RUN …``, ``icldyn.compare``): the config keys whose values differ, each
point's and metric's final value (mean ± sd over seeds of the last logged value, as the ``finals`` view of
``icldyn query``), and a figure of the metrics every run logged, over training."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icldyn.errors import ConfigError

MISSING = "—"  # a key or a metric a run does not have


def label(path: Path) -> str:
    """A run's short name: its id without the start time (``<experiment>-a187ea``; unique by its random part)."""
    parts = path.name.split("-", 2)
    return parts[2] if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit() else path.name


def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested config as dotted keys (``train.lr``; a grid axis ``grid.model.layers``)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_difference(configs: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    """(key, one value per run) for every dotted key whose value is not the same in every config (a key a config
    lacks, e.g. a field of another model kind, is :data:`MISSING` there)."""
    flats = [flat(c) for c in configs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    return [(k, [f.get(k, MISSING) for f in flats]) for k in keys
            if any(f.get(k, MISSING) != flats[0].get(k, MISSING) for f in flats[1:])]


def finals(metrics) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(point, metric) → (mean, sd, seeds) of each seed's last logged value (over the seeds whose value is
    finite; sd 0 for one seed)."""
    last = metrics.sort_values("step").groupby(["point", "metric", "seed"], sort=False)["value"].last()
    out = {}
    for (point, metric), values in last.groupby(level=["point", "metric"]):
        v = [x for x in values.tolist() if math.isfinite(x)]
        mean = sum(v) / len(v) if v else math.nan
        sd = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v)) if v else math.nan
        out[(point, metric)] = (mean, sd, len(v))
    return out


@dataclass(frozen=True)
class Comparison:
    """Two runs or more, side by side: ``config`` (DataFrame: one row a differing key, one column a run),
    ``finals`` and ``finals_sd`` (one row a (point, metric), one column a run: the mean and sd over seeds of the
    last logged value; NaN where a run has no such point or metric), ``runs`` (their directories) and
    :meth:`figure`."""

    runs: tuple[Path, ...]
    config: Any
    finals: Any
    finals_sd: Any
    metrics: tuple[Any, ...]

    @classmethod
    def of(cls, targets: list[str | Path], store: str | Path = "runs") -> Comparison:
        import pandas as pd

        from icldyn.store import RunDamaged, problems, read_metrics, resolve_run

        if len(targets) < 2:
            one = f" {targets[0]}" if targets else ""
            raise ConfigError(f"compare takes two runs or more (got {len(targets)}); one run's report: "
                              f"`icldyn show{one}`")
        runs = [resolve_run(store, str(t)) for t in targets]
        for path in runs:
            found = problems(path)
            if found:
                raise RunDamaged(path.name, *found[0])
        paths = [r.resolve() for r in runs]
        if len(set(paths)) < len(paths):
            raise ConfigError(f"compare got the same run twice: {', '.join(r.name for r in runs)}")
        names = [label(r) for r in runs]
        with_raw = [tomllib.loads((r / "config.toml").read_text()) for r in runs]
        diff = config_difference(with_raw)
        config = pd.DataFrame([[_show(v) for v in values] for _, values in diff], columns=names,
                              index=pd.Index([k for k, _ in diff], name="key"))
        metrics = tuple(read_metrics(r) for r in runs)
        per = [finals(m) for m in metrics]
        main = _main_metric(with_raw[0])
        keys = sorted({k for f in per for k in f}, key=lambda k: (_order(k[1], main), k[0]))
        index = pd.MultiIndex.from_tuples(keys, names=["point", "metric"]) if keys else None
        mean = pd.DataFrame({n: [f.get(k, (math.nan,) * 3)[0] for k in keys] for n, f in zip(names, per)}, index=index)
        sd = pd.DataFrame({n: [f.get(k, (math.nan,) * 3)[1] for k in keys] for n, f in zip(names, per)}, index=index)
        return cls(tuple(runs), config, mean, sd, metrics)

    @property
    def names(self) -> list[str]:
        return [label(p) for p in self.runs]

    def shared_metrics(self) -> list[str]:
        """The metrics every run logged: the first run's main metric and training loss first, then by name."""
        sets = [set(m.metric.unique()) for m in self.metrics]
        main = _main_metric(tomllib.loads((self.runs[0] / "config.toml").read_text()))
        return sorted((x for x in sets[0] if all(x in s for s in sets)), key=lambda x: _order(x, main))

    def figure(self, path: str | Path | None = None, metrics: list[str] | None = None):
        """The shared metrics over training (or those named in ``metrics``, in that order), one panel each: per run
        (a colour) and point (a line style), the mean over seeds; a log axis where a metric is positive over more
        than a decade. Saved as PNG (200 dpi) and PDF beside it when ``path`` is given (returned); else the
        matplotlib Figure."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np

        from icldyn.plots import DPI, readable
        from icldyn.store import atomic_write

        shared = self.shared_metrics()
        if not shared:
            raise ConfigError(f"runs {', '.join(self.names)} logged no metric in common: nothing to draw")
        if metrics:
            if bad := [x for x in metrics if x not in shared]:
                raise ConfigError(f"metric {bad[0]!r} is not logged by every run; one of {', '.join(shared)}")
            shared = list(dict.fromkeys(metrics))
        cols = min(3, len(shared))
        rows = math.ceil(len(shared) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows), squeeze=False)
        styles = ["-", "--", ":", "-."]
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        points = sorted({p for m in self.metrics for p in m.point.unique()})  # a point keeps its line style
        for ax, metric in zip(axes.flat, shared):
            low, high = math.inf, -math.inf
            for i, (name, m) in enumerate(zip(self.names, self.metrics)):
                sel = m[m.metric == metric]
                for point, g in sel.groupby("point", sort=True):
                    curve = g.groupby("step")["value"].mean()
                    style = styles[points.index(point) % len(styles)]
                    ax.plot(curve.index, curve.values, style, color=colours[i % len(colours)],
                            label=f"{name}" + (f" · {readable(point)}" if point else ""))
                    finite = curve.values[np.isfinite(curve.values)]
                    if finite.size:
                        low, high = min(low, finite.min()), max(high, finite.max())
            if low > 0 and high > 10 * low:
                ax.set_yscale("log")
            ax.set(title=metric, xlabel="step",
                   ylabel=f"{metric} (mean over seeds{', log scale' if low > 0 and high > 10 * low else ''})")
        for ax in list(axes.flat)[len(shared):]:
            ax.set_visible(False)
        entries = {lab: h for ax in axes.flat for h, lab in zip(*ax.get_legend_handles_labels())}
        fig.tight_layout()
        fig.legend(entries.values(), entries.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(len(entries), 3), fontsize=8, frameon=False)
        if path is None:
            return fig
        png = Path(path).with_suffix(".png")
        png.parent.mkdir(parents=True, exist_ok=True)
        try:
            for out in (png, png.with_suffix(".pdf")):
                fmt = out.suffix[1:]
                atomic_write(out, lambda f, fmt=fmt: fig.savefig(f, format=fmt, dpi=DPI, bbox_inches="tight"))
        finally:
            plt.close(fig)
        return png

    def table(self):
        """The finals as the CLI prints them: point, metric and one ``mean ± sd`` cell per run."""
        import pandas as pd

        rows = [[point, metric, *(_cell(self.finals.loc[(point, metric), n], self.finals_sd.loc[(point, metric), n])
                                  for n in self.names)] for point, metric in self.finals.index]
        return pd.DataFrame(rows, columns=["point", "metric", *self.names])

    def _repr_html_(self) -> str:
        import base64
        import io

        import matplotlib.pyplot as plt

        parts = ["<div><strong>compare " + ", ".join(self.names) + "</strong>",
                 "<div>config: the keys that differ</div>",
                 self.config.to_html(escape=True, border=0) if len(self.config) else "<div>(the same config)</div>",
                 "<div>final values (mean ± sd over seeds of the last logged value)</div>",
                 self.table().to_html(index=False, escape=True, border=0)]
        if self.shared_metrics():
            fig = self.figure()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            plt.close(fig)
            parts.append(f'<img src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">')
        return "\n".join(parts) + "</div>"

    def __repr__(self) -> str:
        return f"Comparison({', '.join(self.names)}; {len(self.config)} config key(s) differ)"


def _main_metric(config: dict[str, Any]) -> str:
    from icldyn.plugins import get

    return get(config["experiment"]).metric


def _order(metric: str, main: str) -> tuple:
    """The main metric first, then the training loss, then by name."""
    return metric != main, metric != "train_loss", metric


def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def _cell(mean: float, sd: float) -> str:
    if not math.isfinite(mean):
        return MISSING
    return f"{mean:.4g} ± {sd:.2g}" if sd > 0 else f"{mean:.4g}"
