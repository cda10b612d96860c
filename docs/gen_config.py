"""Regenerate docs/config.md from the pydantic models: python docs/gen_config.py"""

from icldyn.config import DATA_FIELDS, MODEL_FIELDS, TRAIN_FIELDS, RunConfig, _SECTIONS, _describe


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
for name, section in {"": RunConfig, **_SECTIONS}.items():
    lines += [f"## {'top level' if not name else '[' + name + ']'}", "",
              "| key | allowed | default | meaning |", "|---|---|---|---|"]
    for field, info in section.model_fields.items():
        if field in _SECTIONS:
            continue
        default = info.default if info.default_factory is None else info.default_factory()
        key = f"{name + '.' if name else ''}{field}"
        lines.append(f"| `{key}` | {cell(_describe(section, field))} | `{cell(repr(default))}` | "
                     f"{cell(info.description)} |")
    lines.append("")
lines += ["## Fields of one kind", "",
          "A field that belongs to another model or data kind would be ignored, so it is refused (one line, exit 2) "
          "unless it keeps its default. Fields not listed are shared by every kind.", "",
          "| section | kind | its own fields |", "|---|---|---|"]
for section, key, table in (("data", "data.kind", DATA_FIELDS), ("model", "model.kind", MODEL_FIELDS),
                            ("train", "model.kind", TRAIN_FIELDS)):
    for kind, fields in table.items():
        lines.append(f"| `[{section}]` | {key} = `{kind}` | " + ", ".join(f"`{f}`" for f in sorted(fields)) + " |")
lines += ["", "Other combinations refused before any work: `model.kind` and `data.kind` that do not pair; "
          "`data.p < data.d` (regression); `data.features > data.d`; `data.eigenvalues` whose length is not `data.d`; "
          "`data.feature_probs` not summing to 1 or not of length `data.features`; `data.m_singular_values` not of "
          "length min(p, d); `data.eigenvalues` without `covariance = 'eigenvalues'`, `data.condition_number` without "
          "`covariance = 'condition'`; `data.sampler = 'kernel'` with `model.forward = 'columns'`; the C kernel with "
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
