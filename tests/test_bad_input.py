"""Generated bad input: every one is answered by one line naming the field, exit code 2, no traceback."""

import typing

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icldyn.cli import app
from icldyn.config import RunConfig, _SECTIONS

FIELDS = [(f"{name}.{field}", info)
          for name, section in _SECTIONS.items() for field, info in section.model_fields.items()]
FIELDS += [(field, RunConfig.model_fields[field]) for field in ("seeds", "seed")]


def _bad_values(info) -> st.SearchStrategy:
    """Values outside a field's type or constraints."""
    ann = info.annotation
    bounds = {attr: getattr(m, attr) for m in info.metadata for attr in ("ge", "gt", "le", "lt") if hasattr(m, attr)}
    bad = [st.just("'not-a-number'"), st.just("[1, 2")]  # wrong type; malformed TOML → bare string
    if typing.get_origin(ann) is typing.Literal:
        allowed = set(typing.get_args(ann))
        return st.text("abcdefghij_", min_size=1, max_size=8).filter(lambda s: s not in allowed)
    if ann is bool:
        return st.just("'maybe'")
    if "ge" in bounds:
        bad.append(st.floats(-1e6, bounds["ge"], exclude_max=True).map(repr))
    if "gt" in bounds:
        bad.append(st.floats(-1e6, bounds["gt"]).map(repr))
    if "le" in bounds:
        bad.append(st.floats(bounds["le"], 1e9, exclude_min=True).map(lambda x: repr(int(x) + 1)))
    if "lt" in bounds:
        bad.append(st.floats(bounds["lt"], 1e6).map(repr))
    return st.one_of(bad)


@st.composite
def bad_sets(draw) -> tuple[list[str], str]:
    kind = draw(st.sampled_from(["value", "unknown", "syntax", "grid"]))
    if kind == "unknown":
        key = draw(st.sampled_from(["data", "model", "train", "nope"])) + "." + draw(
            st.text("xyzqw_", min_size=3, max_size=8))
        return [f"{key}=1"], key.split(".")[0] if key.startswith("nope") else key
    if kind == "syntax":
        return [draw(st.sampled_from(["data.n", "=3", "..=1", "data..n=2"]))], "--set"
    if kind == "grid":
        return [f"grid.{draw(st.sampled_from(['data.zz', 'model.nope', 'x.y']))}=[1,2]"], "grid"
    key, info = draw(st.sampled_from(FIELDS))
    if info.annotation in (int, float) or typing.get_origin(info.annotation) is typing.Literal or info.metadata:
        return [f"{key}={draw(_bad_values(info))}"], key
    return [f"{key}={{'a' = 1}}"], key  # e.g. eigenvalues / grid: an inline table is never valid


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bad_sets())
def test_generated_bad_config_is_one_line_exit_2(case):
    sets, needle = case
    res = CliRunner().invoke(app, ["run", "quickstart", *sum((["--set", s] for s in sets), [])])
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2, (sets, res.output)
    assert len(lines) == 1 and "Traceback" not in res.output, (sets, res.output)
    if needle not in ("--set", "grid"):
        assert needle.split(".")[-1] in lines[0], (sets, lines[0])


def test_malformed_toml_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[data\nd = 3\n")
    res = CliRunner().invoke(app, ["run", str(bad)])
    assert res.exit_code == 2 and "not valid TOML" in res.stderr and len(res.stderr.strip().splitlines()) == 1
