"""Named, reproducible experiment recipes; ``icldyn list`` reads :data:`REGISTRY`.

A recipe is a set of overrides of the :class:`~icldyn.config.RunConfig` defaults (the paper
size), further overrides for ``--quick`` (under a minute on a laptop CPU), and a runner that
trains, compares with theory and draws figures into a run directory.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from icldyn.config import ConfigError, RunConfig, build, merge


class Reporter(Protocol):
    """Progress sink: ``start`` returns the per-chunk callback of one training."""

    def start(self, description: str, total: int) -> Callable[[int, dict], None]: ...


class SilentReporter:
    def start(self, description: str, total: int) -> Callable[[int, dict], None]:
        return lambda step, metrics: None


@dataclass(frozen=True)
class Experiment:
    name: str
    paper: str
    description: str
    runner: Callable[..., dict[str, Any]]  # (cfg, run_dir, reporter) -> summary
    defaults: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)

    def config(self, overrides: dict[str, Any] | None = None, *, quick: bool = False) -> RunConfig:
        raw = merge(self.defaults, self.quick) if quick else dict(self.defaults)
        raw = merge(raw, overrides or {})
        if raw.get("experiment", self.name) != self.name:
            raise ConfigError(f"experiment = {raw['experiment']!r} does not match the recipe {self.name!r}")
        raw["experiment"] = self.name
        return build(raw)


REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    REGISTRY[exp.name] = exp
    return exp


def get(name: str) -> Experiment:
    if name not in REGISTRY:
        raise ConfigError(f"unknown experiment {name!r}; allowed: {', '.join(REGISTRY)}")
    return REGISTRY[name]


def grid_points(cfg: RunConfig) -> list[tuple[str, dict[str, Any]]]:
    """(label, overrides) for every point of the grid's product; one unnamed point without a grid."""
    if not cfg.grid:
        return [("", {})]
    keys = list(cfg.grid)
    points = []
    for values in itertools.product(*(cfg.grid[k] for k in keys)):
        over = dict(zip(keys, values))
        points.append((",".join(f"{k}={v}" for k, v in over.items()), over))
    return points


from icldyn.experiments import ahn as _ahn  # noqa: E402,F401  (registers the recipes)
from icldyn.experiments import goel as _goel  # noqa: E402,F401
from icldyn.experiments import huang as _huang  # noqa: E402,F401
