"""Akyürek, Schuurmans, Andreas, Ma, Zhou (2023), *What learning algorithm is in-context learning? Investigations
with linear models*, arXiv 2211.15661: the model-against-algorithm metrics (SPD, ILWD; with von Oswald et al.'s
sensitivity cosine, arXiv 2212.07677) logged over training — the *algorithm trajectory* of the L-layer linear
transformer on an anisotropic Σ against GD, preconditioned GD with Σ⁻¹ (arXiv 2306.00297's prediction) and OLS.

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``problem`` (the trainer's Problem, built in this one place; its ``learner`` is the
hook another model plugs into), ``recipes``, ``results`` (typed seeds, points and results), ``claims``
(``icldyn verify``), ``figures``; no theory module: the algorithms are shared components
(:mod:`icldyn.components.baselines`, :mod:`icldyn.components.agreement`).
"""

from icldyn.papers.akyurek.paper import PAPER
from icldyn.papers.akyurek.recipes import RECIPES
from icldyn.papers.akyurek.results import TrajectoryPoint, TrajectoryResult, TrajectorySeed

__all__ = ["PAPER", "RECIPES", "TrajectoryPoint", "TrajectoryResult", "TrajectorySeed"]
