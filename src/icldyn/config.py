"""Validated run configuration: one frozen pydantic model per concern, loaded from TOML.

A config file holds only overrides of an experiment's defaults; ``--set key=value`` applies
further overrides with dotted keys (``data.n=10``, ``model.layers=2``). Every field is
documented in ``docs/config.md``. Invalid input raises :class:`ConfigError` whose message is
one line naming the field, the value and what is allowed.
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ConfigError(ValueError):
    """Bad configuration input; ``str(err)`` is a single line fit for the terminal."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class DataConfig(_Section):
    """The data law: Gaussian in-context regression prompts (Ahn et al.; SPEC §3.1) or one fixed
    multi-output regression y = Mx + z whose prompts are n samples (Goel et al.; SPEC §1.1)."""

    kind: Literal["prompts", "regression", "features"] = Field(
        "prompts",
        description="prompts: a fresh task w ~ N(0, Ω_w) per prompt, n examples + a query (Ahn); regression: "
        "one fixed M ∈ R^{p×d} per seed, y = Mx + z, a prompt is n samples, each a query (Goel); features: "
        "n tokens and a query drawn from K orthonormal features v_k with probabilities p_k, w ~ N(0, I_d) (Huang)",
    )
    d: int = Field(5, ge=1, le=256, description="covariate dimension d")
    n: int = Field(20, ge=1, le=100_000, description="context examples per prompt n")
    covariance: Literal["identity", "eigenvalues", "condition", "official"] = Field(
        "identity",
        description="Σ: identity; `eigenvalues` (with a seeded random rotation); `condition` "
        "(eigenvalues geometric from 1 to 1/condition_number, rotated); `official` "
        "(the official code's eigenvalues {1, 1, 1/4, 1/16, 1}, d = 5, new rotation per seed)",
    )
    eigenvalues: list[float] | None = Field(None, description="eigenvalues of Σ (covariance = eigenvalues)")
    condition_number: float = Field(16.0, ge=1.0, description="κ(Σ) for covariance = condition")
    w_prior: Literal["identity", "inverse_covariance"] = Field(
        "inverse_covariance",
        description="task prior: w ~ N(0, I_d) (Thm 1) or w ~ N(0, Σ⁻¹) (Thms 3-4, the paper's experiments)",
    )
    noise_std: float = Field(0.0, ge=0.0, description="label noise σ: y = wᵀx + σ ε (regression: Ω = σ² I_p)")
    p: int = Field(4, ge=1, le=256, description="regression: response dimension p (the paper assumes p ≥ d)")
    m_norm: float = Field(
        0.05, gt=0.0, description="regression: M is a seeded Gaussian matrix scaled to ‖MΣ^½‖_op = m_norm "
        "(the paper assumes < 1/16)")
    m_singular_values: list[float] | None = Field(
        None, description="regression: the singular values of MΣ^½ (min(p, d) of them, seeded random singular "
        "vectors) instead of a scaled Gaussian M")
    resample_every: int = Field(1, ge=1, description="draw a fresh training batch every k steps (official code: 100)")
    test_size: int = Field(20_000, ge=1, description="prompts in the fixed held-out test set of each seed")
    sampler: Literal["auto", "jax", "kernel"] = Field(
        "auto",
        description="training prompts of the linear transformer, the same draws either way (Philox4x32-10, "
        "Box–Muller): kernel (C, drawn straight into moments, CPU); jax (its jax.numpy twin, any backend); auto: "
        "kernel when the model runs the kernel forward",
    )

    features: int = Field(4, ge=1, le=256, description="features: number of orthonormal features K (≤ d)")
    feature_basis: Literal["standard", "random"] = Field(
        "standard", description="features: v_k = e_k, or the first K columns of a seeded random orthogonal matrix")
    p_dominant: float | None = Field(
        None, gt=0.0, lt=1.0, description="features: imbalanced law p_1 = p_dominant, p_k = (1 − p_1)/(K − 1) "
        "(Huang Thm 3.2); unset: balanced p_k = 1/K (Thm 3.1)")
    feature_probs: list[float] | None = Field(
        None, description="features: explicit p_1…p_K (positive, summing to 1); overrides p_dominant")

    @field_validator("eigenvalues", "m_singular_values", "feature_probs")
    @classmethod
    def _positive(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and (len(v) == 0 or min(v) <= 0):
            raise ValueError(f"must be a non-empty list of positive floats, got {v}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> DataConfig:
        if self.covariance == "eigenvalues":
            if self.eigenvalues is None:
                raise ValueError("covariance = 'eigenvalues' needs data.eigenvalues (a list of d positive floats)")
            if len(self.eigenvalues) != self.d:
                raise ValueError(f"data.eigenvalues has {len(self.eigenvalues)} entries but data.d = {self.d}")
        if self.covariance == "official" and self.d != 5:
            raise ValueError(f"data.covariance = 'official' is defined for d = 5 only, got data.d = {self.d}")
        if self.kind == "features" and self.features > self.d:
            raise ValueError(f"data.features = {self.features} exceeds data.d = {self.d}: K orthonormal features "
                             "need K ≤ d")
        if self.feature_probs is not None:
            if len(self.feature_probs) != self.features:
                raise ValueError(f"data.feature_probs has {len(self.feature_probs)} entries but data.features = "
                                 f"{self.features}")
            if abs(sum(self.feature_probs) - 1.0) > 1e-9:
                raise ValueError(f"data.feature_probs must sum to 1, got {sum(self.feature_probs):.6g}")
        if self.kind == "regression" and self.p < self.d:
            raise ValueError(f"data.p = {self.p} < data.d = {self.d}: the regression law (Goel et al.) needs p ≥ d "
                             "(S and θ*(J) are defined for p ≥ d); allowed: data.p ≥ data.d")
        if self.m_singular_values is not None and len(self.m_singular_values) != min(self.p, self.d):
            raise ValueError(f"data.m_singular_values has {len(self.m_singular_values)} entries but "
                             f"min(data.p, data.d) = {min(self.p, self.d)}")
        if self.eigenvalues is not None and self.covariance != "eigenvalues":
            raise ValueError(f"data.eigenvalues applies to data.covariance = 'eigenvalues' only, not "
                             f"{self.covariance!r}")
        if self.condition_number != 16.0 and self.covariance != "condition":
            raise ValueError(f"data.condition_number applies to data.covariance = 'condition' only, not "
                             f"{self.covariance!r}")
        return self


class ModelConfig(_Section):
    """The model: L-layer linear self-attention (Ahn et al. eq. (3), parameterisations (8), (9)) or the
    softmax self-attention regressor ŷ_i = A Σ_j softmax_j(x_iᵀBx_j) x_j (Goel et al.; SPEC §1.2)."""

    kind: Literal["linear_attention", "softmax_regressor", "softmax_icl"] = Field(
        "linear_attention", description="linear_attention (data.kind = prompts), softmax_regressor "
        "(data.kind = regression) or softmax_icl: one-layer softmax attention ŷ = ν Σ_i y_i softmax_i(x_iᵀQx_q), "
        "query masked (Huang; data.kind = features, or Ahn's Gaussian prompts)")
    train_value: bool = Field(False, description="softmax_icl: train the value weight ν (Huang fix ν = 1)")
    init: Literal["random", "spectral"] = Field(
        "random", description="random: iid N(0, init_std²) entries; spectral (softmax_regressor): Algorithm 1's "
        "spectral initialisation from one sample of n (OLS M̂, Σ̂)")
    layers: int = Field(3, ge=1, le=64, description="number of layers L")
    parameterization: Literal["full", "sparse", "relaxed"] = Field(
        "full", description="full (P, Q free), sparse (eq. 8: preconditioned GD), relaxed (eq. 9: GD++)"
    )
    heads: int = Field(1, ge=1, le=64, description="attention heads per layer (their updates are summed)")
    init_std: float = Field(1e-3, ge=0.0, description="std of the iid normal initialisation of every trained block")
    forward: Literal["auto", "kernel", "moments", "columns"] = Field(
        "auto",
        description="kernel: fused C loss+gradient of the moment form (CPU); moments: the exact (d+1)×(d+1) "
        "moment-matrix form in JAX; columns: the literal column form of eq. (3); auto: kernel where it "
        "compiles on a CPU backend, else moments (one line says why). An explicit kernel that cannot be built here "
        "is refused. Every form draws the same prompts (data.sampler)",
    )


class TrainConfig(_Section):
    """Optimiser (optax) and loop settings."""

    optimizer: Literal["adam", "adamw", "sgd"] = Field("adam", description="optax optimiser (sgd without "
                                                                            "momentum = plain gradient descent)")
    lr: float = Field(0.01, gt=0.0, description="peak learning rate")
    b1: float = Field(0.9, ge=0.0, lt=1.0, description="Adam β₁ (official code: 0.99)")
    b2: float = Field(0.999, ge=0.0, lt=1.0, description="Adam β₂ (official code: 0.9)")
    weight_decay: float = Field(0.0, ge=0.0, description="decoupled weight decay (adamw)")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="SGD momentum")
    clip: float = Field(0.0, ge=0.0, description="gradient clipping threshold; 0 disables")
    clip_mode: Literal["global", "per_matrix"] = Field(
        "global", description="global norm, or each parameter block separately (official code)"
    )
    schedule: Literal["constant", "step", "cosine"] = Field("constant", description="learning-rate schedule")
    decay_every: int = Field(4000, ge=1, description="schedule = step: multiply lr by decay_factor every k steps")
    decay_factor: float = Field(0.5, gt=0.0, le=1.0, description="schedule = step: factor")
    steps: int = Field(2000, ge=1, description="optimisation steps")
    batch: int = Field(1000, ge=1, description="prompts per step")
    log_every: int = Field(100, ge=1, description="metrics every k steps (one compiled chunk)")
    dtype: Literal["float32", "float64"] = Field("float32", description="floating-point precision")
    threads: int = Field(1, ge=1, le=256, description="CPU threads of the fused kernel (changes summation order)")
    max_loss: float = Field(1e6, gt=0.0, description="a seed whose loss exceeds this (or is NaN) is marked diverged")
    checkpoint_every: float = Field(
        30.0, ge=0.0, description="seconds between checkpoints (params, optimiser state, batch, PRNG key, step) that "
        "`icldyn run --resume` continues from; 0: after every chunk. Metrics are flushed after every chunk")
    oracle: Literal["sampled", "population"] = Field(
        "sampled", description="softmax_regressor / softmax_icl: gradients of the empirical loss on fresh prompts "
        "(sampled), or the exact gradient of the population loss (population: Goel's closed form; Huang's "
        "expectation over feature counts)")
    count_samples: int = Field(
        20_000, ge=100, description="softmax_icl, population: Monte-Carlo count vectors (common random numbers) "
        "when exact enumeration of the multinomial counts would exceed 200 000 vectors")
    regularizer: float = Field(
        0.0, ge=0.0, description="softmax_regressor: weight of the balancing regulariser R̂ added to the loss "
        "(Algorithm 1: 1)")
    precondition: bool = Field(
        False, description="softmax_regressor: multiply the B-gradient by Σ̂⁻¹ of the initial sample, "
        "P̂⁻¹ = blockdiag(I_p, Σ̂⁻¹) (Algorithm 1)")


class RunConfig(_Section):
    """A whole run: an experiment recipe plus its data, model and training settings."""

    experiment: str = Field("quickstart", description="experiment recipe (see `icldyn list`)")
    seeds: int = Field(1, ge=1, le=1024, description="independent seeds, trained in one compiled program")
    seed: int = Field(0, ge=0, description="first seed; seeds are seed, seed+1, …")
    grid: dict[str, list[int | float | str]] = Field(
        default_factory=dict, description="dotted key → values; the run trains every point of the product"
    )
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()

    @model_validator(mode="after")
    def _combination(self) -> RunConfig:
        pairs = {("linear_attention", "prompts"), ("softmax_regressor", "regression"), ("softmax_icl", "features"),
                 ("softmax_icl", "prompts")}
        if (self.model.kind, self.data.kind) not in pairs:
            raise ValueError(f"model.kind = {self.model.kind!r} does not take data.kind = {self.data.kind!r}; "
                             "allowed pairs: " + ", ".join(f"{m} + {d}" for m, d in sorted(pairs)))
        for section, kind, owners in (("data", self.data.kind, DATA_FIELDS), ("model", self.model.kind, MODEL_FIELDS),
                                      ("train", self.model.kind, TRAIN_FIELDS)):
            obj = getattr(self, section)
            for name, info in type(obj).model_fields.items():
                value = getattr(obj, name)
                kinds = [k for k, fields in owners.items() if name in fields]
                if kinds and kind not in kinds and value != info.default:
                    which = "data.kind" if section == "data" else "model.kind"
                    raise ValueError(f"{section}.{name} = {value!r} applies to {which} = "
                                     f"{' or '.join(repr(k) for k in kinds)} only, not {kind!r}; remove it")
        if self.train.oracle != "sampled" and self.data.kind == "prompts":
            raise ValueError("train.oracle = 'population' needs data.kind = 'regression' or 'features' (Gaussian "
                             "prompts have no exact population engine here)")
        if self.data.sampler != "auto" and self.model.kind != "linear_attention":
            raise ValueError(f"data.sampler = {self.data.sampler!r} applies to model.kind = 'linear_attention' only, "
                             f"not {self.model.kind!r}; remove it")
        if self.model.kind == "linear_attention":
            if "kernel" in (self.model.forward, self.data.sampler) and self.data.d + 1 > KERNEL_DMAX:
                raise ValueError(f"the C kernel takes data.d ≤ {KERNEL_DMAX - 1}, got data.d = {self.data.d}; allowed: "
                                 "model.forward and data.sampler = 'auto', or a JAX form")
            if self.data.sampler == "kernel" and self.model.forward == "columns":
                raise ValueError("data.sampler = 'kernel' draws prompts straight into moments, which model.forward = "
                                 "'columns' cannot read; allowed with columns: data.sampler = 'auto' or 'jax'")
        return self

    @field_validator("grid")
    @classmethod
    def _grid_keys(cls, v: dict[str, list]) -> dict[str, list]:
        for key, values in v.items():
            section, _, field = key.partition(".")
            sub = _SECTIONS.get(section)
            if sub is None or field not in sub.model_fields:
                raise ValueError(f"grid key {key!r} is not a data.*, model.* or train.* field")
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
        return v


_SECTIONS: dict[str, type[BaseModel]] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}
KERNEL_DMAX = 16  # the C kernel's largest token dimension D = d + 1 (icldyn.models.kernel.DMAX)

