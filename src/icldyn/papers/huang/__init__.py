"""Huang, Cheng, Liang (2023), *In-context convergence of transformers*, arXiv 2310.05249: one-layer softmax
attention on feature tokens trained by GD from zero, the exact population engine over feature counts, balanced and
imbalanced phases; with the crossover recipe (its softmax attention on Gaussian prompts).

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``problem`` (the trainer's Problem, built in this one place), ``recipes``,
``results`` (typed seeds, points and results), ``theory`` (closed forms), ``claims`` (``icldyn verify``),
``figures``, ``crossover`` (the recipe on Gaussian prompts). Shared parts (prompt laws, attention layers, baselines)
come from :mod:`icldyn.components`.
"""

from icldyn.papers.huang.paper import PAPER
from icldyn.papers.huang.recipes import RECIPES
from icldyn.papers.huang.results import HuangPoint, HuangResult, HuangSeed

__all__ = ["PAPER", "RECIPES", "HuangPoint", "HuangResult", "HuangSeed"]
