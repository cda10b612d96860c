"""Generated bad input: every one is answered by one line naming the field, exit code 2, no traceback."""

import typing

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from icldyn.cli import app
from icldyn.config import RunConfig, kinds, section_class

# quickstart's own kinds last: a field several kinds declare (data.noise_std: ≥ 0 for prompts, > 0 for a task pool)
# is generated with the constraints of the kind the test runs, so a value valid there is never drawn as bad
OWN = {"data": "prompts", "model": "linear_attention"}
SECTIONS = [("train", section_class("train"))] + [
    (s, cls) for s in ("data", "model")
    for cls in sorted(kinds(s).values(), key=lambda c: c.model_fields["kind"].default == OWN[s])]
FIELDS = list({f"{name}.{field}": info for name, section in SECTIONS for field, info in section.model_fields.items()
               if field != "kind"}.items())
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


# Which kinds own a field (the rest refuse it): written out here, independently of icldyn.config's tables.
RECIPES = {"quickstart": ("linear_attention", "prompts"), "huang-balanced": ("softmax_icl", "features"),
           "goel-convergence": ("softmax_regressor", "regression"),
           "softmax-gaussian-prompts": ("softmax_icl", "prompts")}
FOREIGN = {  # field: (a valid value other than its default, model kinds or data kinds that use it)
    "model.layers": ("7", {"linear_attention"}), "model.parameterization": ("'sparse'", {"linear_attention"}),
    "model.heads": ("2", {"linear_attention"}), "model.forward": ("'moments'", {"linear_attention"}),
    "model.init": ("'spectral'", {"softmax_regressor"}), "model.train_value": ("true", {"softmax_icl"}),
    "model.init_std": ("0.5", {"linear_attention", "softmax_regressor"}),
    "data.sampler": ("'jax'", {"linear_attention"}), "train.threads": ("2", {"linear_attention"}),
    "train.regularizer": ("0.5", {"softmax_regressor"}), "train.precondition": ("true", {"softmax_regressor"}),
    "train.count_samples": ("999", {"softmax_icl"}),
    "data.w_prior": ("'identity'", {"prompts"}), "data.test_size": ("77", {"prompts"}),
    "data.p": ("9", {"regression"}), "data.m_norm": ("0.01", {"regression"}),
    "data.features": ("2", {"features"}), "data.p_dominant": ("0.3", {"features"}),
    "data.feature_basis": ("'random'", {"features"}), "data.noise_std": ("0.1", {"prompts", "regression"}),
    "data.covariance": ("'official'", {"prompts", "regression"}),
}


@st.composite
def cross_field_cases(draw) -> tuple[str, list[str], list[str]]:
    """(recipe, --set items, words the one line must hold): a field of another kind, or fields that do not fit."""
    case = draw(st.sampled_from(["foreign", "p<d", "K>d", "eigenvalues", "probabilities"]))
    if case == "foreign":
        recipe, (model, data) = draw(st.sampled_from(sorted(RECIPES.items())))
        key = draw(st.sampled_from(sorted(k for k, (_, owners) in FOREIGN.items() if not owners & {model, data})))
        return recipe, [f"{key}={FOREIGN[key][0]}"], [key]
    if case == "p<d":
        d = draw(st.integers(2, 8))
        return "goel-convergence", [f"data.d={d}", f"data.p={draw(st.integers(1, d - 1))}"], ["data.p", "data.d"]
    if case == "K>d":
        d = draw(st.integers(1, 8))
        return "huang-balanced", [f"data.d={d}", f"data.features={d + draw(st.integers(1, 4))}"], ["data.features"]
    if case == "eigenvalues":
        k = draw(st.integers(1, 9).filter(lambda k: k != 5))
        return "quickstart", ["data.covariance=eigenvalues", f"data.eigenvalues={[1.0] * k}"], ["data.eigenvalues"]
    probs = draw(st.lists(st.floats(0.01, 1.0), min_size=8, max_size=8).filter(lambda p: abs(sum(p) - 1) > 1e-6))
    return "huang-balanced", [f"data.feature_probs={probs}"], ["data.feature_probs"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cross_field_cases())
def test_generated_cross_field_combinations_are_refused_before_any_work(tmp_path_factory, case):
    recipe, sets, words = case
    store = tmp_path_factory.getbasetemp() / "never-written"
    res = CliRunner().invoke(app, ["run", recipe, "--out", str(store), *sum((["--set", s] for s in sets), [])])
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2, (recipe, sets, res.output)
    assert len(lines) == 1 and "Traceback" not in res.output, (sets, res.output)
    assert all(w in lines[0] for w in words), (sets, lines[0])
    assert not store.exists()
