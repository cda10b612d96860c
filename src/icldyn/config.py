"""Validated run configuration: frozen pydantic sections, loaded from TOML.

A config file holds only overrides of a recipe's defaults; ``--set key=value`` applies further overrides with
dotted keys (``data.n=10``, ``model.layers=2``). The ``data`` and ``model`` sections are discriminated unions keyed
by ``kind``: each kind is a :class:`DataSection` or :class:`ModelSection` subclass that a paper plug-in declares
(``icldyn.plugins.Paper``), holding the shared fields of its base plus only its own, so a field of another kind is
refused. ``train`` holds the optimiser and loop fields plus the fields a model kind adds
(``ModelSection.train_fields``).
:func:`run_config_class` assembles the whole model from the installed plug-ins. Every field is documented in
``docs/config.md``. Invalid input raises :class:`ConfigError`, one line naming the field and what is allowed.
"""

from __future__ import annotations

import copy
import functools
import math
import tomllib
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Protocol, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)

from icldyn.errors import ConfigError
from icldyn.train.specs import NAMED_OPTIMIZERS, PYTHON_OPTIMIZER, check_optimizer, check_schedule

if TYPE_CHECKING:
    import jax

    from icldyn.components.prompts import Prompts

LIST_RANGE = (1e-6, 1e6)  # PositiveList's values (eigenvalues, singular values, probabilities): within this range
INT64 = 2**63 - 1  # every integer field fits in int64 (JAX, NumPy and Parquet hold steps, seeds, … as int64)


def _positive(v: list[float] | None) -> list[float] | None:
    lo, hi = LIST_RANGE
    if v is not None and (len(v) == 0 or not all(math.isfinite(x) and lo <= x <= hi for x in v)):
        raise ValueError(f"must be a non-empty list of positive, finite floats within [{lo:g}, {hi:g}], got {v}"
                         + (" (null unsets the field)" if not v else ""))
    return v


PositiveList = Annotated[list[float] | None, AfterValidator(_positive)]  # None, or a non-empty list in LIST_RANGE


def _show(v: Any) -> str:
    """A value as TOML spells it (``true``, not ``True``)."""
    return repr(v).replace("True", "true").replace("False", "false")


