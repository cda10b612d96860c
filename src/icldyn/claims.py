"""The claim table: every computable claim of a paper as (theory value, measured value, tolerance).

``icldyn verify --paper NAME --quick`` calls the paper plug-in's ``claims`` (:class:`~icldyn.plugins.Paper`): it runs
the quick recipes into the store (their run directories are kept) plus exact float64 identities, and returns one
:class:`Claim` per claim.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from icldyn.recipe import Reporter


class Claim(NamedTuple):
    paper: str
    claim: str
    theory: str
    measured: str
    tolerance: str
    passed: bool


def verify(paper: str | None, quick: bool, store: str | Path, reporter: Reporter | None = None) -> list[Claim]:
    """The claims of one installed paper (every paper with claims when ``paper`` is None)."""
    from icldyn.plugins import paper as get_paper
    from icldyn.plugins import papers

    chosen = [get_paper(paper)] if paper else [p for p in papers().values() if p.claims is not None]
    if paper and chosen[0].claims is None:
        from icldyn.config import ConfigError

        raise ConfigError(f"paper {paper!r} declares no claims; papers with claims: "
                          + ", ".join(p.name for p in papers().values() if p.claims is not None))
    return [c for p in chosen for c in p.claims(quick, store, reporter)]
