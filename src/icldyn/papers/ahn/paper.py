"""The plug-in of Ahn, Cheng, Daneshmand, Sra (2023), *Transformers learn to implement preconditioned gradient descent
for in-context learning*, arXiv 2306.00297."""

from icldyn.components.linear_attention import LinearAttentionModel
from icldyn.components.prompts import PromptsData
from icldyn.papers.ahn.claims import claims
from icldyn.papers.ahn.recipes import RECIPES
from icldyn.papers.ahn.shift import RECIPE as SHIFT_RECIPE
from icldyn.plugins import Paper


def doctor(D: int = 6) -> dict[str, dict]:
    """The C kernel's status for d = 5 (``icldyn doctor``)."""
    from icldyn.components import lsa_kernel as kernel

    st = kernel.status(D)
    return {"kernel": {f"status (D = {D})": "available" if st.available else "unavailable", "origin": st.origin,
                       "reason": st.reason, "compiler": st.compiler, "library": st.library, "log": st.log,
                       "cache": str(kernel.cache_dir())}}


PAPER = Paper(
    name="ahn",
    title="Ahn, Cheng, Daneshmand, Sra (2023): Transformers learn to implement preconditioned gradient descent for "
          "in-context learning, arXiv 2306.00297",
    recipes=(*RECIPES, SHIFT_RECIPE), data=(PromptsData,), models=(LinearAttentionModel,), claims=claims, doctor=doctor,
    default="quickstart",
)