def _numbers(v: Any):
    """Every number inside a field's value (lists, tuples and dict values walked)."""
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _numbers(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _numbers(x)
    elif isinstance(v, (int, float)):
        yield v


def mode_of(value: Any) -> str:
    """The mode a mode field's value selects (:attr:`Section.depends`): a name as it is, a table ``{name = …, …}``
    ``"table"``, anything else (a Python object) ``"object"``."""
    return value if isinstance(value, str) else "table" if isinstance(value, dict) else "object"


def _applies(value: Any, allowed: tuple[str, ...]) -> bool:
    mode = mode_of(value)
    return mode in allowed or ("*" in allowed and mode != "object")


def _modes_text(allowed: tuple[str, ...]) -> str:
    if "*" in allowed:
        return "a name or a table"
    shown = [repr(a) for a in allowed]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


class Section(BaseModel):
    """Base of every config section: unknown keys refused, frozen, defaults validated.

    ``depends``: field → (the mode field it belongs to, the modes it applies to; ``"*"``: any name or table): a field
    of one mode of another field (``data.eigenvalues`` of ``data.covariance = 'eigenvalues'``) is refused at a
    value other than its default under any other mode (:meth:`RunConfig._combination`; unless the mode field is a
    grid axis: then each point is checked), and :func:`merge` drops it when an override changes the mode."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    depends: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {}

    @model_validator(mode="before")
    @classmethod
    def _strict_bools(cls, data: Any) -> Any:
        """No coercion between booleans and numbers: ``true`` is not 1 step, 1 is not ``true``."""
        if not isinstance(data, dict):
            return data
        prefix = _prefix(cls)
        for field, v in data.items():
            info = cls.model_fields.get(field)
            ann = str(info.annotation) if info is not None else ""
            if ann == str(bool) and not isinstance(v, bool):
                raise ValueError(f"{prefix}{field} = {_show(v)} is not allowed: must be true or false")
            numeric = ("int" in ann or "float" in ann) and "bool" not in ann and "str" not in ann
            if numeric and any(isinstance(x, bool) for x in _numbers(v)):
                raise ValueError(f"{prefix}{field} = {_show(v)} is not allowed: must be a number, not true/false")
        return data

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        """Every float finite (NaN, ±inf and TOML's 1e400 refused) and every integer within int64."""
        for x in _numbers(v):
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"{x} is not allowed: must be a finite number")
            if isinstance(x, int) and not -INT64 - 1 <= x <= INT64:
                raise ValueError(f"{x} is not allowed: must be within ±(2⁶³ − 1) (a 64-bit integer)")
        return v


def _prefix(cls: type) -> str:
    """``data.``, ``model.`` or ``train.`` for a section class (its keys' prefix)."""
    return next((f"{name}." for name, base in (("data", DataSection), ("model", ModelSection),
                                               ("train", TrainConfig)) if issubclass(cls, base)), "")


class DataSection(Section):
    """A data law. A plug-in subclasses it with ``kind: Literal["its-name"] = "its-name"`` and its own fields."""

    kind: str = Field(description="the data law (see the kinds below)")
    d: int = Field(5, ge=1, le=256, description="covariate dimension d")
    n: int = Field(20, ge=1, le=100_000, description="context examples per prompt n")
    resample_every: int = Field(1, ge=1, description="draw a fresh training batch every k steps (official code: 100)")

    def held_out_bytes(self, cfg: RunConfig) -> int:
        """Bytes a recipe draws before training, from the config alone (an estimate): every seed's fixed held-out
        and validation prompts, ``data.test_size`` each, of n + 1 points with d covariates and a label, in
        ``train.dtype``. A data law with other sets before training overrides it."""
        item = 8 if cfg.train.dtype == "float64" else 4
        return 2 * cfg.seeds * (getattr(self, "test_size", 0) or 0) * (self.n + 1) * (self.d + 1) * item


class ModelSection(Section):
    """A model. A plug-in subclasses it with ``kind: Literal["its-name"] = "its-name"`` and its own fields, names the
    data kinds it reads (``data_kinds``) and the ``train.*`` fields it adds (``train_fields``, a Section whose
    fields are refused under any other model kind), and may check a whole config (:meth:`check`) and describe
    what runs it on this machine (:meth:`execution`)."""

    kind: str = Field(description="the model (see the kinds below)")
    data_kinds: ClassVar[tuple[str, ...]] = ()
    train_fields: ClassVar[type[Section] | None] = None

    def check(self, cfg: RunConfig) -> None:
        """Cross-section checks of a whole config; raise ValueError with one line naming the fields."""

    def execution(self, cfg: RunConfig) -> dict[str, Any]:
        """What runs ``cfg`` on this machine (summary.json's ``execution``; a ``note`` key is printed in the
        report). Raise ConfigError where an explicit setting cannot be honoured here."""
        return {}

    def predictor(self, cfg: RunConfig) -> Predict | None:
        """The trained model as a function of prompts (:class:`Predict`), for evaluations that read a run's
        parameters (``icldyn eval``'s shifted prompts, agreement with algorithms); None: this model has none."""
        return None

    def prefix_predictor(self, cfg: RunConfig) -> PrefixPredict | None:
        """A causal model's predictions at every point of a prompt (:class:`PrefixPredict`), each reading only the
        points up to it: a prompt of k context examples may then be padded after its query, so that evaluations at
        every k run one compiled shape; None: the model is not causal (or has no predictor)."""
        return None

    def longest_prompt(self, cfg: RunConfig) -> int | None:
        """The most points (context and query) a prompt given to :meth:`predictor` may hold (a GPT's learned
        positions end at the trained length); None: any length."""
        return None


class Predict(Protocol):
    """``predict(params, prompts) -> ŷ``: the model's prediction at each prompt's query. ``params``: the model's
    parameters (a run's ``params.npz`` entries of one seed, name → array, nested where a name holds ``/``);
    ``prompts``: an :class:`icldyn.components.prompts.Prompts` (X (b, k+1, d), y (b, k+1), the query last, its label
    unread) of any context length k ≥ 1; ŷ: (b,), the shape of ``prompts.y[:, -1]``. Pure and jit-able."""

    def __call__(self, params: dict[str, jax.Array], prompts: Prompts) -> jax.Array: ...


class PrefixPredict(Protocol):
    """``predict(params, prompts) -> Ŷ``: a causal model's prediction at every point i of each prompt, Ŷ (b, k+1),
    Ŷ[:, i] reading points 0 … i and labels 0 … i − 1 alone (so Ŷ[:, -1] is :class:`Predict`'s ŷ). Pure and
    jit-able."""

    def __call__(self, params: dict[str, jax.Array], prompts: Prompts) -> jax.Array: ...


def _spec(v: Any) -> Any:
    """An optax spec as given (``"lion"``, ``{name = "lion", b1 = 0.9}``): a table of only its name is the name."""
    if isinstance(v, dict):
        if not isinstance(v.get("name"), str):
            raise ValueError(f"{_show(v)} is not allowed: a table needs name = \"<optax function>\", e.g. "
                             "{name = \"lion\", b1 = 0.9}")
        v = {"name": v["name"], **{k: x for k, x in v.items() if k != "name"}}
        return v["name"] if len(v) == 1 else v
    return v


class TrainConfig(Section):
    """Optimiser (optax) and loop settings shared by every model."""

    optimizer: Any = Field(
        "adam", description="the optimiser: adam, adamw, sgd (without momentum: plain gradient descent) or lbfgs "
        "(L-BFGS directions at a fixed step lr, no line search, as torch.optim.LBFGS without line_search_fn), reading "
        "train.b1, b2, weight_decay, momentum, lbfgs_memory; or any optax optimiser by name, with its keyword "
        "arguments in a table (`{name = \"lion\", b1 = 0.95}`, optax's defaults for the rest; `contrib.NAME`: "
        "optax.contrib); from Python also an optax.GradientTransformation (its own rate and schedule; train.lr, "
        "default 1, and train.schedule then multiply its updates)",
        json_schema_extra={"allowed": "a name or {name = …, keyword = value, …}"})
    lr: float = Field(0.01, gt=0.0, description="peak learning rate (multiplies the optimiser's update)")
    b1: float = Field(0.9, ge=0.0, lt=1.0, description="optimizer = adam, adamw: β₁ (official code: 0.99)")
    b2: float = Field(0.999, ge=0.0, lt=1.0, description="optimizer = adam, adamw: β₂ (official code: 0.9)")
    weight_decay: float = Field(0.0, ge=0.0, description="optimizer = adamw: decoupled weight decay")
    momentum: float = Field(0.0, ge=0.0, lt=1.0, description="optimizer = sgd: momentum")
    lbfgs_memory: int = Field(10, ge=1, le=10_000, description="optimizer = lbfgs: the (s, y) pairs kept")
    clip: float = Field(0.0, ge=0.0, description="gradient clipping threshold; 0 disables")
    clip_mode: Literal["global", "per_matrix"] = Field(
        "global", description="global norm, or each parameter block separately (official code)"
    )
    schedule: Any = Field(
        "constant", description="learning-rate schedule, a factor on train.lr: constant; step (× decay_factor every "
        "decay_every steps); cosine (from 1 to 0 over train.steps); or any optax schedule by name with its keyword "
        "arguments in a table (`{name = \"warmup_cosine_decay_schedule\", warmup_steps = 200}`; values are factors "
        "of train.lr: peak_value = 1, init_value = 0 beside a peak_value (else 1), value = 1, and decay_steps / "
        "transition_steps = train.steps unless given)",
        json_schema_extra={"allowed": "a name or {name = …, keyword = value, …}"})
    decay_every: int = Field(4000, ge=1, description="schedule = step: multiply lr by decay_factor every k steps")
    decay_factor: float = Field(0.5, gt=0.0, le=1.0, description="schedule = step: factor")
    steps: int = Field(2000, ge=1, description="optimisation steps")
    batch: int = Field(1000, ge=1, description="prompts per step")
    log_every: int = Field(100, ge=1, description="metrics every k steps (one compiled chunk)")
    dtype: Literal["float32", "float64"] = Field("float32", description="floating-point precision")
    max_loss: float = Field(1e6, gt=0.0, description="a seed whose training loss exceeds this for train.diverge_after "
                            "logs in a row (or is NaN at once) is marked diverged; a held-out loss above it is a spike, "
                            "recorded only")
    diverge_after: int = Field(3, ge=1, description="consecutive logs above train.max_loss that mark a seed diverged")
    devices: Literal["all"] | int = Field(
        "all", description="local devices the seeds × learning-rates axis is split over (jax.sharding): \"all\" or "
        "a count; the seeds are padded (with copies of the last, discarded) to a multiple of it",
        json_schema_extra={"allowed": '"all" or an integer ≥ 1'})
    checkpoint_every: float = Field(
        30.0, ge=0.0, description="seconds between checkpoints (params, optimiser state, batch, PRNG key, step) that "
        "`icldyn run --resume` continues from; 0: after every chunk")
    flush_every: float = Field(1.0, ge=0.0, description="seconds between writes of the logged metric rows to "
                               "metrics.parts/ (each an fsynced file); 0: after every chunk. Ctrl-C and errors "
                               "write the pending rows at once")

    # the plain names' fields: each is read by one or two of them (b1, b2: adam, adamw; …) and inert under the others
    # (a recipe may set both Adam's and SGD's for a grid over train.optimizer); an optax optimiser by name or table,
    # or an object, reads none of them
    depends: ClassVar[dict[str, tuple[str, tuple[str, ...]]]] = {
        **{f: ("optimizer", NAMED_OPTIMIZERS) for f in ("b1", "b2", "weight_decay", "momentum", "lbfgs_memory")},
        "decay_every": ("schedule", ("step",)), "decay_factor": ("schedule", ("step",))}

    @model_validator(mode="before")
    @classmethod
    def _unit_rate(cls, data: Any) -> Any:
        """An optax object carries its own rate: train.lr is then a factor on its updates, default 1."""
        if isinstance(data, dict) and not isinstance(data.get("optimizer", "adam"), (str, dict)) and "lr" not in data:
            return {**data, "lr": 1.0}
        return data

    @field_validator("optimizer", "schedule", mode="before")
    @classmethod
    def _tables(cls, v: Any) -> Any:
        return _spec(v)

    @field_validator("optimizer", "schedule", mode="after")
    @classmethod
    def _kinds(cls, v: Any, info) -> Any:
        if info.field_name == "schedule" and mode_of(v) == "object":
            raise ValueError(f"{v!r} is not allowed: must be a schedule's name or a table {{name = …, …}}")
        return v

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, v: Any) -> Any:
        if v == "all" or (isinstance(v, int) and not isinstance(v, bool) and v >= 1):
            return v
        raise ValueError(f"{v!r} is not allowed: must be \"all\" or an integer ≥ 1")

    @model_validator(mode="after")
    def _optax(self) -> TrainConfig:
        """Names and keyword arguments checked against optax's signatures (:mod:`icldyn.train.optimizers`)."""
        check_optimizer(self.optimizer)
        check_schedule(self.schedule, self.steps)
        return self

    @field_serializer("optimizer")
    def _record(self, v: Any) -> Any:
        return PYTHON_OPTIMIZER if mode_of(v) == "object" else v


