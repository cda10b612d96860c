"""A finished run exported to an experiment tracker (``icldyn export RUN --to tensorboard|wandb``, ``icldyn run
--log …``, ``icldyn.export``): every logged metric of every point and seed as scalars at their steps, the config
(with the point's own overrides and the seed) as hyperparameters, the figures as images.

The trackers are extras, imported only here and only when used: ``pip install 'icldyn[tensorboard]'`` (tensorboardX,
event files TensorBoard reads) or ``'icldyn[wandb]'`` (Weights & Biases, offline unless ``WANDB_MODE`` says
otherwise: ``wandb sync`` uploads the run later).

TensorBoard layout, under ``logdir`` (default ``<store>/tensorboard``; ``tensorboard --logdir`` it)::

    <run_id>/<point>/seed<k>/   scalars (tag = metric, step = training step), hyperparameters and final values
    <run_id>/                   the figures (``figures/<name>``) and config.toml as text
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from icldyn.errors import ConfigError

TRACKERS = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb")}  # name: (module, extra)


def check_tracker(name: str) -> None:
    """An unknown tracker, or one whose package is missing: one line naming the extra to install."""
    if name not in TRACKERS:
        raise ConfigError(f"tracker {name!r} is not allowed: must be one of {', '.join(map(repr, TRACKERS))}")
    module, extra = TRACKERS[name]
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"the {name} tracker needs {module}, which is not installed: "
                          f"pip install 'icldyn[{extra}]'")


def _hparam(value: Any) -> bool | int | float | str:
    return value if isinstance(value, (bool, int, float, str)) else json.dumps(value)


def _run(path: Path) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """A finished run's summary, its config as dotted keys and its metrics (a DataFrame)."""
    from icldyn.comparison import flat
    from icldyn.store import read_metrics, read_summary, run_status, verified

    if not (path / "summary.json").is_file():
        raise ConfigError(f"run {path.name} is {run_status(path)}: only a finished run is exported (its metrics are "
                          "complete then)")
    verified(path, "summary.json")
    summary = read_summary(path)
    return summary, flat(tomllib.loads((path / "config.toml").read_text())), read_metrics(path)


def _groups(summary: dict[str, Any], config: dict[str, Any], metrics):
    """(point, seed, hyperparameters, its rows) per point and seed, in the metrics' order."""
    overrides = {p.get("point", ""): p.get("overrides", {}) for p in summary.get("points", [])}
    for (point, seed), rows in metrics.groupby(["point", "seed"], sort=False):
        hp = {k: _hparam(v) for k, v in {**config, **overrides.get(point, {}), "seed": int(seed)}.items()}
        yield point, int(seed), {"run_id": summary["run_id"], "point": point, **hp}, rows.sort_values("step")


def _finals(rows) -> dict[str, float]:
    return {m: float(g["value"].iloc[-1]) for m, g in rows.groupby("metric", sort=False)}


def _dirname(point: str) -> str:
    """A point's label as one path component (``model.layers=3``; a run without a grid: ``run``)."""
    return re.sub(r"[^\w.=,+-]+", "_", point) or "run"


def export(path: Path, to: str, logdir: str | Path | None = None) -> Path:
    """Export the finished run at ``path`` to the tracker ``to``; returns where it was written."""
    check_tracker(to)
    summary, config, metrics = _run(path)
    logdir = Path(logdir) if logdir is not None else path.parent / to
    return (_tensorboard if to == "tensorboard" else _wandb)(path, summary, config, metrics, logdir)


def _tensorboard(path: Path, summary, config, metrics, logdir: Path) -> Path:
    import matplotlib.image as mpimg
    from tensorboardX import SummaryWriter
    from tensorboardX.summary import hparams

    root = logdir / path.name
    for point, seed, hp, rows in _groups(summary, config, metrics):
        with SummaryWriter(str(root / _dirname(point) / f"seed{seed}")) as w:
            for metric, step, value in zip(rows["metric"], rows["step"], rows["value"]):
                w.add_scalar(metric, float(value), int(step))
            finals = {f"final/{m}": v for m, v in _finals(rows).items()}
            for summary_pb in hparams(hp, finals):  # in this run's own event file (add_hparams makes a sub-run)
                w.file_writer.add_summary(summary_pb)
            for tag, value in finals.items():
                w.add_scalar(tag, value, int(rows["step"].max()))
    with SummaryWriter(str(root)) as w:
        w.add_text("config", "```toml\n" + (path / "config.toml").read_text() + "\n```")
        for png in sorted((path / "figures").glob("*.png")):
            image = mpimg.imread(png)  # H×W×(3|4) floats in [0, 1]
            w.add_image(f"figures/{png.stem}", (image[..., :3] * 255).round().astype("uint8"), dataformats="HWC")
    return root


def _wandb(path: Path, summary, config, metrics, logdir: Path) -> Path:
    os.environ.setdefault("WANDB_MODE", "offline")  # nothing leaves the machine unless asked
    os.environ.setdefault("WANDB_SILENT", "true")  # its banner per run; the caller prints where the runs are
    import wandb

    logdir.mkdir(parents=True, exist_ok=True)
    project = os.environ.get("WANDB_PROJECT", "icldyn")
    try:
        for point, seed, hp, rows in _groups(summary, config, metrics):
            run = wandb.init(project=project, group=path.name, job_type=summary["experiment"], dir=str(logdir),
                             name=f"{path.name}/{_dirname(point)}/seed{seed}", config=hp)
            for step, at in rows.groupby("step", sort=True):
                run.log(dict(zip(at["metric"], at["value"].astype(float))), step=int(step))
            run.summary.update({f"final/{m}": v for m, v in _finals(rows).items()})
            run.finish()
        figures = sorted((path / "figures").glob("*.png"))
        if figures:
            run = wandb.init(project=project, group=path.name, job_type=summary["experiment"], dir=str(logdir),
                             name=f"{path.name}/figures", config={"run_id": path.name, **{k: _hparam(v) for k, v in
                                                                                        config.items()}})
            run.log({f"figures/{png.stem}": wandb.Image(str(png)) for png in figures})
            run.finish()
    finally:
        # run.finish() returns before W&B's service has closed the run's file (a test read one with no run record
        # under load): unless the caller holds a run of their own, stop the service, which waits for every file
        if wandb.run is None:
            wandb.teardown()
    return logdir
