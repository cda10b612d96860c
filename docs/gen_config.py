"""Regenerate docs/config.md from the pydantic models: python docs/gen_config.py"""

from icldyn.config import (
    PYTHON_OPTIMIZER,
    DataSection,
    ModelSection,
    RunConfig,
    TrainConfig,
    _describe,
    kinds,
    section_class,
    train_owners,
)
from icldyn.plugins import papers


def cell(x) -> str:
    return str(x).replace("|", "\\|")  # a bare | would end the table cell


lines = ["# Configuration reference", "",
 "A run is configured by an experiment recipe's defaults, an optional TOML file holding only overrides, and",
 "`--set key=value` overrides (TOML syntax for the value: `--set data.eigenvalues=[1,0.5,0.25,0.1,0.05]`;",
 "bare words are strings: `--set model.parameterization=sparse`). `--quick` applies the recipe's small size.",
 "Unknown keys and invalid values are refused with one line naming the field and what is allowed (exit code 2).",
 "The resolved config, every default filled in, is written to each run's `config.toml`.", "",
 "Example `my.toml`:", "", "```toml", 'experiment = "ahn-loss-vs-layers"', "seeds = 2", "", "[grid]",
 '"model.layers" = [1, 2]', "", "[train]", "steps = 3000", "```", "",
 "## Asking your own question", "",
 "**Changing a kind or a mode drops its fields.** An override that changes `data.kind`, `model.kind` or a mode field",
 "(`data.covariance`, `data.w_prior`, `data.w_law`, `train.optimizer`, `train.schedule`) drops the recipe's fields of",
 "the old one: `icldyn run quickstart --set data.covariance=identity` forgets quickstart's `data.eigenvalues`, and",
 "`--set train.optimizer=lion` its Adam β₂. The same holds for a grid point. A field given for a mode it does not",
 "apply to is refused in one line. **`null` unsets:** `--set data.eigenvalues=null` (or `none`; `None` from Python)",
 "removes the key, so the field takes its default; `--set grid.model.layers=null` drops the axis.", "",
 "**Any optax optimiser or schedule.** By name, with optax's defaults, or as a table of its keyword arguments",
 "(checked against optax's signature; one line names a wrong or missing argument and lists the allowed ones):", "",
 "```toml", "[train]", 'optimizer = {name = "lion", b1 = 0.95}            # or "lion", "rmsprop", "contrib.muon", …',
 "lr = 3e-4                                        # the peak rate: one program per lr grid, vmapped",
 'schedule = {name = "warmup_cosine_decay_schedule", warmup_steps = 200}   # a factor on lr: peak 1, end at',
 "                                                                          # train.steps unless decay_steps is given",
 "```", "",
 "On the command line: `--set 'train.optimizer={name=\"lion\"}'`, `--set train.optimizer.b1=0.95` (amends the",
 "current optimiser's table), `--set 'train.schedule={name=\"warmup_cosine_decay_schedule\", warmup_steps=200}'`.",
 "The plain names `adam`, `adamw`, `sgd`, `lbfgs` and `constant`, `step`, `cosine` keep reading `train.b1`, `b2`,",
 "`weight_decay`, `momentum`, `lbfgs_memory`, `decay_every`, `decay_factor`; a table reads only its own arguments.",
 "From Python, an `optax.GradientTransformation` is used as given, with its own rate and schedule:",
 '`icldyn.run("quickstart", overrides={"train.optimizer": optax.lion(1e-3)})`; `train.lr` (default 1 then) and',
 "`train.schedule` still multiply its updates, so a learning-rate grid is a grid of factors. The run's `config.toml`",
 f"records it as `{PYTHON_OPTIMIZER!r}`: `icldyn show` reads it, but only Python can train it again.", "",
 "**Σ and the task prior.** Eigenvalues with or without the seeded rotation, or Σ itself (inline or a `.npy` file,",
 "read at validation and held inline in `config.toml`; checked symmetric positive definite); the task covariance",
 "Ω_w likewise, and w's law (Gaussian, Laplace, k-sparse; Ω_w = E[wwᵀ] either way):", "",
 "```toml", "[data]", 'covariance = "eigenvalues"', "eigenvalues = [2.0, 1.0, 0.5, 0.25, 0.1]",
 "rotate = false                     # Σ = diag(λ), axis-aligned", "```", "",
 "```toml", "[data]", 'covariance = "matrix"', 'covariance_matrix = "sigma.npy"   # or [[2.0, 0.3], [0.3, 1.0]] with d = 2',
 'w_prior = "matrix"', "w_covariance = [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0],",
 "                [0.0, 0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.5]]",
 'w_law = "sparse"                   # or "laplace"', "w_sparsity = 2", "seed = 100                         # the data's seeds: "
 "100, 101, …; the initial parameters' stay seed, seed+1, …", "```", "",
 "A recipe's theory holds such a run to its closed form where it applies (Theorem 1's optimum for the given Σ and",
 "Ω_w) and its `report.md` lists what lies outside the paper's assumptions (a non-Gaussian w, say).", ""]