class RunConfig(Section):
    """A whole run: a recipe plus its data, model and training settings (the installed plug-ins' kinds:
    :func:`run_config_class`)."""

    experiment: str = Field(description="experiment recipe (see `icldyn list`)")
    seeds: int = Field(1, ge=1, le=1024, description="independent seeds, trained in one compiled program")
    seed: int = Field(0, ge=0, description="first seed; seeds are seed, seed+1, …")
    grid: dict[str, list[int | float | str]] = Field(
        default_factory=dict, description="dotted key → values; the run trains every point of the product"
    )
    data: DataSection
    model: ModelSection
    train: TrainConfig = TrainConfig()

    @model_validator(mode="after")
    def _combination(self) -> RunConfig:
        if self.data.kind not in type(self.model).data_kinds:
            pairs = [f"{m} + {d}" for m, cls in kinds("model").items() for d in cls.data_kinds]
            raise ValueError(f"model.kind = {self.model.kind!r} does not take data.kind = {self.data.kind!r}; "
                             "allowed pairs: " + ", ".join(sorted(pairs)))
        for section in SECTIONS:
            obj = getattr(self, section)
            for field, (mode, allowed) in obj.depends.items():
                value, given = getattr(obj, field), getattr(obj, mode)
                if (value != type(obj).model_fields[field].default and not _applies(given, allowed)
                        and f"{section}.{mode}" not in self.grid):
                    shown = repr(given) if isinstance(given, str) else "a table" if isinstance(given, dict) else \
                        "a Python object"
                    hint = "remove it"
                    if mode == "optimizer" and mode_of(given) != "object":
                        name = given if isinstance(given, str) else given["name"]
                        hint = f'give it in the table: train.optimizer = {{name = "{name}", {field} = {value!r}}}'
                    raise ValueError(f"{section}.{field} applies to {section}.{mode} = {_modes_text(allowed)} only, "
                                     f"not {shown}; {hint}")
        for name, owners in train_owners().items():
            value, default = getattr(self.train, name), type(self.train).model_fields[name].default
            if self.model.kind not in owners and value != default:
                raise ValueError(f"train.{name} = {value!r} applies to model.kind = "
                                 f"{' or '.join(repr(k) for k in owners)} only, not {self.model.kind!r}; remove it")
        for key, values in self.grid.items():
            section, _, field = key.partition(".")
            obj = getattr(self, section, None) if section in SECTIONS else None
            if obj is None or field not in type(obj).model_fields:
                where = f" of {section}.kind = {obj.kind!r}" if section in ("data", "model") else ""
                raise ValueError(f"grid key {key!r} is not a field{where}; allowed: data.*, model.* and train.* "
                                 "fields of the run's kinds")
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
        self.model.check(self)
        return self


