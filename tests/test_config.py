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
     "'linear_regression'"),
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


# ---------------------------------------------------------------- optax by name, Σ and w given, null, kind changes


@pytest.mark.parametrize("raw, needle", [
    ({"train": {"optimizer": "rmsprob"}}, "train.optimizer = 'rmsprob' is not allowed: must be one of adam, adamw"),
    ({"train": {"optimizer": {"name": "lion", "beta": 0.9}}}, "optax.lion takes no argument 'beta'; allowed: b1, b2"),
    ({"train": {"optimizer": {"name": "lion", "learning_rate": 0.1}}}, "give it as train.lr"),
    ({"train": {"optimizer": {"b2": 0.9, "name": 3}}}, "a table needs name"),
    ({"train": {"optimizer": "lion", "b1": 0.5}}, 'train.b1 applies to train.optimizer = \'adam\', \'adamw\', \'sgd\' '
     'or \'lbfgs\' only, not \'lion\'; give it in the table: train.optimizer = {name = "lion", b1 = 0.5}'),
    ({"train": {"schedule": "nope"}}, "train.schedule = 'nope' is not allowed: must be one of constant, step, cosine"),
    ({"train": {"schedule": {"name": "warmup_cosine_decay_schedule"}}}, "needs warmup_steps"),
    ({"train": {"schedule": "constant", "decay_every": 5}}, "train.decay_every applies to train.schedule = 'step'"),
    ({"data": {"covariance": "matrix", "covariance_matrix": [[1, 2], [2, 1]], "d": 2}},
     "data.covariance_matrix: must be symmetric positive definite: its smallest eigenvalue is -1"),
    ({"data": {"covariance": "matrix", "covariance_matrix": [[1, 0.5], [0.4, 1]], "d": 2}}, "max |Σ − Σᵀ| = 0.1"),
    ({"data": {"covariance": "matrix", "covariance_matrix": [[1, 0], [0, 1]]}}, "is 2×2 but data.d = 5"),
    ({"data": {"covariance": "matrix"}}, "needs data.covariance_matrix"),
    ({"data": {"covariance": "identity", "rotate": False}}, "data.rotate applies to data.covariance = 'eigenvalues',"),
    ({"data": {"w_prior": "matrix"}}, "needs data.w_covariance"),
    ({"data": {"w_law": "sparse", "w_sparsity": 9}}, "needs data.w_sparsity, the nonzero coordinates: 1 … data.d = 5"),
    ({"data": {"w_law": "laplace", "sampler": "kernel"}}, "data.sampler = 'kernel' draws Gaussian w only"),
])
def test_optax_and_matrix_errors_are_one_line(raw, needle):
    with pytest.raises(ConfigError) as err:
        get("quickstart").config(raw, quick=True)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_changing_a_mode_or_kind_drops_the_old_fields_and_null_unsets():
    q = lambda *sets: get("quickstart").config(apply_sets({}, list(sets)), quick=True)  # noqa: E731
    cfg = q("data.covariance=identity")  # the recipe's data.eigenvalues belong to covariance = 'eigenvalues'
    assert cfg.data.covariance == "identity" and cfg.data.eigenvalues is None
    cfg = q("train.optimizer={name=\"lion\", b1=0.95}")  # the recipe's b2 = 0.99 was Adam's; lion takes its table
    assert cfg.train.optimizer == {"name": "lion", "b1": 0.95} and cfg.train.b2 == 0.999
    assert q("train.optimizer={name=\"lion\"}").train.optimizer == "lion"  # a table of only its name is the name
    assert q("train.optimizer.b1=0.8").train.optimizer == {"name": "adam", "b1": 0.8}  # amends the recipe's adam
    assert q("train.schedule=null").train.schedule == "constant"  # the recipe's cosine unset: the default
    assert q("grid.model.layers=null").grid == {}
    with pytest.raises(ConfigError, match="needs data.eigenvalues"):
        q("data.eigenvalues=none")
    assert apply_sets({}, ["data.eigenvalues=null"]) == {"data": {"eigenvalues": None}}
    cfg = get("ahn-loss-vs-layers").config(quick=True)  # its quick cosine dropped the defaults' step decay_every
    assert cfg.train.schedule == "cosine" and cfg.train.decay_every == 4000
    cfg = get("linattn-adam-vs-sgd").config(quick=True)  # a grid point that changes the optimiser: the same rule
    from icldyn.config import with_overrides
    assert with_overrides(cfg, {"train.optimizer": "lion"}).train.b2 == 0.999 and cfg.train.b2 == 0.9


