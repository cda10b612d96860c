"""The task-diversity paper's kinds (arXiv 2306.15063): a finite pool of M regression tasks (``data.kind =
"task_pool"``), the L-layer linear attention on it (``model.kind = "pool_attention"``, the fields of
:class:`~icldyn.components.linear_attention.LinearAttentionModel`) and the GPT (``model.kind = "pool_gpt"``, the fields
of :class:`~icldyn.components.gpt.GPTModel`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from icldyn.components.gpt import GPTModel
from icldyn.components.linear_attention import LawAttentionModel
from icldyn.components.prompts import GaussianCovariates


class TaskPool(GaussianCovariates):
    """Pretraining prompts whose task is drawn uniformly from a pool of M tasks w_1 … w_M ~ N(0, I_d), drawn once
    per seed; evaluation prompts draw w from the pool and from N(0, I_d) (the true prior)."""

    kind: Literal["task_pool"] = Field("task_pool", description="a finite pool of M tasks w_m ~ N(0, I_d) (drawn "
                                       "once per seed); each prompt's task drawn uniformly from it")
    pool_size: int = Field(64, ge=1, le=2**20, description="M: the tasks in the pretraining pool")
    noise_std: float = Field(0.5, gt=0.0, description="label noise σ (> 0: the dMMSE posterior needs it; arXiv "
                             "2306.15063: σ² = 0.25)")
    test_size: int = Field(5000, ge=1, description="prompts in each fixed held-out set (pool tasks, true-prior "
                           "tasks)")


class PoolAttention(LawAttentionModel):
    """The L-layer linear attention (arXiv 2306.00297 eq. 3) trained on a task pool."""

    kind: Literal["pool_attention"] = Field("pool_attention", description="L-layer linear attention on data.kind = "
                                            "'task_pool' (linear_attention's fields)")
    data_kinds = ("task_pool",)


class PoolGPT(GPTModel):
    """Garg et al.'s GPT-2 decoder (arXiv 2208.01066 §3; :mod:`icldyn.components.gpt`) trained on a task pool, as
    Raventós et al. (arXiv 2306.15063 §2) train theirs."""

    kind: Literal["pool_gpt"] = Field("pool_gpt", description="GPT-2-style decoder on data.kind = 'task_pool' "
                                      "(gpt's fields)")
    data_kinds: ClassVar[tuple[str, ...]] = ("task_pool",)
