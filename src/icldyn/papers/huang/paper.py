"""The plug-in of Huang, Cheng, Liang (2023), *In-context convergence of transformers*, arXiv 2310.05249, with the
crossover recipe (its softmax attention on the Gaussian prompts of Ahn et al.)."""

from icldyn.components.feature_attention import SoftmaxICLModel
from icldyn.components.features import FeaturesData
from icldyn.components.prompts import PromptsData
from icldyn.papers.huang.claims import claims
from icldyn.papers.huang.crossover import RECIPES as CROSSOVER
from icldyn.papers.huang.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="huang",
    title="Huang, Cheng, Liang (2023): In-context convergence of transformers, arXiv 2310.05249",
    recipes=tuple(RECIPES + CROSSOVER), data=(FeaturesData, PromptsData), models=(SoftmaxICLModel,), claims=claims,
)
