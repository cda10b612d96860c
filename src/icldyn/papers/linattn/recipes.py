"""Recipes of the companion paper (arXiv 2310.01082), one per optimisation notebook of the official code, on the
core's runner skeleton (:func:`icldyn.recipe.run_jobs`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import laws as data
from icldyn.components.official import OFFICIAL_DATA, OFFICIAL_TRAIN, QUICK_DATA, QUICK_TRAIN
from icldyn.config import RunConfig, with_overrides
from icldyn.papers.linattn.figures import condition_figure, loss_curves, noise_figure, smoothness_figure
from icldyn.papers.linattn.problem import TEST_KEY, model_of, problem_of
from icldyn.papers.linattn.results import LawPoint, LawResult, NoisePoint, NoiseResult
from icldyn.plots import mean_sd
from icldyn.recipe import Job, Recipe, Reporter, Rows, Table, Target, Trained, grid_points, run_jobs
from icldyn.store import RunDir
from icldyn.train.optimizers import build_optimizer


def jobs(cfg: RunConfig, with_landscape: str | None = None):
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        model = model_of(pcfg)
        seeds = list(range(pcfg.seed, pcfg.seed + pcfg.seeds))
        tests = jax.tree.map(lambda *xs: jnp.stack(xs), *[
            model.prepare(data.sample(pcfg.data, jax.random.fold_in(jax.random.PRNGKey(s), TEST_KEY),
                                      pcfg.data.test_size, jnp.dtype(pcfg.train.dtype))) for s in seeds])
        keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])

        def summarise(trained, wall, label=label, over=over, seeds=seeds):
            [(_, hist)] = trained
            final = hist.metrics[-1]["test_loss"]
            ok = [float(final[i]) for i in range(len(seeds)) if i not in hist.diverged_at]
            return [{"point": label, "grid": over, "seeds": [{"test_loss": float(x)} for x in final],
                     "test_loss": float(np.mean(ok)) if ok else np.nan,
                     "test_loss_std": float(np.std(ok)) if ok else np.nan}]

        yield Job(cfg=pcfg, targets=[Target(0, label, seeds)], problem=problem_of(pcfg, model, with_landscape),
                  opt=build_optimizer(pcfg.train), tasks=jnp.zeros(len(seeds)), tests=tests, keys=keys,
                  summarise=summarise, description=label or cfg.experiment)


def combine(cfg: RunConfig, points: list[LawPoint], rows: Rows, out: RunDir | None) -> LawResult:
    pts = [LawPoint.model_validate(p) for p in points]
    status = LawResult(points=pts).seeds_status()
    def spread(p: LawPoint) -> str:
        v = [s.test_loss for s in p.seeds if s.status == "finished"] or [np.nan]
        return f"{np.median(v):.4g} ({min(v):.3g}–{max(v):.3g})"

    table = Table(columns=["point", "final test loss (mean ± sd)", "median (range) over seeds"],
                  rows=[[p.point or "—", mean_sd(p.test_loss, p.test_loss_std, len(p.seeds)), spread(p)] for p in pts])
    figures = [loss_curves(cfg, pts, rows, out)]
    if cfg.experiment in LANDSCAPE_FIGURES:
        figures.append(LANDSCAPE_FIGURES[cfg.experiment](cfg, pts, rows, out))
    notes = ["Losses are E[(ŷ − y)²] with no ½ (official code), on each seed's fixed held-out prompts."]
    if status == "diverged" and cfg.model.layers > 3:  # measured: docs/results/linattn.md, More layers
        small = cfg.model.init_std <= 0.001 and cfg.train.dtype == "float64"
        notes.append("Deep models' weights grow along training until a rare large-‖x‖ prompt overflows; " + (
            "at L = 8 this happens even from a small initialisation with gamma covariates (measured)." if small else
            "at L = 8 a small initialisation trains (model.init_std = 0.001, train.lr = 0.01, train.dtype = float64, "
            "train.max_loss = 1e300).") + " docs/results/linattn.md, More layers.")
    return LawResult(points=pts, figures=figures, table=table, report_lines=notes)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    return run_jobs([rd], reporter, jobs(cfg, LANDSCAPE.get(cfg.experiment)))[0]


LANDSCAPE_FIGURES = {"linattn-condition": condition_figure, "linattn-smoothness": smoothness_figure}
LANDSCAPE = {"linattn-condition": "hessian", "linattn-smoothness": "smoothness"}  # what each evaluates


# The official train.ipynb: L = 3, d = 5, n = 20, a fresh batch of 1000 prompts per step, every block N(0, 0.05²),
# lr 0.02, the whole gradient clipped to norm 1 (0.1 for sphere), SGD with momentum 0.9 against AdamW(0.9, 0.9),
# 10 000 iterations, 6 seeds. With gamma covariates one prompt's ‖x‖ can be enormous, so a batch's training loss has
# spikes above 1e6 while the held-out loss keeps falling (measured: 6.6e5 at a step where the held-out loss was 0.22):
# only NaN/Inf and losses above 1e20 mark a seed diverged here.
OFFICIAL = {"data": {"kind": "laws", "d": 5, "n": 20, "test_size": 1000},
            "model": {"kind": "attention", "layers": 3, "parameterization": "relaxed", "init_std": 0.05},
            "train": {"lr": 0.02, "momentum": 0.9, "b1": 0.9, "b2": 0.9, "clip": 1.0, "clip_mode": "global",
                      "batch": 1000, "steps": 10_000, "log_every": 50, "max_loss": 1e20}}

RECIPES = [Recipe(
    name="linattn-adam-vs-sgd", paper="linattn",
    description="Adam against SGD on an L-layer linear transformer, Gaussian and heavy-tailed (gamma) covariates "
    "(arXiv 2310.01082, plot_loss.ipynb)",
    runner=run, result=LawResult, combine=combine,
    defaults={**OFFICIAL, "seeds": 6,
              "grid": {"data.covariates": ["normal", "gamma"], "train.optimizer": ["sgd", "adamw"]}},
    quick={"seeds": 2, "grid": {"data.covariates": ["normal"], "train.optimizer": ["sgd", "adamw"]},
           "train": {"steps": 600, "batch": 500}},
)]


RECIPES += [Recipe(
    name=name, paper="linattn", description=description, runner=run, result=LawResult, combine=combine,
    defaults={**OFFICIAL, "seeds": 6, "grid": {"data.covariates": ["normal", "gamma"],
                                                "train.optimizer": ["sgd", "adamw"]},
              "train": {**OFFICIAL["train"], "log_every": 250}},
    quick={"seeds": 1, "grid": {"data.covariates": ["normal"], "train.optimizer": ["sgd", "adamw"]}, **quick},
) for name, description, quick in (
    # the full Hessian is 150 Hessian-vector products: the quick condition run takes it every 60 steps on 500
    # held-out prompts
    ("linattn-condition", "the Hessian's condition number along Adam and SGD training, Gaussian and gamma "
     "covariates (arXiv 2310.01082, plot_condition_number.ipynb)",
     {"data": {"test_size": 500}, "train": {"steps": 600, "batch": 500, "log_every": 60}}),
    ("linattn-smoothness", "smoothness against gradient norm along Adam and SGD training (arXiv 2310.01082, "
     "plot_smoothness_vs_gradnorm.ipynb)", {"train": {"steps": 600, "batch": 500, "log_every": 20}}))]


# ---------------------------------------------------------------- stochastic-gradient noise (plot_stochastic_noise)


def hill(x: np.ndarray, k: int) -> float:
    """Hill's estimator of the tail index α from the k largest of ``x`` (α ≈ 2–4 heavy, large: light)."""
    top = np.sort(x)[-(k + 1):]
    return float(1.0 / np.mean(np.log(top[1:] / top[0])))


