"""Goel, Soltanolkotabi, Bartlett, *Training dynamics of softmax self-attention: fast global convergence via
preconditioning*: the softmax self-attention regressor's population loss, the global-minimum manifold S and
Algorithm 1 (spectral initialisation, balancing regulariser, the preconditioner as an optax transformation).

Layout (the same in every paper folder): ``paper`` (the :class:`~icldyn.plugins.Paper` registered under the
``icldyn.papers`` entry points), ``problem`` (the trainer's Problem, built in this one place), ``recipes``,
``results`` (typed seeds, points and results), ``theory`` (closed forms), ``claims`` (``icldyn verify``),
``figures``. Shared parts (prompt laws, attention layers, baselines) come from :mod:`icldyn.components`.
"""

from icldyn.papers.goel.paper import PAPER
from icldyn.papers.goel.recipes import RECIPES
from icldyn.papers.goel.results import GoelPoint, GoelResult, GoelSeed

__all__ = ["PAPER", "RECIPES", "GoelPoint", "GoelResult", "GoelSeed"]
