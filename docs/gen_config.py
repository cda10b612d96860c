"""Regenerate docs/config.md from the pydantic models: python docs/gen_config.py"""

from icldyn.config import RunConfig, _SECTIONS, _describe
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
        lines.append(f"| `{key}` | {_describe(section, field)} | `{default!r}` | {info.description} |")
    lines.append("")
if __name__ == "__main__":
    open("docs/config.md", "w").write("\n".join(lines))
