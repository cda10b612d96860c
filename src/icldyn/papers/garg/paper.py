"""The plug-in of Garg, Tsipras, Liang, Valiant (2022), *What can transformers learn in-context? A case study of
simple function classes*, NeurIPS 2022, arXiv 2208.01066."""

from icldyn.components.function_classes import KINDS
from icldyn.components.gpt import GPTModel
from icldyn.components.laws import TaskLaws
from icldyn.components.prompts import PromptsData
from icldyn.papers.garg.claims import claims
from icldyn.papers.garg.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="garg",
    title="Garg, Tsipras, Liang, Valiant (2022): What can transformers learn in-context? A case study of simple "
          "function classes, NeurIPS 2022, arXiv 2208.01066",
    recipes=tuple(RECIPES), data=(*KINDS, PromptsData, TaskLaws), models=(GPTModel,), claims=claims,
)
