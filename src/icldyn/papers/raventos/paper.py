"""The plug-in of Raventós, Paul, Chen, Ganguli (2023), *Pretraining task diversity and the emergence of
non-Bayesian in-context learning for regression*, NeurIPS 2023, arXiv 2306.15063."""

from icldyn.papers.raventos.claims import claims
from icldyn.papers.raventos.config import PoolAttention, PoolGPT, TaskPool
from icldyn.papers.raventos.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="raventos",
    title="Raventós, Paul, Chen, Ganguli (2023): Pretraining task diversity and the emergence of non-Bayesian "
          "in-context learning for regression, NeurIPS 2023, arXiv 2306.15063",
    recipes=tuple(RECIPES), data=(TaskPool,), models=(PoolAttention, PoolGPT), claims=claims,
)