SECTIONS = ("data", "model", "train")


@functools.cache
def kinds(section: str) -> dict[str, type[Section]]:
    """kind → its section class, over the installed plug-ins (``section``: data or model). Papers may declare the
    same component class; another class under a kind already taken is skipped with one line on stderr."""
    import sys

    from icldyn.plugins import papers

    out: dict[str, type[Section]] = {}
    for paper in papers().values():
        for cls in (paper.data if section == "data" else paper.models):
            kind = kind_of(cls)
            if out.setdefault(kind, cls) is not cls:
                print(f"icldyn: plug-in {paper.name!r} declares {section}.kind = {kind!r} with another class "
                      f"({cls.__module__}.{cls.__name__}) than {out[kind].__module__}.{out[kind].__name__}; skipped",
                      file=sys.stderr)
    return out


def kind_of(cls: type[Section]) -> str:
    return cls.model_fields["kind"].default


@functools.cache
def train_owners() -> dict[str, tuple[str, ...]]:
    """train.* field → the model kinds that declare it (the fields a model adds through ``train_fields``)."""
    out: dict[str, tuple[str, ...]] = {}
    for kind, cls in kinds("model").items():
        for name in (cls.train_fields.model_fields if cls.train_fields else {}):
            out[name] = out.get(name, ()) + (kind,)
    return out


