"""Regenerate docs/config.md from the pydantic models: python docs/gen_config.py"""

from icldyn.config import (
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
 '"model.layers" = [1, 2]', "", "[train]", "steps = 3000", "```", ""]
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
          "`covariance = 'condition'`; `model.forward = 'moments'` with a nonlinear `model.activation`; "
          "the C kernel with "
          "d > 15; and, on a machine where the C kernel cannot be built, an explicit `model.forward = 'kernel'` or "
          "`data.sampler = 'kernel'`. A setting that is valid but outside a paper's assumptions (Huang et al.'s "
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
