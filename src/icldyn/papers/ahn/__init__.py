"""Ahn, Cheng, Daneshmand, Sra (2023), *Transformers learn to implement preconditioned gradient descent for
in-context learning*, arXiv 2306.00297: L-layer linear transformers on Gaussian prompts, Theorems 1-5, Figs. 6-7.

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``problem`` (the trainer's Problem, built in this one place), ``recipes``,
``results`` (typed seeds, points and results), ``theory`` (closed forms), ``claims`` (``icldyn verify``),
``figures``. Shared parts (prompt laws, attention layers, baselines) come from :mod:`icldyn.components`.
"""

from icldyn.papers.ahn.paper import PAPER
from icldyn.papers.ahn.recipes import RECIPES
from icldyn.papers.ahn.results import AhnPoint, AhnResult, AhnSeed

__all__ = ["PAPER", "RECIPES", "AhnPoint", "AhnResult", "AhnSeed"]
