"""The plug-in of Akyürek, Schuurmans, Andreas, Ma, Zhou (2023), *What learning algorithm is in-context learning?
Investigations with linear models*, ICLR 2023, arXiv 2211.15661: which algorithm a trained model runs, over
training."""

from icldyn.components.gpt import GPTModel
from icldyn.components.linear_attention import LinearAttentionModel
from icldyn.components.prompts import PromptsData
from icldyn.papers.akyurek.claims import claims
from icldyn.papers.akyurek.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="akyurek",
    title="Akyürek, Schuurmans, Andreas, Ma, Zhou (2023): What learning algorithm is in-context learning? "
          "Investigations with linear models, ICLR 2023, arXiv 2211.15661",
    recipes=tuple(RECIPES), data=(PromptsData,), models=(LinearAttentionModel, GPTModel), claims=claims,
)
