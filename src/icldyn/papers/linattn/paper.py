"""The plug-in of Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024), *Linear attention is (maybe) all you need (to
understand Transformer optimization)*, ICLR 2024, arXiv 2310.01082."""

from icldyn.components.laws import TaskLaws
from icldyn.components.linear_attention import LinearAttentionModel
from icldyn.components.prompts import PromptsData
from icldyn.papers.linattn.claims import claims
from icldyn.papers.linattn.config import Attention
from icldyn.papers.linattn.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="linattn",
    title="Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024): Linear attention is (maybe) all you need (to understand "
          "Transformer optimization), ICLR 2024, arXiv 2310.01082",
    recipes=tuple(RECIPES), data=(TaskLaws, PromptsData), models=(Attention, LinearAttentionModel), claims=claims,
)