@functools.cache
def run_config_class() -> type[RunConfig]:
    """RunConfig over the installed plug-ins: ``data`` and ``model`` discriminated by ``kind``, ``train`` with every
    model's added fields (a field two models add must agree in type and default)."""
    fields: dict[str, Any] = {}
    for cls in kinds("model").values():
        for name, info in (cls.train_fields.model_fields if cls.train_fields else {}).items():
            if name in TrainConfig.model_fields:
                raise TypeError(f"{cls.__name__}.train_fields redefines the shared train.{name}")
            if name in fields and (fields[name][0] != info.annotation or fields[name][1].default != info.default):
                raise TypeError(f"train.{name} is declared twice with different types or defaults ({cls.__name__})")
            fields.setdefault(name, (info.annotation, info))
    train = create_model("TrainConfig", __base__=TrainConfig, **fields)

    def union(section: str):
        classes = tuple(kinds(section).values())
        if not classes:
            raise ConfigError(f"no {section} kinds are installed: no icldyn.papers plug-in loaded")
        return Annotated[Union[classes], Field(discriminator="kind")] if len(classes) > 1 else classes[0]

    return create_model("RunConfig", __base__=RunConfig, data=(union("data"), ...), model=(union("model"), ...),
                        train=(train, train()))


def section_class(section: str, kind: str | None = None) -> type[BaseModel]:
    """The class of one section (``data``/``model`` of one kind, or ``train``)."""
    if section == "train":
        return run_config_class().model_fields["train"].annotation
    return kinds(section)[kind]


def known_field(section: str, field: str) -> bool:
    """Whether ``section.field`` is a field of any installed kind."""
    if section == "train":
        return field in section_class("train").model_fields
    return section in SECTIONS and any(field in cls.model_fields for cls in kinds(section).values())


# ---------------------------------------------------------------- building and errors


