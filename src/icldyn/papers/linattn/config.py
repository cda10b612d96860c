"""The companion paper's model kind (arXiv 2310.01082): the L-layer attention with an activation on the official code's
data laws (``model.kind = "attention"`` on ``data.kind = "laws"``, :mod:`icldyn.components.laws`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from icldyn.components.linear_attention import LinearAttentionModel, resolve_forward
from icldyn.config import RunConfig


class Attention(LinearAttentionModel):
    """The L-layer attention (eq. 3 of arXiv 2306.00297, with ``activation``) on the official code's laws."""

    kind: Literal["attention"] = Field("attention", description="L-layer attention of the official code "
                                       "(linear, ReLU or softmax), on data.kind = 'laws'")
    data_kinds = ("laws",)

    def check(self, cfg: RunConfig) -> None:
        if self.activation != "linear" and self.forward == "moments":
            raise ValueError(f"model.forward = 'moments' holds for model.activation = 'linear' only, not "
                             f"{self.activation!r}; allowed: model.forward = 'auto', 'kernel' or 'columns'")

    def execution(self, cfg: RunConfig) -> dict:
        form = resolve_forward(self, cfg.data.d)
        return {"forward": form, "threads": cfg.train.threads, "note": f"forward `{form}`; prompts drawn in JAX"}
