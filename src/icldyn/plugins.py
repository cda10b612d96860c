"""Paper plug-ins: each paper is a :class:`Paper` registered under the ``icldyn.papers`` entry-point group.

The built-in papers register in icldyn's own ``pyproject.toml``, exactly as an outside package adds one::

    [project.entry-points."icldyn.papers"]
    mypaper = "mypackage.paper:PAPER"

A Paper declares its config kinds (data laws and models, :mod:`icldyn.config`), its recipes
(:class:`~icldyn.recipe.Experiment`), and its claims (a function returning :class:`~icldyn.claims.Claim` rows for
``icldyn verify --paper NAME``). Figures, theory and models stay inside the plug-in's own folder.
``docs/plugins.md`` walks through writing one.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from icldyn.config import ConfigError, DataSection, ModelSection

if TYPE_CHECKING:
    from icldyn.claims import Claim
    from icldyn.recipe import Experiment, Reporter

GROUP = "icldyn.papers"


@dataclass(frozen=True)
class Paper:
    name: str  # `icldyn verify --paper NAME`, and every recipe's `paper`
    title: str  # authors, year, title and arXiv id: the line `icldyn list` prints
    recipes: tuple[Experiment, ...] = ()
    data: tuple[type[DataSection], ...] = ()  # data laws this paper adds (config `data.kind`)
    models: tuple[type[ModelSection], ...] = ()  # models this paper adds (config `model.kind`)
    # (quick, store, reporter) -> claims: runs what it needs into the store, returns one row per claim
    claims: Callable[[bool, str | Path, Reporter | None], list[Claim]] | None = None
    # () -> {section: {key: value}}: what `icldyn doctor` should show of this plug-in (e.g. a C kernel's status)
    doctor: Callable[[], dict[str, dict]] | None = None


@functools.cache
def papers() -> dict[str, Paper]:
    """name → Paper of every installed plug-in. One that fails to load is skipped with one line on stderr."""
    out: dict[str, Paper] = {}
    for ep in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda e: e.name):
        try:
            paper = ep.load()
        except Exception as err:  # a broken plug-in must not take the others down
            print(f"icldyn: plug-in {ep.name!r} ({ep.value}) failed to load: {type(err).__name__}: {err}",
                  file=sys.stderr)
            continue
        if not isinstance(paper, Paper):
            print(f"icldyn: plug-in {ep.name!r} ({ep.value}) is not an icldyn.plugins.Paper; skipped", file=sys.stderr)
            continue
        out.setdefault(paper.name, paper)
    return out


@functools.cache
def recipes() -> dict[str, Experiment]:
    """name → recipe over every installed paper (the first paper to name a recipe keeps it)."""
    out: dict[str, Experiment] = {}
    for paper in papers().values():
        for exp in paper.recipes:
            out.setdefault(exp.name, exp)
    return out


def get(name: str) -> Experiment:
    if name not in recipes():
        raise ConfigError(f"unknown experiment {name!r}; allowed: {', '.join(recipes())}")
    return recipes()[name]


def paper(name: str) -> Paper:
    if name not in papers():
        raise ConfigError(f"unknown paper {name!r}; allowed: {', '.join(papers())}")
    return papers()[name]
