"""The plug-in of Goel, Soltanolkotabi, Bartlett, *a softmax self-attention regressor*: its population loss as a
matrix factorisation and a structure-aware gradient descent (Algorithm 1)."""

from icldyn.components.regression import RegressionData
from icldyn.components.softmax_regressor import SoftmaxRegressorModel
from icldyn.papers.goel.claims import claims
from icldyn.papers.goel.recipes import RECIPES
from icldyn.plugins import Paper

PAPER = Paper(
    name="goel",
    title="Goel, Soltanolkotabi, Bartlett: softmax self-attention regression, its population loss as a matrix "
          "factorisation, and Algorithm 1 (structure-aware GD)",
    recipes=tuple(RECIPES), data=(RegressionData,), models=(SoftmaxRegressorModel,), claims=claims,
)
