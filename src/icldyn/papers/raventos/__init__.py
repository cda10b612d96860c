"""Raventós, Paul, Chen, Ganguli (2023), *Pretraining task diversity and the emergence of non-Bayesian in-context
learning for regression*, arXiv 2306.15063: a model trained on a finite pool of M tasks, held against the discrete
posterior mean over the pool (dMMSE) and ridge (the posterior mean under the true prior) as M grows.

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``config`` (its kinds: ``data.kind = "task_pool"``, ``model.kind =
"pool_attention"``), ``problem`` (the trainer's Problem, built in this one place; ``learner`` is the hook another
model plugs into), ``recipes``, ``results`` (typed seeds, points and results), ``theory`` (dMMSE and ridge),
``claims`` (``icldyn verify``), ``figures``.
"""

from icldyn.papers.raventos.paper import PAPER
from icldyn.papers.raventos.recipes import RECIPES
from icldyn.papers.raventos.results import DiversityPoint, DiversityResult, DiversitySeed

__all__ = ["PAPER", "RECIPES", "DiversityPoint", "DiversityResult", "DiversitySeed"]
