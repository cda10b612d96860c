"""The companion paper's model kind (arXiv 2310.01082): the L-layer attention with an activation on the official code's
data laws (``model.kind = "attention"`` on ``data.kind = "laws"``, :mod:`icldyn.components.laws`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from icldyn.components.linear_attention import LawAttentionModel


class Attention(LawAttentionModel):
    """The L-layer attention (eq. 3 of arXiv 2306.00297, with ``activation``) on the official code's laws."""

    kind: Literal["attention"] = Field("attention", description="L-layer attention of the official code "
                                       "(linear, ReLU or softmax), on data.kind = 'laws'")
    data_kinds = ("laws",)
