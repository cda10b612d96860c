"""Config kinds of Ahn, Cheng, Daneshmand, Sra (2023), arXiv 2306.00297: Gaussian in-context regression prompts
(``data.kind = "prompts"``, SPEC §3.1) and the L-layer linear transformer (``model.kind = "linear_attention"``,
eq. (3), parameterisations (8) and (9))."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icldyn.config import DataSection, ModelSection, PositiveList, RunConfig, Section

KERNEL_DMAX = 16  # the C kernel's largest token dimension D = d + 1 (icldyn.papers.ahn.kernel.DMAX)


class GaussianCovariates(DataSection):
    """Covariates x ~ N(0, Σ) and label noise: the fields of every Gaussian law (shared with the regression law of
    Goel et al.)."""

    covariance: Literal["identity", "eigenvalues", "condition", "official"] = Field(
        "identity",
        description="Σ: identity; `eigenvalues` (with a seeded random rotation); `condition` "
        "(eigenvalues geometric from 1 to 1/condition_number, rotated); `official` "
        "(the official code's eigenvalues {1, 1, 1/4, 1/16, 1}, d = 5, new rotation per seed)",
    )
    eigenvalues: PositiveList = Field(None, description="eigenvalues of Σ (covariance = eigenvalues)")
    condition_number: float = Field(16.0, ge=1.0, description="κ(Σ) for covariance = condition")
    noise_std: float = Field(0.0, ge=0.0, description="label noise σ: y = wᵀx + σ ε (regression: Ω = σ² I_p)")


    @model_validator(mode="after")
    def _covariance(self) -> GaussianCovariates:
        if self.covariance == "eigenvalues":
            if self.eigenvalues is None:
                raise ValueError("covariance = 'eigenvalues' needs data.eigenvalues (a list of d positive floats)")
            if len(self.eigenvalues) != self.d:
                raise ValueError(f"data.eigenvalues has {len(self.eigenvalues)} entries but data.d = {self.d}")
        if self.covariance == "official" and self.d != 5:
            raise ValueError(f"data.covariance = 'official' is defined for d = 5 only, got data.d = {self.d}")
        if self.eigenvalues is not None and self.covariance != "eigenvalues":
            raise ValueError(f"data.eigenvalues applies to data.covariance = 'eigenvalues' only, not "
                             f"{self.covariance!r}")
        if self.condition_number != 16.0 and self.covariance != "condition":
            raise ValueError(f"data.condition_number applies to data.covariance = 'condition' only, not "
                             f"{self.covariance!r}")
        return self


class PromptsData(GaussianCovariates):
    """A fresh task w ~ N(0, Ω_w) per prompt, n examples and a query (SPEC §3.1)."""

    kind: Literal["prompts"] = Field("prompts", description="a fresh task w ~ N(0, Ω_w) per prompt, n examples + a "
                                     "query")
    w_prior: Literal["identity", "inverse_covariance"] = Field(
        "inverse_covariance",
        description="task prior: w ~ N(0, I_d) (Thm 1) or w ~ N(0, Σ⁻¹) (Thms 3-4, the paper's experiments)",
    )
    test_size: int = Field(20_000, ge=1, description="prompts in the fixed held-out test set of each seed")
    sampler: Literal["auto", "jax", "kernel"] = Field(
        "auto",
        description="training prompts of the linear transformer, the same draws either way (Philox4x32-10, "
        "Box–Muller): kernel (C, CPU: drawn straight into moments for the moment forms, into prompt matrices for the "
        "column forms); jax (its jax.numpy twin, any backend); auto: "
        "kernel when the model runs the kernel forward",
    )


class LinearAttentionTrain(Section):
    threads: int = Field(1, ge=1, le=256, description="CPU threads of the fused kernel (changes summation order)")


class LinearAttentionModel(ModelSection):
    """L-layer linear self-attention, eq. (3); parameterisations full, sparse (8), relaxed (9)."""

    kind: Literal["linear_attention"] = Field("linear_attention", description="L-layer linear self-attention")
    data_kinds = ("prompts",)
    train_fields = LinearAttentionTrain
    layers: int = Field(3, ge=1, le=64, description="number of layers L")
    parameterization: Literal["full", "sparse", "relaxed"] = Field(
        "full", description="full (P, Q free), sparse (eq. 8: preconditioned GD), relaxed (eq. 9: GD++)"
    )
    heads: int = Field(1, ge=1, le=64, description="attention heads per layer (their updates are summed)")
    init_std: float = Field(1e-3, ge=0.0, description="std of the iid normal initialisation of every trained block")
    forward: Literal["auto", "kernel", "moments", "columns"] = Field(
        "auto",
        description="kernel: fused C loss+gradient on a CPU (of the moment form for activation = 'linear', of the "
        "column form for the others); moments: the exact (d+1)×(d+1) moment-matrix form in JAX (linear attention "
        "only); columns: the literal column form of eq. (3) in JAX; auto: kernel where it compiles on a CPU "
        "backend, else moments (linear) or columns (one line says why). An explicit kernel that cannot be built "
        "here is refused. Every form draws the same prompts (data.sampler)",
    )
    activation: Literal["linear", "relu", "softmax", "softmax_masked"] = Field(
        "linear",
        description="the attention's activation σ(ZᵀQZ), as the official code's attention(P, Q, Z, activation): "
        "linear (eq. 3); relu; softmax (over all n + 1 keys, the query's own score included, then the query key "
        "masked, as the official code does); softmax_masked (the query's score excluded before normalising). "
        "Every activation keeps eq. (3)'s 1/n",
    )

    def check(self, cfg: RunConfig) -> None:
        if self.activation != "linear" and self.forward == "moments":
            raise ValueError(f"model.forward = 'moments' holds for model.activation = 'linear' only, not "
                             f"{self.activation!r}; allowed: model.forward = 'auto', 'kernel' or 'columns'")
        if "kernel" in (self.forward, cfg.data.sampler) and cfg.data.d + 1 > KERNEL_DMAX:
            raise ValueError(f"the C kernel takes data.d ≤ {KERNEL_DMAX - 1}, got data.d = {cfg.data.d}; allowed: "
                             "model.forward and data.sampler = 'auto', or a JAX form")

    def execution(self, cfg: RunConfig) -> dict:
        from icldyn.papers.ahn.setup import execution

        return execution(cfg)
