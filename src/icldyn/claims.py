"""The claim table: every computable claim of a paper as numbers — a closed-form (theory) value, the measured value
the verdict is decided on, and the tolerance the measurement's own error justifies.

``icldyn verify --paper NAME --quick`` calls the paper plug-in's ``claims`` (:class:`~icldyn.plugins.Paper`): it runs
the quick recipes into the store (their run directories are kept) plus exact float64 identities, and returns one
:class:`Claim` per claim. ``icldyn verify --json`` and ``icldyn.verify(...)`` give the numbers (so two versions'
tables can be diffed); the CLI's table prints :meth:`Claim.display`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from icldyn.recipe import Reporter


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of a paper, as numbers.

    ``test`` says how ``measured`` (m) is held against ``theory`` (t) and ``tolerance`` (tol), in symbols:
    ``"|m − t| ≤ tol"`` (tol absolute, e.g. 3 s.e.), ``"|m/t − 1| ≤ tol"``, ``"m ≤ tol"``, ``"m ≥ tol"``,
    ``"CI ∋ t"``, …; ``passed`` is the verdict (a claim may add conditions, which ``detail`` then names with their
    numbers). ``theory`` is None only where the theory gives no closed-form value (a pure bound or an ordering).
    ``fmt`` is the display format of the three numbers; ``detail`` the rest of what was measured (shown beside m).
    """

    paper: str
    claim: str
    theory: float | None
    measured: float
    tolerance: float
    test: str
    passed: bool
    fmt: str = ".4g"
    detail: str = ""

    def __post_init__(self) -> None:  # NumPy / JAX scalars to plain Python numbers (JSON, DataFrame dtypes)
        object.__setattr__(self, "theory", None if self.theory is None else float(self.theory))
        object.__setattr__(self, "measured", float(self.measured))
        object.__setattr__(self, "tolerance", float(self.tolerance))
        object.__setattr__(self, "passed", bool(self.passed))

    def _num(self, x: float | None) -> str:
        return "—" if x is None else format(x, self.fmt)

    def display(self) -> tuple[str, str, str]:
        """The table's (theory, measured, tolerance) strings: the numbers in ``fmt``, ``detail`` beside the measured
        value, the test beside the tolerance."""
        measured = self._num(self.measured) + (f"; {self.detail}" if self.detail else "")
        return self._num(self.theory), measured, f"tol {self._num(self.tolerance)}: {self.test}"

    def asdict(self) -> dict:
        """The fields as a dict (plain floats; non-finite numbers as None, so ``json.dumps`` writes valid JSON)."""
        finite = lambda x: x if x is None or math.isfinite(x) else None  # noqa: E731
        d = asdict(self)
        return {**d, **{k: finite(d[k]) for k in ("theory", "measured", "tolerance")}}


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
