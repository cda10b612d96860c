import pytest
from typer.testing import CliRunner

from icldyn.cli import app
from icldyn.config import ConfigError, RunConfig, apply_sets, build, kinds, section_class
from icldyn.plugins import get, recipes


# each kind's value constraints against a recipe that owns the kind
@pytest.mark.parametrize("recipe, raw, needle", [
    ("quickstart", {"data": {"d": 0}}, "data.d"),
    ("quickstart", {"data": {"dd": 3}}, "unknown key 'data.dd'"),
    ("quickstart", {"model": {"parameterization": "dense"}}, "'full', 'sparse', 'relaxed'"),
    ("quickstart", {"train": {"lr": -1.0}}, "train.lr"),
    ("quickstart", {"data": {"covariance": "eigenvalues", "eigenvalues": [1.0, -2.0], "d": 2}}, "positive"),
    ("quickstart", {"data": {"covariance": "eigenvalues", "eigenvalues": [1.0, 2.0]}}, "data.d = 5"),
    ("quickstart", {"grid": {"data.nope": [1]}}, "data.nope"),
    ("quickstart", {"bogus": 1}, "unknown key 'bogus'"),
    ("huang-ood", {"model": {"kind": "softmax_regressor"}}, "allowed pairs"),
    ("quickstart", {"train": {"precondition": True}}, "train.precondition"),
    ("quickstart", {"data": {"p": 3}}, "data.p applies to data.kind = 'regression' only, not 'prompts'"),
    ("quickstart", {"data": {"kind": "nope"}}, "data.kind = 'nope' is not allowed: must be one of 'prompts', "
     "'regression'"),
    ("goel-convergence", {"data": {"d": 3, "p": 3, "m_singular_values": [0.1, 0.2]}}, "min(data.p, data.d) = 3"),
    ("goel-convergence", {"data": {"p": 2}}, "data.p = 2 < data.d = 3"),
    ("goel-convergence", {"model": {"init": "zeros"}}, "model.init"),
    ("goel-convergence", {"train": {"regularizer": -1.0}}, "train.regularizer"),
    ("huang-balanced", {"data": {"features": 9}}, "data.features = 9 exceeds data.d = 4"),
    ("huang-balanced", {"data": {"feature_probs": [0.5, 0.5, 0.5, 0.5]}}, "sum to 1"),
    ("huang-balanced", {"data": {"p_dominant": 1.5}}, "data.p_dominant"),
    ("huang-balanced", {"model": {"layers": 2}}, "model.layers applies to model.kind = 'linear_attention'"),
    ("huang-balanced", {"train": {"count_samples": 10}}, "train.count_samples"),
    ("linattn-adam-vs-sgd", {"data": {"task": "sine"}}, "data.task = 'sine' is 1-d regression"),
    ("linattn-adam-vs-sgd", {"data": {"shape_k": 2.0}}, "data.shape_k applies to data.covariates = 'gamma'"),
    ("linattn-adam-vs-sgd", {"model": {"forward": "moments", "activation": "relu"}}, "model.forward = 'moments'"),
])
def test_bad_config_is_one_line_naming_the_field(recipe, raw, needle):
    with pytest.raises(ConfigError) as err:
        get(recipe).config(raw, quick=True)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg


def test_a_config_without_its_recipe_is_one_line():
    with pytest.raises(ConfigError, match="^experiment is missing"):
        build({"data": {"kind": "prompts"}, "model": {"kind": "linear_attention"}})


def test_every_field_is_documented_and_in_docs():
    docs = open("docs/config.md").read()
    sections = [("", RunConfig), ("train", section_class("train"))] + [
        (s, cls) for s in ("data", "model") for cls in kinds(s).values()]
    for name, section in sections:
        for field, info in section.model_fields.items():
            if field in ("data", "model", "train"):
                continue
            assert info.description, f"{name}.{field} has no description"
            assert f"`{name + '.' if name else ''}{field}`" in docs, f"{name}.{field} missing from docs/config.md"


def test_set_overrides_parse_toml_values():
    raw = apply_sets({}, ["data.n=10", "model.parameterization=sparse", "data.eigenvalues=[1, 0.5]", "seeds=3"])
    assert raw == {"data": {"n": 10, "eigenvalues": [1, 0.5]}, "model": {"parameterization": "sparse"}, "seeds": 3}
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_sets({}, ["data.n"])


def test_recipes_validate_at_both_sizes():
    for name in recipes():
        assert get(name).config().experiment == name
        assert get(name).config(quick=True).experiment == name
    with pytest.raises(ConfigError, match="unknown experiment"):
        get("nope")


@pytest.mark.parametrize("args, needle", [
    (["run", "--set", "data.d=0"], "data.d"),
    (["run", "no-such-experiment"], "unknown experiment"),
    (["run", "--set", "train.optimizer=rmsprob"], "train.optimizer"),
    (["run", "missing.toml"], "does not exist"),
    (["verify", "--paper", "xyz"], "--paper"),
])
def test_cli_bad_input_exit_2_one_line(args, needle):
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.output


@pytest.mark.parametrize("args", [["run", "--bogus"], ["run", "--set"], ["nope"]])
def test_usage_errors_through_the_entry_point_are_one_line(args):
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "icldyn.cli", *args], capture_output=True, text=True)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and res.stderr.startswith("error: ")


def test_config_docs_are_current_and_render_as_tables():
    """docs/config.md is what docs/gen_config.py writes, and every table row has its header's cell count (an
    unescaped | in a cell breaks the table on GitHub)."""
    import re
    import runpy

    assert "\n".join(runpy.run_path("docs/gen_config.py")["lines"]) == open("docs/config.md").read()
    cells = lambda line: len(re.split(r"(?<!\\)\|", line.strip())) - 2  # noqa: E731
    header = None
    for line in open("docs/config.md"):
        if not line.startswith("|"):
            header = None
            continue
        header = header or cells(line)
        assert cells(line) == header, line


def test_a_grid_override_replaces_its_axis_and_keeps_the_others():
    exp = get("linattn-adam-vs-sgd")  # grid: data.covariates × train.optimizer
    grid = lambda sets: exp.config(apply_sets({}, sets)).grid  # noqa: E731
    assert grid(["grid.train.optimizer=['adamw']"]) == {"data.covariates": ["normal", "gamma"],
                                                        "train.optimizer": ["adamw"]}
    assert grid(["grid.data.covariates=[]", "grid.train.lr=[0.01,0.02]"]) == {"train.optimizer": ["sgd", "adamw"],
                                                                            "train.lr": [0.01, 0.02]}
    assert exp.config({"grid": {}}).grid == {}  # a sweep's target: no grid
    with pytest.raises(ConfigError, match=r"grid.data.covariates=\[\]"):  # fixed while an axis, whatever else is set
        exp.config(apply_sets({}, ["data.covariates='gamma'", "grid.train.lr=[0.01]"]))
    exp.config(apply_sets({}, ["data.covariates='gamma'", "grid.data.covariates=[]"]))  # dropped, then fixed