def test_a_matrix_from_npy_is_read_checked_and_held_inline(tmp_path):
    import numpy as np

    from icldyn.components.prompts import make_covariance, make_task, w_covariance

    S = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.1], [0.0, 0.1, 0.5]])
    np.save(tmp_path / "s.npy", S)
    np.save(tmp_path / "bad.npy", -S)
    raw = {"data": {"d": 3, "covariance": "matrix", "covariance_matrix": str(tmp_path / "s.npy"),
                    "w_prior": "matrix", "w_covariance": np.diag([1.0, 2.0, 3.0]).tolist()}}
    cfg = get("quickstart").config(raw, quick=True)
    assert cfg.data.covariance_matrix == S.tolist()  # config.toml holds the matrix, not the path
    task = make_task(cfg.data, seed=7)
    assert np.array_equal(make_covariance(cfg.data, 7), S) and np.allclose(w_covariance(task), np.diag([1, 2, 3.]))
    raw["data"]["covariance_matrix"] = str(tmp_path / "bad.npy")
    with pytest.raises(ConfigError, match="smallest eigenvalue is -2.08"):
        get("quickstart").config(raw, quick=True)
    raw["data"]["covariance_matrix"] = str(tmp_path / "none.npy")
    with pytest.raises(ConfigError, match="none.npy' does not exist"):
        get("quickstart").config(raw, quick=True)
    lam = [2.0, 1.0, 0.5]  # eigenvalues without the rotation: Σ = diag(λ)
    flat = get("quickstart").config({"data": {"d": 3, "eigenvalues": lam, "rotate": False}}, quick=True)
    assert np.array_equal(make_covariance(flat.data, 7), np.diag(lam))


def test_w_laws_have_unit_second_moment_and_the_stated_support():
    import jax
    import numpy as np

    from icldyn.components.prompts import WLaw, draw_g

    m, d = 4000, 4
    draws = jax.jit(lambda k: [draw_g(k, m, d, np.float32, law) for law in (WLaw("laplace"), WLaw("sparse", 1))])
    lap, sparse = (np.asarray(g, np.float64) for g in draws(jax.random.PRNGKey(0)))
    for g, tol in ((lap, 0.18), (sparse, 0.26)):  # 5 sd of the mean of g_i² (E g⁴ = 6 and 12)
        assert np.max(np.abs(g.T @ g / m - np.eye(d))) < tol
    assert np.all((sparse != 0).sum(1) == 1)  # sparse: exactly k = 1 nonzero coordinate per prompt
    assert abs(np.mean(lap**4) / np.mean(lap**2) ** 2 - 6.0) < 2.0  # Laplace kurtosis 6 (5 sd; a Gaussian's: 3)