# The fields that belong to one kind only (the rest are shared): set to anything but their default under another
# kind, they would be ignored, so they are refused. Data fields by data.kind; model and train fields by model.kind.
DATA_FIELDS = {
    "prompts": {"w_prior", "test_size", "sampler"},
    "regression": {"p", "m_norm", "m_singular_values"},
    "features": {"features", "feature_basis", "p_dominant", "feature_probs"},
}
for _k in ("prompts", "regression"):
    DATA_FIELDS[_k] |= {"covariance", "eigenvalues", "condition_number", "noise_std"}
MODEL_FIELDS = {
    "linear_attention": {"layers", "parameterization", "heads", "forward", "init_std"},
    "softmax_regressor": {"init", "init_std"},
    "softmax_icl": {"train_value"},
}
TRAIN_FIELDS = {
    "linear_attention": {"threads"},
    "softmax_regressor": {"regularizer", "precondition", "oracle"},
    "softmax_icl": {"count_samples", "oracle"},
}


# ---------------------------------------------------------------- building and errors


def _describe(model: type[BaseModel], field: str) -> str:
    """What a field allows, read off its annotation and constraints."""
    info = model.model_fields[field]
    text = getattr(info.annotation, "__name__", None) or str(info.annotation).replace("typing.", "")
    if "Literal" in text:
        text = "one of " + ", ".join(repr(a) for a in info.annotation.__args__)
    bounds = [f"{op} {getattr(m, attr)}" for m in info.metadata for attr, op in
              (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")) if hasattr(m, attr)]
    return text + (" " + ", ".join(bounds) if bounds else "")


def _one_line(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = [str(p) for p in e["loc"]]
    name = ".".join(loc) if loc else "config"
    section_model: type[BaseModel] = RunConfig
    for part in loc[:-1]:
        section_model = _SECTIONS.get(part, section_model)
    field = loc[-1] if loc else ""
    if e["type"] == "extra_forbidden":
        allowed = ", ".join(section_model.model_fields)
        return f"unknown key {name!r}; allowed keys here: {allowed}"
    got = e.get("input")
    if field in section_model.model_fields and e["type"] not in ("value_error",):
        return f"{name} = {got!r} is not allowed: must be {_describe(section_model, field)} ({e['msg']})"
    msg = e["msg"].removeprefix("Value error, ")
    return msg if not loc or loc[-1] in _SECTIONS else f"{name}: {msg}"  # a section's own check names its fields


def build(raw: dict[str, Any]) -> RunConfig:
    """Validate a nested dict into a RunConfig, raising a one-line ConfigError."""
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_one_line(err)) from None


def parse_value(text: str) -> Any:
    """A `--set` value: TOML syntax (numbers, booleans, lists, quoted strings) or a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``raw[a][b] = value`` for key ``a.b``; ``grid.<dotted key>`` sets one grid axis."""
    if key.startswith("grid."):
        if not isinstance(value, list):
            raise ConfigError(f"bad --set {key}: a grid axis takes a list, e.g. {key}=[1,2]")
        raw.setdefault("grid", {})[key.removeprefix("grid.")] = value
        return
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"bad key {key!r} in --set: expected section.field, e.g. data.n=10")
    node = raw
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"bad key {key!r} in --set: {part!r} is not a section")
    node[parts[-1]] = value


def apply_sets(raw: dict[str, Any], sets: list[str]) -> dict[str, Any]:
    """Apply ``key=value`` overrides to a copy of ``raw``."""
    raw = copy.deepcopy(raw)
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad --set {item!r}: expected key=value, e.g. --set data.n=10")
        set_dotted(raw, key.strip(), parse_value(value.strip()))
    return raw


def load_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path!r} is not valid TOML: {err}") from None


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Recursive dict merge (``over`` wins); ``grid`` is replaced, not merged."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k != "grid":
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def with_overrides(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """A copy of ``cfg`` with dotted-key overrides (one grid point), re-validated."""
    raw = cfg.model_dump()
    for key, value in overrides.items():
        set_dotted(raw, key, value)
    raw["grid"] = {}
    return build(raw)
