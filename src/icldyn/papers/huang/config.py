"""Config kinds of Huang, Cheng, Liang (2023), arXiv 2310.05249: tokens drawn from K orthonormal features
(``data.kind = "features"``, SPEC §2.1) and one-layer softmax attention ŷ = ν Σ_i y_i softmax_i(x_iᵀQx_q)
(``model.kind = "softmax_icl"``, SPEC §2.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icldyn.config import DataSection, ModelSection, PositiveList, RunConfig, Section
from icldyn.papers.goel.config import SoftmaxRegressorTrain


class FeaturesData(DataSection):
    """n tokens and a query drawn from K orthonormal features v_k with probabilities p_k, w ~ N(0, I_d)."""

    kind: Literal["features"] = Field("features", description="n tokens and a query from K orthonormal features v_k "
                                      "with probabilities p_k, w ~ N(0, I_d)")
    features: int = Field(4, ge=1, le=256, description="number of orthonormal features K (≤ d)")
    feature_basis: Literal["standard", "random"] = Field(
        "standard", description="v_k = e_k, or the first K columns of a seeded random orthogonal matrix")
    p_dominant: float | None = Field(
        None, gt=0.0, lt=1.0, description="imbalanced law p_1 = p_dominant, p_k = (1 − p_1)/(K − 1) (Thm 3.2); "
        "unset: balanced p_k = 1/K (Thm 3.1)")
    feature_probs: PositiveList = Field(
        None, description="explicit p_1…p_K (positive, summing to 1); overrides p_dominant")


    @model_validator(mode="after")
    def _shapes(self) -> FeaturesData:
        if self.features > self.d:
            raise ValueError(f"data.features = {self.features} exceeds data.d = {self.d}: K orthonormal features "
                             "need K ≤ d")
        if self.feature_probs is not None:
            if len(self.feature_probs) != self.features:
                raise ValueError(f"data.feature_probs has {len(self.feature_probs)} entries but data.features = "
                                 f"{self.features}")
            if abs(sum(self.feature_probs) - 1.0) > 1e-9:
                raise ValueError(f"data.feature_probs must sum to 1, got {sum(self.feature_probs):.6g}")
        return self


class SoftmaxICLTrain(Section):
    oracle: Literal["sampled", "population"] = SoftmaxRegressorTrain.model_fields["oracle"]
    count_samples: int = Field(
        20_000, ge=100, description="oracle = population: Monte-Carlo count vectors (common random numbers) when "
        "exact enumeration of the multinomial counts would exceed 200 000 vectors")


class SoftmaxICLModel(ModelSection):
    """One-layer softmax attention, the query masked; on feature tokens, or on Gaussian prompts."""

    kind: Literal["softmax_icl"] = Field("softmax_icl", description="one-layer softmax attention ŷ = ν Σ_i y_i "
                                         "softmax_i(x_iᵀQx_q), query masked")
    data_kinds = ("features", "prompts")
    train_fields = SoftmaxICLTrain
    train_value: bool = Field(False, description="train the value weight ν (the paper fixes ν = 1)")

    def check(self, cfg: RunConfig) -> None:
        if cfg.data.kind == "prompts":
            if cfg.train.oracle != "sampled":
                raise ValueError("train.oracle = 'population' needs data.kind = 'features' (Gaussian prompts have "
                                 "no exact population engine here)")
            if cfg.data.sampler != "auto":
                raise ValueError(f"data.sampler = {cfg.data.sampler!r} applies to model.kind = 'linear_attention' "
                                 "only, not 'softmax_icl'; remove it")
