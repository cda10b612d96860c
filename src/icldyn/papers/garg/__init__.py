"""Garg, Tsipras, Liang, Valiant (2022), *What can transformers learn in-context? A case study of simple function
classes*, NeurIPS 2022, arXiv 2208.01066: a GPT-2-style decoder (:mod:`icldyn.components.gpt`) trained on function
classes (:mod:`icldyn.components.function_classes`) with the loss at every prefix, against the baseline zoo
(:mod:`icldyn.components.zoo`) as the number of in-context examples grows.

Layout (as in every paper folder): ``paper``, ``problem``, ``recipes``, ``results``, ``theory`` (the baselines'
closed forms), ``claims``, ``figures``.
"""

from icldyn.papers.garg.paper import PAPER
from icldyn.papers.garg.recipes import RECIPES
from icldyn.papers.garg.results import CurvePoint, CurveResult

__all__ = ["PAPER", "RECIPES", "CurvePoint", "CurveResult"]