def table(title: str, section: str, cls, fields, intro: str = "") -> None:
    global lines
    lines += [title, ""] + ([intro, ""] if intro else []) + ["| key | allowed | default | meaning |",
                                                             "|---|---|---|---|"]
    for field in fields:
        info = cls.model_fields[field]
        default = info.default if info.default_factory is None else info.default_factory()
        key = f"{section + '.' if section else ''}{field}"
        shown = "required" if info.is_required() else f"`{cell(repr(default))}`"
        lines.append(f"| `{key}` | {cell(_describe(cls, field))} | {shown} | {cell(info.description)} |")
    lines.append("")


users: dict[str, list[str]] = {}
for name, p in papers().items():
    for cls in (*p.data, *p.models):
        users.setdefault(cls.model_fields["kind"].default, []).append(name)
owner = {kind: f"{'/'.join(users[kind])}; `{cls.__module__}`"
         for s in ("data", "model") for kind, cls in kinds(s).items()}
table("## top level", "", RunConfig, [f for f in RunConfig.model_fields if f not in ("data", "model", "train")])
for section, base in (("data", DataSection), ("model", ModelSection)):
    table(f"## [{section}]", section, base, [f for f in base.model_fields if f != "kind"],
          f"`{section}.kind` selects one of the kinds below (installed plug-ins: "
          + ", ".join(f"`{k}` ({owner[k]})" for k in kinds(section)) + "); the fields here are shared by every kind. "
          "A field of another kind is refused in one line (exit 2).")
    for kind, cls in kinds(section).items():
        own = [f for f in cls.model_fields if f not in base.model_fields]
        extra = f" Reads data.kind = {', '.join(repr(k) for k in cls.data_kinds)}." if section == "model" else ""
        table(f"### {section}.kind = `{kind}` ({owner[kind]})", section, cls, own, (cls.__doc__ or "").strip() + extra)
train = section_class("train")
table("## [train]", "train", train, list(TrainConfig.model_fields), "Shared by every model.")
table("### train fields a model kind adds", "train", train, list(train_owners()),
      "Refused (one line, exit 2) under any other model kind unless it keeps its default: "
      + "; ".join(f"`train.{f}`: {' or '.join(k)}" for f, k in train_owners().items()) + ".")
lines += ["Other combinations refused before any work: `model.kind` and `data.kind` that do not pair; "
          "`data.p < data.d` (regression); `data.features > data.d`; `data.eigenvalues` whose length is not `data.d`; "
          "`data.feature_probs` not summing to 1 or not of length `data.features`; `data.m_singular_values` not of "
          "length min(p, d); `data.eigenvalues` without `covariance = 'eigenvalues'`, `data.condition_number` without "
          "`covariance = 'condition'` (every field of one mode of another field, likewise); a "
          "`covariance_matrix` or `w_covariance` that is not d×d symmetric positive definite; `model.forward = "
          "'moments'` with a nonlinear `model.activation`; "
          "the C kernel with "
          "d > 15; and, on a machine where the C kernel cannot be built (or a backend other than the CPU), an "
          "explicit `model.forward = 'kernel'` or `data.sampler = 'kernel'`. A setting that is valid but outside a paper's assumptions (Huang et al.'s "
          "N ≫ K³, Goel et al.'s ‖MΣ^½‖ < 1/16, …) runs, and its `summary.json` (`assumptions_not_met`) and "
          "`report.md` say which assumption is not met.", "",
          "## Environment", "",
          "| variable | effect |", "|---|---|",
          "| `CC` | the C compiler for the kernel (default `cc`, else `gcc`) |",
          "| `ICLDYN_NO_KERNEL=1` | never build or load the C kernel: the pure-JAX path (the same numbers, slower) |",
          "| `ICLDYN_KERNEL_CACHE` | folder of the kernel's libraries and build logs (default "
          "`$XDG_CACHE_HOME/icldyn/kernels`) |",
          "| `ICLDYN_JAX_CACHE` | JAX's persistent compilation cache (default `$XDG_CACHE_HOME/icldyn/jax`) |",
          "| `XDG_CACHE_HOME` | root of both caches (default `~/.cache`) |", "",
          "`icldyn doctor` prints what is in force: versions, the JAX backend and devices, the kernel's status and "
          "why, the cache folders and threads.", ""]
if __name__ == "__main__":
    open("docs/config.md", "w").write("\n".join(lines))