def test_a_schedule_by_name_multiplies_each_vmapped_learning_rate():
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from icldyn.train.loop import set_learning_rates
    from icldyn.train.optimizers import build_optimizer

    steps = 8
    cfg = get("quickstart").config(apply_sets({}, [
        "train.optimizer=sgd", f"train.steps={steps}", "train.clip=0",
        "train.schedule={name=\"warmup_cosine_decay_schedule\", warmup_steps=3}"]), quick=True)
    opt = build_optimizer(cfg.train)
    params = {"w": jnp.zeros(2)}
    lrs = np.array([0.1, 0.3])
    state = set_learning_rates(jax.tree.map(lambda a: jnp.stack([a, a]), opt.init(params)), lrs)
    update = jax.jit(jax.vmap(lambda s: opt.update({"w": jnp.ones(2)}, s, params)))
    factor = optax.warmup_cosine_decay_schedule(0.0, 1.0, 3, steps)  # decay_steps: train.steps, peak 1
    got = []
    for _ in range(steps):
        u, state = update(state)
        got.append(np.asarray(u["w"][:, 0]))
    want = -np.outer([factor(t) for t in range(steps)], lrs)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6, atol=1e-9)
    assert got[0][0] == 0 and got[3][1] == pytest.approx(-0.3)  # warm-up from 0, the peak at step 3


def test_an_optax_object_from_python_is_accepted_and_recorded():
    import jax.numpy as jnp
    import numpy as np
    import optax

    from icldyn.config import PYTHON_OPTIMIZER, load_toml, with_overrides
    from icldyn.store import config_toml
    from icldyn.train.optimizers import build_optimizer

    lion = optax.lion(1e-3)
    cfg = get("quickstart").config({"train": {"optimizer": lion}}, quick=True)
    assert cfg.train.optimizer is lion and cfg.train.lr == 1.0 and cfg.train.schedule == "constant"  # its own rate
    assert with_overrides(cfg, {"model.layers": 1}).train.optimizer is lion  # a grid point keeps the object
    params, grads = {"w": jnp.zeros(3)}, {"w": jnp.array([1.0, -2.0, 0.5])}
    opt = build_optimizer(cfg.train)
    got, _ = opt.update(grads, opt.init(params), params)
    want, _ = lion.update(grads, lion.init(params), params)
    np.testing.assert_allclose(got["w"], want["w"])
    text = config_toml(cfg)
    assert PYTHON_OPTIMIZER in text
    import tomllib
    recorded = get("quickstart").config({"train": tomllib.loads(text)["train"]}, quick=True)  # show/load still read it
    with pytest.raises(ConfigError, match="cannot rebuild"):
        build_optimizer(recorded.train)
    with pytest.raises(ConfigError, match="train.optimizer = int object is not allowed"):
        get("quickstart").config({"train": {"optimizer": 3}}, quick=True)
    del load_toml


def test_data_seed_draws_the_data_apart_from_the_initial_parameters():
    from icldyn.components.prompts import data_seeds

    import jax
    import numpy as np
    import optax

    from icldyn.train.loop import Problem, init_states

    cfg = get("quickstart").config({"seed": 3, "seeds": 2, "data": {"seed": 10}}, quick=True)
    assert data_seeds(cfg.data, [3, 4]) == [10, 11]
    assert data_seeds(get("quickstart").config(quick=True).data, [3, 4]) == [3, 4]
    # the trainer: parameters from init_keys exactly as from keys, the batches' stream from the data's keys (step 0
    # draws the first batch: the state's batch slot holds zeros of the sampler's shapes until then)
    toy = Problem(init=lambda task, key: {"w": jax.random.normal(key, (2,))},
                  sample=lambda task, key: jax.random.normal(key, (3,)), loss=None, evaluate=None, seed_map="vmap")
    key = lambda seeds: jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])  # noqa: E731
    tasks, opt = jax.numpy.zeros(2), optax.sgd(1.0)
    apart = init_states(toy, opt, tasks, key([10, 11]), init_keys=key([3, 4]))
    same_init, same_data = init_states(toy, opt, tasks, key([3, 4])), init_states(toy, opt, tasks, key([10, 11]))
    np.testing.assert_array_equal(apart.params["w"], same_init.params["w"])
    np.testing.assert_array_equal(apart.key, same_data.key)
    assert apart.batch.shape == (2, 3) and not np.asarray(apart.batch).any()
    assert not np.array_equal(apart.params["w"], same_data.params["w"])
