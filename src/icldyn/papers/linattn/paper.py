"""The plug-in of Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024), *Linear attention is (maybe) all you need (to
understand Transformer optimization)*, ICLR 2024, arXiv 2310.01082."""

from icldyn.papers.linattn.claims import claims
from icldyn.papers.linattn.config import Attention, TaskLaws
from icldyn.papers.linattn.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="linattn",
    title="Ahn, Cheng, Song, Yun, Jadbabaie, Sra (2024): Linear attention is (maybe) all you need (to understand "
          "Transformer optimization), ICLR 2024, arXiv 2310.01082",
    recipes=tuple(RECIPES), data=(TaskLaws,), models=(Attention,), claims=claims,
)
