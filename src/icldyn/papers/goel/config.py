"""Config kinds of Goel, Soltanolkotabi, Bartlett: one fixed multi-output regression y = Mx + z
(``data.kind = "regression"``, SPEC §1.1) and the softmax self-attention regressor
ŷ_i = A Σ_j softmax_j(x_iᵀBx_j) x_j (``model.kind = "softmax_regressor"``, SPEC §1.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icldyn.config import ModelSection, PositiveList, Section
from icldyn.papers.ahn.config import GaussianCovariates


class RegressionData(GaussianCovariates):
    """One fixed M ∈ R^{p×d} per seed, y = Mx + z; a prompt is n samples, each a query."""

    kind: Literal["regression"] = Field("regression", description="one fixed M per seed, y = Mx + z, a prompt is n "
                                        "samples, each a query")
    p: int = Field(4, ge=1, le=256, description="response dimension p (the paper assumes p ≥ d)")
    m_norm: float = Field(
        0.05, gt=0.0, description="M is a seeded Gaussian matrix scaled to ‖MΣ^½‖_op = m_norm (the paper assumes "
        "< 1/16)")
    m_singular_values: PositiveList = Field(
        None, description="the singular values of MΣ^½ (min(p, d) of them, seeded random singular vectors) instead "
        "of a scaled Gaussian M")


    @model_validator(mode="after")
    def _shapes(self) -> RegressionData:
        if self.p < self.d:
            raise ValueError(f"data.p = {self.p} < data.d = {self.d}: the regression law needs p ≥ d "
                             "(S and θ*(J) are defined for p ≥ d); allowed: data.p ≥ data.d")
        if self.m_singular_values is not None and len(self.m_singular_values) != min(self.p, self.d):
            raise ValueError(f"data.m_singular_values has {len(self.m_singular_values)} entries but "
                             f"min(data.p, data.d) = {min(self.p, self.d)}")
        return self


class SoftmaxRegressorTrain(Section):
    oracle: Literal["sampled", "population"] = Field(
        "sampled", description="gradients of the empirical loss on fresh prompts (sampled), or the exact gradient "
        "of the population loss (population: the closed form of SPEC §1.3; the softmax_icl engine: an expectation "
        "over feature counts)")
    regularizer: float = Field(
        0.0, ge=0.0, description="weight of the balancing regulariser R̂ added to the loss (Algorithm 1: 1)")
    precondition: bool = Field(
        False, description="multiply the B-gradient by Σ̂⁻¹ of the initial sample, P̂⁻¹ = blockdiag(I_p, Σ̂⁻¹) "
        "(Algorithm 1)")


class SoftmaxRegressorModel(ModelSection):
    """ŷ_i = A Σ_j softmax_j(x_iᵀBx_j) x_j, A ∈ R^{p×d}, B ∈ R^{d×d}."""

    kind: Literal["softmax_regressor"] = Field("softmax_regressor", description="softmax self-attention regressor")
    data_kinds = ("regression",)
    train_fields = SoftmaxRegressorTrain
    init: Literal["random", "spectral"] = Field(
        "random", description="random: iid N(0, init_std²) entries; spectral: Algorithm 1's spectral "
        "initialisation from one sample of n (OLS M̂, Σ̂)")
    init_std: float = Field(1e-3, ge=0.0, description="std of the iid normal initialisation of every trained block")
