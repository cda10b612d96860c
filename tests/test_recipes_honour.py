"""Every core field is honoured or refused, for every installed recipe: overrides of ``seeds``, ``train.steps``,
``train.lr``, ``train.dtype`` and a ``grid`` axis change what the runner skeleton is asked to train (recorded from
the jobs it is given, nothing trained), or a recipe that trains nothing writes them into its outputs, or the
recipe refuses the field in one line (:attr:`icldyn.recipe.Recipe.ignores`)."""

from __future__ import annotations

import dataclasses
import sys

import jax
import numpy as np
import optax
import pyarrow.parquet as pq
import pytest

from icldyn import plugins
from icldyn import recipe as core
from icldyn.config import ConfigError
from icldyn.runner import RunCrashed, execute
from icldyn.train.loop import learning_rates

pytestmark = pytest.mark.e2e  # whole trainings, subprocesses or builds: not in the inner loop


class Planned(Exception):
    """Raised by the recording skeleton once it has every job of a run."""


def planned_jobs(cfg, store) -> list[core.Job] | None:
    """The jobs a run of ``cfg`` gives the runner skeleton (built, never trained); None if the recipe finished
    without it."""
    jobs: list[core.Job] = []

    def record(rds, reporter, given):
        jobs.extend(given)
        raise Planned

    real = core.run_jobs
    with pytest.MonkeyPatch.context() as mp:
        for mod in list(sys.modules.values()):  # every module that bound the skeleton by name (plug-ins included)
            if getattr(mod, "run_jobs", None) is real:
                mp.setattr(mod, "run_jobs", record)
        try:
            execute(cfg, store)
        except RunCrashed as err:
            if not isinstance(err.err, Planned):
                raise
            return jobs
    return None


def _lr_of(job: core.Job) -> list[float]:
    """The learning rates a job trains at: its slots' rates, or the one in its optimiser's state."""
    if job.lrs is not None:
        return []  # a tuned axis of the recipe's own rates: train.lr is not this job's
    if job.slot_lrs is not None:
        return sorted(set(job.slot_lrs))
    task = jax.tree.map(lambda a: a[0], job.tasks)
    opt = job.opt if isinstance(job.opt, optax.GradientTransformation) else job.opt(task)
    return [float(x) for x in learning_rates(opt.init(job.problem.init(task, job.keys[0])))]


def overrides_for(exp) -> dict:
    """Overrides that move every core field away from the recipe's quick config."""
    base = exp.config(quick=True)
    over: dict = {"seeds": base.seeds + 1,
                  # few steps and a small batch: a recipe that trains nothing (its steps: the draws) runs fast
                  "train": {"steps": max(1, min(base.train.steps // 2, 20)), "batch": 64, "lr": base.train.lr / 2,
                            "dtype": "float64" if base.train.dtype == "float32" else "float32"}}
    if "test_size" in type(base.data).model_fields:
        over["data"] = {"test_size": 64}  # small held-out sets: the setups build fast
    if base.grid:
        axis, values = next(iter(base.grid.items()))
        over["grid"] = {axis: [values[-1]]}
    for key in exp.ignores:  # refused, not ignored: one line
        section, _, name = key.partition(".")
        if name in over.get(section, {}):
            with pytest.raises(ConfigError, match=f"{key} is not used by {exp.name}"):
                exp.config(over, quick=True)
            del over[section][name]
    return over


def problems(name: str, store) -> list[str]:
    """What a run of recipe ``name`` with :func:`overrides_for` ignores (empty: every override honoured)."""
    exp = plugins.get(name)
    over = overrides_for(exp)
    cfg = exp.config(over, quick=True)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    out: list[str] = []
    jobs = planned_jobs(cfg, store)
    if jobs is None:  # trains nothing through the skeleton: its outputs must show the overrides
        [run] = [p for p in store.iterdir() if p.is_dir()]
        rows = pq.read_table(run / "metrics.parquet").to_pydict()
        if sorted(set(rows["seed"])) != seeds:
            out.append(f"seeds: metrics of seeds {sorted(set(rows['seed']))}, expected {seeds}")
        with np.load(run / "params.npz") as z:
            if {str(z[k].dtype) for k in z.files} != {cfg.train.dtype}:
                out.append(f"train.dtype: params in {sorted({str(z[k].dtype) for k in z.files})}")
        if len(set(rows["step"])) != cfg.train.steps:
            out.append(f"train.steps: {len(set(rows['step']))} logged steps, expected {cfg.train.steps}")
        if "train" in over and "lr" in over["train"]:
            out.append("train.lr: a recipe that trains nothing must refuse it (Recipe.ignores)")
        labels = set(rows["point"])
    else:
        for job in jobs:
            for target in job.targets:
                if target.seeds != seeds:
                    out.append(f"seeds: a job trains seeds {target.seeds}, expected {seeds}")
            if job.cfg.train.steps != cfg.train.steps:
                out.append(f"train.steps: a job trains {job.cfg.train.steps} steps, expected {cfg.train.steps}")
            if job.cfg.train.dtype != cfg.train.dtype:
                out.append(f"train.dtype: a job trains in {job.cfg.train.dtype}")
        rates = [lr for job in jobs for lr in _lr_of(job)]
        if "train.lr" not in exp.ignores and not any(np.isclose(lr, cfg.train.lr) for lr in rates):
            out.append(f"train.lr: the jobs train at {sorted(set(rates))}, none at {cfg.train.lr}")
        labels = {t.label for job in jobs for t in job.targets}
    for axis, [value] in over.get("grid", {}).items():
        if not labels or not all(f"{axis}={value}" in label for label in labels):
            out.append(f"grid: points {sorted(labels)}, expected only {axis}={value}")
    return list(dict.fromkeys(out))


@pytest.mark.parametrize("name", sorted(plugins.recipes()))
def test_every_core_field_is_honoured_or_refused(name, tmp_path):
    assert problems(name, tmp_path) == []


def test_a_recipe_that_ignores_seeds_is_caught(tmp_path, monkeypatch):
    real = plugins.get("quickstart")
    broken = dataclasses.replace(  # trains one seed whatever the config says
        real, name="quickstart-one-seed",
        runner=lambda cfg, rd, reporter: real.runner(cfg.model_copy(update={"seeds": 1}), rd, reporter))
    table = {**plugins.recipes(), broken.name: broken}
    monkeypatch.setattr(plugins, "recipes", lambda: table)
    found = problems(broken.name, tmp_path)
    assert any(p.startswith("seeds:") for p in found), found
    assert not any(p.startswith("train.") for p in found), found  # and nothing else is blamed
