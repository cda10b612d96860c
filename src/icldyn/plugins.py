"""Paper plug-ins: each paper is a :class:`Paper` registered under the ``icldyn.papers`` entry-point group.

The built-in papers register in icldyn's own ``pyproject.toml``, exactly as an outside package adds one::

    [project.entry-points."icldyn.papers"]
    mypaper = "mypackage.paper:PAPER"

A Paper declares its config kinds (data laws and models, :mod:`icldyn.config`; its own or the core components'),
its recipes (:class:`~icldyn.recipe.Recipe`), its default recipe (what ``icldyn run`` runs without one), and its
claims (a function returning :class:`~icldyn.claims.Claim` rows for ``icldyn verify --paper NAME``). Figures, theory
and its own models stay inside the plug-in's folder; ``docs/plugins.md`` walks through writing one.

This module sits at the bottom of the core's import graph (it imports only :mod:`icldyn.errors` at run time): the
config layer asks it for the installed kinds.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

from icldyn.errors import ConfigError

if TYPE_CHECKING:
    from icldyn.claims import Claim
    from icldyn.config import DataSection, ModelSection
    from icldyn.recipe import Recipe, Reporter


class Claims(Protocol):
    """``claims(quick, store, reporter)``: run what the claims need into the store, return one row per claim."""

    def __call__(self, quick: bool, store: str | Path, reporter: Reporter | None, /) -> list[Claim]: ...


GROUP = "icldyn.papers"


@dataclass(frozen=True, kw_only=True)
class Paper:
    """One installed paper. ``data`` / ``models``: the config kinds its recipes use (its own, or the core
    components'; a kind two papers declare must be the same class). ``default``: the recipe ``icldyn run`` runs
    when given none (the first installed paper, by name, that declares one). ``doctor``: what ``icldyn doctor``
    shows of this plug-in (``{section: {key: value}}``, e.g. a C kernel's status)."""

    name: str  # `icldyn verify --paper NAME`, and every recipe's `paper`
    title: str  # authors, year, title and arXiv id: the line `icldyn list` prints
    recipes: tuple[Recipe, ...] = ()
    data: tuple[type[DataSection], ...] = ()
    models: tuple[type[ModelSection], ...] = ()
    claims: Claims | None = None
    default: str | None = None
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


_INHERITED = ("runner", "result", "combine", "group_runner", "group_fields", "derive", "assumptions", "losses",
              "metric")


@functools.cache
def recipes() -> dict[str, Recipe]:
    """name → recipe over every installed paper (the first paper to name a recipe keeps it); a recipe with a
    ``base`` takes the base recipe's runner, result, combine, … (one whose base is not installed is skipped with
    one line on stderr)."""
    out: dict[str, Recipe] = {}
    for paper in papers().values():
        for exp in paper.recipes:
            out.setdefault(exp.name, exp)
    for name, exp in list(out.items()):
        if exp.base is None:
            if exp.runner is None:
                print(f"icldyn: recipe {name!r} has neither a runner nor a base recipe; skipped", file=sys.stderr)
                del out[name]
            continue
        base = out.get(exp.base)
        if base is None or base.base is not None:
            print(f"icldyn: recipe {name!r} builds on {exp.base!r}, which is not installed (or builds on another); "
                  "skipped", file=sys.stderr)
            del out[name]
            continue
        out[name] = dataclasses.replace(exp, **{k: getattr(base, k) for k in _INHERITED})
    return out


def get(name: str) -> Recipe:
    if name not in recipes():
        raise ConfigError(f"unknown experiment {name!r}; allowed: {', '.join(recipes())}")
    return recipes()[name]


def default_recipe() -> str:
    """The recipe ``icldyn run`` runs when given none: the default of the first installed paper that declares one."""
    for paper in papers().values():
        if paper.default is not None:
            return paper.default
    if recipes():
        return next(iter(recipes()))
    raise ConfigError("no recipes are installed: no icldyn.papers plug-in loaded")


def paper(name: str) -> Paper:
    if name not in papers():
        raise ConfigError(f"unknown paper {name!r}; allowed: {', '.join(papers())}")
    return papers()[name]


def recipe_of(raw: dict) -> Recipe:
    """The recipe a raw config (a TOML file's overrides) names, the default recipe where it names none; sets
    ``raw["experiment"]``."""
    raw.setdefault("experiment", default_recipe())
    return get(raw["experiment"])
