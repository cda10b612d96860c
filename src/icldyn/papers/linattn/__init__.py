"""Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024), *Linear attention is (maybe) all you need (to understand
Transformer optimization)*, ICLR 2024, arXiv 2310.01082 — the companion paper of the official LinearTransformer
code: one recipe per optimisation notebook, on the official code's laws (:mod:`icldyn.components.laws`).

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``problem`` (the trainer's Problem, built in this one place), ``recipes``,
``results`` (typed seeds, points and results), ``theory`` (closed forms), ``claims`` (``icldyn verify``),
``figures``, ``config`` (its model kind ``attention``); it has no theory module: its claims are measured. Shared
parts (prompt laws, attention layers, baselines) come from :mod:`icldyn.components`.
"""

from icldyn.papers.linattn.paper import PAPER
from icldyn.papers.linattn.recipes import RECIPES
from icldyn.papers.linattn.results import LawPoint, LawResult, NoisePoint, NoiseResult

__all__ = ["PAPER", "RECIPES", "LawPoint", "LawResult", "NoisePoint", "NoiseResult"]