def _describe(model: type[BaseModel], field: str) -> str:
    """What a field allows, read off its annotation and constraints."""
    info = model.model_fields[field]
    if isinstance(info.json_schema_extra, dict) and "allowed" in info.json_schema_extra:
        return str(info.json_schema_extra["allowed"])
    text = getattr(info.annotation, "__name__", None) or str(info.annotation).replace("typing.", "")
    if "Literal" in text:
        text = "one of " + ", ".join(repr(a) for a in info.annotation.__args__)
    bounds = [f"{op} {getattr(m, attr)}" for m in info.metadata for attr, op in
              (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")) if hasattr(m, attr)]
    return text + (" " + ", ".join(bounds) if bounds else "")


def _one_line(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = [str(p) for p in e["loc"]]
    section, kind = (loc[0], loc[1]) if len(loc) > 1 and loc[0] in ("data", "model") and loc[1] in kinds(loc[0]) \
        else (loc[0] if loc and loc[0] in SECTIONS else None, None)
    if kind is not None:
        loc = [loc[0], *loc[2:]]  # the union's tag is not part of the key
    name = ".".join(loc) if loc else "config"
    field = loc[-1] if loc else ""
    if e["type"] in ("union_tag_invalid", "union_tag_not_found"):
        allowed = ", ".join(repr(k) for k in kinds(section))
        got = e.get("ctx", {}).get("tag")
        return (f"{section}.kind = {got!r} is not allowed: must be one of {allowed}" if got is not None else
                f"{section}.kind is missing: must be one of {allowed}")
    cls: type[BaseModel] = run_config_class()
    if section is not None and len(loc) > 1:
        cls = section_class(section, kind) if section == "train" or kind is not None else cls
    if e["type"] == "extra_forbidden":
        if kind is not None:
            owners = [k for k, c in kinds(section).items() if field in c.model_fields]
            if owners:
                return (f"{name} applies to {section}.kind = {' or '.join(repr(k) for k in owners)} only, not "
                        f"{kind!r}; remove it")
            return f"unknown key {name!r} for {section}.kind = {kind!r}; allowed keys here: " + ", ".join(
                cls.model_fields)
        return f"unknown key {name!r}; allowed keys here: {', '.join(cls.model_fields)}"
    got = e.get("input")
    if e["type"] == "missing":
        return f"{name} is missing" + (f": must be {_describe(cls, field)}" if field in cls.model_fields else "")
    if field in cls.model_fields and e["type"] not in ("value_error",):
        return f"{name} = {got!r} is not allowed: must be {_describe(cls, field)} ({e['msg']})"
    msg = e["msg"].removeprefix("Value error, ")
    return msg if not loc or loc[-1] in SECTIONS else f"{name}: {msg}"  # a section's own check names its fields


def build(raw: dict[str, Any]) -> RunConfig:
    """Validate a nested dict into a RunConfig, raising a one-line ConfigError."""
    try:
        return run_config_class().model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_one_line(err)) from None


MAX_DEPTH = 32  # nesting of tables and arrays a config may have (tomllib itself recurses without a bound)


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    if isinstance(v, list):
        return 1 + max(map(_depth, v), default=0)
    return 0


def _loads(text: str, what: str) -> dict[str, Any]:
    """``tomllib.loads``, refusing text nested more than MAX_DEPTH levels (the parser recurses per level)."""
    try:
        out = tomllib.loads(text)
        deep = _depth(out) > MAX_DEPTH
    except RecursionError:
        deep = True
    if deep:
        raise ConfigError(f"{what} is nested more than {MAX_DEPTH} levels deep")
    return out


UNSET = ("null", "none")  # a bare `--set key=null` (or none) unsets the key: the field takes its default


def parse_value(text: str) -> Any:
    """A `--set` value: TOML syntax (numbers, booleans, lists, quoted strings, inline tables) or a bare string;
    a bare ``null`` or ``none`` is None (unset)."""
    if text.strip().lower() in UNSET:
        return None
    try:
        return _loads(f"v = {text}", f"--set value {text[:40]!r}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``raw[a][b] = value`` for key ``a.b``; ``grid.<dotted key>`` sets one grid axis (a recipe's other axes
    stay; ``[]`` or None drops the axis). None unsets the key (:func:`merge` removes it from what it overrides)."""
    if key.startswith("grid."):
        if value is None:
            value = []
        if not isinstance(value, list):
            raise ConfigError(f"bad --set {key}: a grid axis takes a list, e.g. {key}=[1,2]")
        raw.setdefault("grid", {})[key.removeprefix("grid.")] = value
        return
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"bad key {key!r} in --set: expected section.field, e.g. data.n=10")
    node = raw
    for part in parts[:-1]:
        if isinstance(node.get(part), str) and part in SPECS:  # train.optimizer.b1 on a name: amend its table
            node[part] = {"name": node[part]}
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
    """A TOML file as a dict; a missing, unreadable, non-UTF-8, malformed or too deeply nested file is one line."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except OSError as err:
        raise ConfigError(f"config file {path!r} cannot be read: {err.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {path!r} is not UTF-8 text (byte {data[err.start]:#04x} at offset "
                          f"{err.start})") from None
    try:
        return _loads(text, f"config file {path!r}")
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path!r} is not valid TOML: {err}") from None


SPECS = ("optimizer", "schedule")  # train fields that take an optax name or table


def _copy(v: Any) -> Any:
    """A copy of a raw config's tables and lists; values (an optax object too) as they are."""
    return {k: _copy(x) for k, x in v.items()} if isinstance(v, dict) else [_copy(x) for x in v] \
        if isinstance(v, list) else v


def _merge(base: dict[str, Any], over: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    out = _copy(base)
    for k, v in over.items():
        spec = depth == 1 and k in SPECS
        if v is None:  # unset: the field takes its default
            out.pop(k, None)
        elif spec and isinstance(v, dict) and isinstance(out.get(k), str) and "name" not in v:
            out[k] = {"name": out[k], **_copy(v)}  # an optax table without its name amends the name given
        elif isinstance(v, dict) and isinstance(out.get(k), dict) and k != "grid" and not (spec and "name" in v):
            out[k] = _merge(out[k], v, depth + 1)
        else:
            out[k] = _copy(v)
    return out


def section_of(section: str, values: dict[str, Any]) -> type[Section] | None:
    """The class of a raw section (``data``/``model`` by its kind; None for an unknown kind)."""
    if section == "train":
        return section_class("train")
    return kinds(section).get(values.get("kind"))


def _drop_stale(base: dict[str, Any], over: dict[str, Any], out: dict[str, Any]) -> None:
    """Where ``over`` changes a kind or a mode field, remove from ``out`` the fields that came from ``base`` and
    belong to the old kind or mode only (a kind's own fields, :attr:`Section.depends`, a model kind's ``train.*``
    fields; an optax object as train.optimizer also drops the base's rate and schedule)."""
    for section in SECTIONS:
        b, o, m = (x.get(section) for x in (base, over, out))
        if not (isinstance(b, dict) and isinstance(o, dict) and isinstance(m, dict)):
            continue
        cls = section_of(section, m)
        if cls is None:
            continue
        if section != "train" and b.get("kind") not in (None, m.get("kind")):
            for f in [f for f in m if f not in o and f not in cls.model_fields]:
                del m[f]
            train_b, train_o = out.get("train"), over.get("train") or {}
            if section == "model" and isinstance(train_b, dict):
                for f, owners in train_owners().items():
                    if f in train_b and f not in train_o and m["kind"] not in owners:
                        del train_b[f]
        for f, (mode, allowed) in cls.depends.items():
            if mode in o and f in m and f not in o and not _applies(m.get(mode, cls.model_fields[mode].default),
                                                                    allowed):
                del m[f]
        if section == "train" and "optimizer" in o and mode_of(o["optimizer"]) == "object":
            for f in ("lr", "schedule", "decay_every", "decay_factor"):
                if f not in o:
                    m.pop(f, None)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Recursive merge of two raw configs (``over`` wins; ``grid`` is replaced, not merged). A None in ``over``
    unsets the key; an optax table with a ``name`` replaces the one it overrides, one without amends it. Changing a
    kind or a mode field drops the fields of the old one (:func:`_drop_stale`)."""
    out = _merge(base, over)
    _drop_stale(base, over, out)
    return out


def with_overrides(cfg: RunConfig, overrides: dict[str, Any]) -> RunConfig:
    """A copy of ``cfg`` with dotted-key overrides (one grid point), re-validated; a point that changes a kind or a
    mode field drops the fields of the old one, as :func:`merge`."""
    raw = cfg.model_dump()
    if mode_of(cfg.train.optimizer) == "object":
        raw["train"]["optimizer"] = cfg.train.optimizer  # the object itself, not its record in config.toml
    over: dict[str, Any] = {}
    for key, value in overrides.items():
        set_dotted(over, key, value)
    over.pop("grid", None)
    raw = merge(raw, over)
    raw["grid"] = {}
    return build(raw)