def noise_stats(norms: np.ndarray) -> dict[str, float]:
    from scipy import stats

    med = float(np.median(norms))
    return {"median": med, "q999_over_median": float(np.quantile(norms, 0.999) / med),
            "hill_tail_index": hill(norms, int(np.sqrt(len(norms)))), "kurtosis": float(stats.kurtosis(norms))}


def noise_programs(cfg: RunConfig):
    """The two programs of :func:`gradient_noise` for ``cfg``, the parameters an argument: built once per grid point,
    a point's seeds share them (traced and looked up once, not once per seed)."""
    model = model_of(cfg)
    flat = lambda g: jnp.concatenate([x.ravel() for x in jax.tree.leaves(g)])  # noqa: E731
    dtype = jnp.dtype(cfg.train.dtype)

    def minibatch_gradient(params, k, b):
        return flat(jax.grad(model.loss)(params, model.prepare(data.sample(cfg.data, k, b, dtype))))

    grad = jax.jit(minibatch_gradient, static_argnums=2)
    return grad, jax.jit(jax.vmap(lambda params, k: grad(params, k, cfg.train.batch), in_axes=(None, 0)))


def gradient_noise(cfg: RunConfig, params, key: jax.Array, samples: int, chunk: int = 100, programs=None):
    """‖g_B − ∇f‖ for ``samples`` minibatch gradients g_B at ``params`` (batch ``cfg.train.batch``), ∇f estimated
    on 100 batches as the notebook does, and the same norms for Gaussian noise with the minibatch gradients'
    covariance (the fit the paper compares with). ``programs``: :func:`noise_programs` of ``cfg``."""
    grad, many = programs or noise_programs(cfg)
    k_full, k_noise, k_gauss = jax.random.split(key, 3)
    full = grad(params, k_full, 100 * cfg.train.batch)
    G = np.concatenate([np.asarray(many(params, ks)) for ks in
                        np.array_split(np.asarray(jax.random.split(k_noise, samples)), max(samples // chunk, 1))])
    noise = G - np.asarray(full)
    centred = noise - noise.mean(0)
    cov = centred.T @ centred / samples
    gauss = np.random.default_rng(np.asarray(k_gauss)[-1]).multivariate_normal(np.zeros(len(cov)), cov, samples,
                                                                                method="eigh")
    return np.linalg.norm(noise, axis=1), np.linalg.norm(gauss, axis=1)


def noise_run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    """The notebook's experiment at initialisation (every block N(0, init_std²)), per grid point and seed: the
    distribution of the stochastic-gradient noise norm (``train.steps`` minibatch gradients, one per "step")
    against a Gaussian of the same covariance, its tail index and kurtosis; the statistics of a point pool its
    seeds' norms. Nothing trains: each seed's initial parameters are saved. The rows hold both norms per draw
    (``noise_norm`` and ``gaussian_noise_norm``), from which :func:`noise_combine` draws the figure."""
    rows: dict[str, list] = {k: [] for k in ("run_id", "point", "seed", "step", "metric", "value")}
    points, arrays = [], {}
    samples = cfg.train.steps
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        seeds = list(range(pcfg.seed, pcfg.seed + pcfg.seeds))
        tick = reporter.start(label or cfg.experiment, len(seeds))
        model, programs = model_of(pcfg), noise_programs(pcfg)
        all_norms, all_gauss, per_seed = [], [], []
        for j, seed in enumerate(seeds):
            params = model.init(key=jax.random.fold_in(jax.random.PRNGKey(seed), 0), dtype=jnp.dtype(pcfg.train.dtype))
            norms, gauss = gradient_noise(pcfg, params, jax.random.fold_in(jax.random.PRNGKey(seed), 1), samples,
                                          programs=programs)
            tick(j + 1, {})
            all_norms.append(norms)
            all_gauss.append(gauss)
            per_seed.append({"seed": seed, "status": "finished", **noise_stats(norms)})
            prefix = f"{label}/" if label else ""
            arrays.update({f"{prefix}seed{seed}/{k}": np.asarray(v) for k, v in params.items()})
            for metric, values in (("noise_norm", norms), ("gaussian_noise_norm", gauss)):
                for i, v in enumerate(values):
                    for k, x in (("run_id", rd.run_id), ("point", label), ("seed", seed), ("step", i),
                                 ("metric", metric), ("value", float(v))):
                        rows[k].append(x)
        emp, fit = noise_stats(np.concatenate(all_norms)), noise_stats(np.concatenate(all_gauss))
        points.append({"point": label, "grid": over, "samples": samples, "batch": pcfg.train.batch, **emp,
                       **{f"gaussian_{k}": v for k, v in fit.items() if k != "median"}, "seeds": per_seed})
    rd.write_metrics(rows)
    rd.write_params(arrays)
    return Trained(points, rows)


def noise_combine(cfg: RunConfig, points: list[NoisePoint], rows: Rows, out: RunDir | None) -> NoiseResult:
    """The noise figure (:func:`~icldyn.papers.linattn.figures.noise_figure`), table and notes of the points."""
    pts = [NoisePoint.model_validate(p) for p in points]
    table = Table(columns=["point", "q99.9/median (Gaussian)", "tail index (Gaussian)", "kurtosis (Gaussian)"],
                  rows=[[p.point or "—", f"{p.q999_over_median:.3f} ({p.gaussian_q999_over_median:.3f})",
                         f"{p.hill_tail_index:.2f} ({p.gaussian_hill_tail_index:.2f})",
                         f"{p.kurtosis:.2f} ({p.gaussian_kurtosis:.2f})"] for p in pts])
    return NoiseResult(points=pts, figures=[noise_figure(cfg, pts, rows, out)], table=table,
                       report_lines=["Noise ‖g_B − ∇f‖ of minibatch gradients at initialisation, ∇f on 100 batches "
                                     "(the notebook's estimate); the Gaussian has the minibatch gradients' "
                                     "covariance. Tail index: Hill's estimator over the top √m norms."])


# nothing trains: the optimiser's fields would be ignored, so setting one is refused
UNTRAINED = ("train.optimizer", "train.lr", "train.b1", "train.b2", "train.weight_decay", "train.momentum",
             "train.clip", "train.clip_mode", "train.schedule", "train.log_every", "train.max_loss")

RECIPES.append(Recipe(
    name="linattn-noise", paper="linattn",
    description="stochastic-gradient noise of the linear transformer against a Gaussian fit, tail index, Gaussian "
    "and gamma covariates (arXiv 2310.01082, plot_stochastic_noise.ipynb); train.steps: the gradients drawn",
    runner=noise_run, result=NoiseResult, combine=noise_combine, ignores=UNTRAINED,
    defaults={**OFFICIAL, "grid": {"data.covariates": ["normal", "gamma"]}, "seed": 1,
              "train": {**OFFICIAL["train"], "steps": 10_000}},
    quick={"train": {"steps": 500}},
))


# ---------------------------------------------------------------- rotation demonstrations (rotation demonstration-*)
# A rotated problem: x = U D g with U a random rotation and D = diag(1, 1, ½, ¼, 1), w ~ N(0, Σ⁻¹) — the ahn
# plug-in's data.covariance = 'official' law, trained and plotted by its runner: the notebooks' figures are its
# loss curves, Dist(Σ½A_ℓΣ½, I), Dist(A_ℓ, I) and Dist(B_ℓ, I) along training, and heat maps of the final weights.
# The notebooks' batch is 20 000 prompts; quick runs use ahn's quick training (fresh batches of 500, Adam, cosine).

ROTATION = {"data": OFFICIAL_DATA, "model": {"kind": "linear_attention", "layers": 3, "init_std": 1e-4}}
ROTATION_QUICK = {"seeds": 1, "data": QUICK_DATA, "model": {"init_std": 1e-3},
                  "train": {**QUICK_TRAIN, "steps": 3000}}
# the runner, result type, figures and sweeps of the installed recipe ahn-structure (the ahn plug-in's linear
# transformer on Gaussian prompts), resolved through the registry
ON_PROMPTS = {"base": "ahn-structure", "paper": "linattn"}

RECIPES += [
    Recipe(
        name="linattn-rotation-adam", **ON_PROMPTS,
        description="AdamW on a rotated problem: Σ½A_ℓΣ½ and B_ℓ become scaled identities, A_ℓ itself does not (arXiv "
        "2310.01082, rotation demonstration-Adam.ipynb; relaxed L = 3, lr 0.1 halved every 4000 steps, 100 000 "
        "steps, 5 seeds: ahn-theorem4's run)",
        defaults={**ROTATION, "seeds": 5, "model": {**ROTATION["model"], "parameterization": "relaxed"},
                  "train": {**OFFICIAL_TRAIN, "lr": 0.1, "decay_every": 4000, "steps": 100_000,
                            "log_every": 1000}},
        quick={**ROTATION_QUICK, "model": {**ROTATION_QUICK["model"], "parameterization": "relaxed"},
               "train": {**ROTATION_QUICK["train"], "steps": 8000, "batch": 1000}}),
    Recipe(
        name="linattn-rotation-p0", **ON_PROMPTS,
        description="AdamW on a rotated problem with P = 0 (sparse, preconditioned GD): Σ½A_ℓΣ½ → I, A_ℓ not "
        "(arXiv 2310.01082, "
        "rotation demonstration-Adam-p0.ipynb; lr 0.02 halved every 2000 steps, 30 000 steps, 5 seeds: ahn-structure's "
        "sparse run)",
        defaults={**ROTATION, "seeds": 5, "model": {**ROTATION["model"], "parameterization": "sparse"},
                  "train": {**OFFICIAL_TRAIN, "lr": 0.02, "decay_every": 2000, "steps": 30_000}},
        quick={**ROTATION_QUICK, "model": {**ROTATION_QUICK["model"], "parameterization": "sparse"}}),
    Recipe(
        name="linattn-rotation-lbfgs", **ON_PROMPTS,
        description="L-BFGS (memory 600, step 0.1, no line search) on one fixed batch of a rotated problem: the same "
        "scaled "
        "identities (arXiv 2310.01082, rotation demonstration-LBFGS.ipynb: 2000 steps of 4 L-BFGS iterations = "
        "8000 iterations, 3 seeds)",
        defaults={**ROTATION, "seeds": 3, "data": {**OFFICIAL_DATA, "resample_every": 8000},
                  "model": {**ROTATION["model"], "parameterization": "relaxed"},
                  "train": {"optimizer": "lbfgs", "lbfgs_memory": 600, "lr": 0.1, "clip": 0.0, "batch": 20_000,
                            "steps": 8000, "log_every": 80}},
        quick={"seeds": 1, "data": {"resample_every": 1500, "test_size": 20_000},
               "train": {"batch": 2000, "steps": 1500, "log_every": 50}}),
]
