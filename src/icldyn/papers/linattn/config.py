"""Config kinds of the companion paper (arXiv 2310.01082): the official code's data laws (``data.kind = "laws"``)
and its L-layer attention with an activation (``model.kind = "attention"``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icldyn.config import DataSection, RunConfig
from icldyn.papers.ahn.config import LinearAttentionModel


class TaskLaws(DataSection):
    """The official code's ``generate_data`` laws: covariates ``normal``, ``sphere`` or ``gamma`` and a task per
    prompt (linear, or nonlinear: a random ReLU network, linear on random-MLP features, 1-d sine)."""

    kind: Literal["laws"] = Field("laws", description="the official code's covariate laws and tasks, a fresh task "
                                  "per prompt")
    covariates: Literal["normal", "sphere", "gamma"] = Field(
        "normal", description="x ~ N(0, I_d); sphere: x/‖x‖; gamma: x/‖x‖ · r with r² ~ Gamma(shape_k, "
        "scale √(10/shape_k)) (heavy-tailed; shape_k = 5/2 at d = 5 is N(0, I_5) again)")
    shape_k: float = Field(0.1, gt=0.0, description="Gamma shape of covariates = 'gamma' (official: 0.1)")
    task: Literal["linear", "relu_net", "mlp_features", "sine"] = Field(
        "linear", description="linear: y = wᵀx, w ~ N(0, I_d); relu_net: y = f(x), f a random one-hidden-layer "
        "ReLU network (weights N(0, 0.1²)) per prompt; mlp_features: tokens are φ(x) for a random d→hidden→d ReLU "
        "MLP (weights N(0, 1)), y = wᵀφ(x); sine: d = 1, x ~ U(−5, 5), y = a sin(x + φ), a ~ U(0.1, 5), "
        "φ ~ U(0, π)")
    hidden: int = Field(5, ge=1, le=4096, description="hidden width of relu_net and mlp_features (official: d)")
    test_size: int = Field(10_000, ge=1, description="prompts in each seed's fixed held-out set")

    @model_validator(mode="after")
    def _fit(self) -> TaskLaws:
        if self.task == "sine" and self.d != 1:
            raise ValueError(f"data.task = 'sine' is 1-d regression: it needs data.d = 1, got data.d = {self.d}")
        if self.task == "sine" and self.covariates != "normal":
            raise ValueError("data.task = 'sine' draws x ~ U(−5, 5) itself; data.covariates applies to the other "
                             "tasks only (leave it 'normal')")
        if self.shape_k != 0.1 and self.covariates != "gamma":
            raise ValueError(f"data.shape_k applies to data.covariates = 'gamma' only, not {self.covariates!r}")
        return self


class Attention(LinearAttentionModel):
    """The ``ahn`` plug-in's L-layer attention (eq. 3 of arXiv 2306.00297, with ``activation``) on these laws."""

    kind: Literal["attention"] = Field("attention", description="L-layer attention of the official code "
                                       "(linear, ReLU or softmax), on data.kind = 'laws'")
    data_kinds = ("laws",)

    def check(self, cfg: RunConfig) -> None:
        if self.activation != "linear" and self.forward == "moments":
            raise ValueError(f"model.forward = 'moments' holds for model.activation = 'linear' only, not "
                             f"{self.activation!r}; allowed: model.forward = 'auto', 'kernel' or 'columns'")

    def execution(self, cfg: RunConfig) -> dict:
        from icldyn.papers.ahn.model import resolve_forward

        form = resolve_forward(self, cfg.data.d)
        return {"forward": form, "note": f"forward `{form}`; prompts drawn in JAX"}
