"""A toy paper: in-context estimation of a mean.

Data law ``scalar_means``: a prompt is n draws y_i = μ + σ ε_i with μ ~ N(0, τ²) per prompt; the target is μ.
Model ``shrinkage``: ŷ = a · ȳ, one trained scalar a. Its population loss is

    L(a) = E[(a ȳ − μ)²] = (a − 1)² τ² + a² σ² / n,

minimised by the posterior-mean shrinkage a* = τ² / (τ² + σ²/n), with L(a*) = τ² σ²/n / (τ² + σ²/n).
The recipe ``toy-shrinkage`` trains a by SGD over n and holds it against a*; ``icldyn verify --paper toy`` checks
the closed form against Monte Carlo and the trained a against a*.
"""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from pydantic import Field

from icldyn.claims import Claim
from icldyn.config import DataSection, ModelSection, RunConfig, with_overrides
from icldyn.plots import save
from icldyn.plugins import Paper, get
from icldyn.recipe import (
    Job,
    Point,
    Recipe,
    Reporter,
    Result,
    Rows,
    Seed,
    Table,
    Target,
    Trained,
    grid_points,
    run_jobs,
)
from icldyn.runner import execute
from icldyn.store import RunDir
from icldyn.train.loop import Problem
from icldyn.train.optimizers import build_optimizer


class ScalarMeans(DataSection):
    """n draws y_i = μ + σ ε_i, μ ~ N(0, τ²) per prompt; the target is μ."""

    kind: Literal["scalar_means"] = Field("scalar_means", description="y_i = μ + σ ε_i, target μ ~ N(0, τ²)")
    noise_std: float = Field(1.0, gt=0.0, description="σ")
    prior_std: float = Field(1.0, gt=0.0, description="τ")


class Shrinkage(ModelSection):
    """ŷ = a · ȳ."""

    kind: Literal["shrinkage"] = Field("shrinkage", description="ŷ = a · mean(y), one trained scalar a")
    data_kinds = ("scalar_means",)
    init: float = Field(0.0, description="initial a")


def optimum(n: int, sigma: float, tau: float) -> tuple[float, float]:
    """(a*, L(a*)) of the population loss L(a) = (a − 1)² τ² + a² σ²/n."""
    a = tau**2 / (tau**2 + sigma**2 / n)
    return a, tau**2 * sigma**2 / n / (tau**2 + sigma**2 / n)


def population_loss(a: float, n: int, sigma: float, tau: float) -> float:
    return (a - 1.0) ** 2 * tau**2 + a**2 * sigma**2 / n


def sample(key, batch: int, n: int, sigma: float, tau: float):
    k1, k2 = jax.random.split(key)
    mu = tau * jax.random.normal(k1, (batch,))
    return mu[:, None] + sigma * jax.random.normal(k2, (batch, n)), mu


def loss(params, data):
    y, mu = data
    return jnp.mean((params["a"] * y.mean(axis=1) - mu) ** 2)


class ToySeed(Seed):
    a: float


class ToyPoint(Point):
    n: int
    a: float
    a_star: float
    loss_star: float
    test_loss: float
    seeds: list[ToySeed]


class ToyResult(Result):
    points: list[ToyPoint]


def jobs(cfg: RunConfig):
    for label, over in grid_points(cfg):
        pcfg = with_overrides(cfg, over)
        d, seeds = pcfg.data, list(range(pcfg.seed, pcfg.seed + pcfg.seeds))
        problem = Problem(
            init=lambda task, key, a0=pcfg.model.init: {"a": jnp.asarray(a0, jnp.float32)},
            sample=lambda task, key, d=d, b=pcfg.train.batch: sample(key, b, d.n, d.noise_std, d.prior_std),
            loss=loss, evaluate=lambda params, task, test: {"test_loss": loss(params, test), "a": params["a"]},
            seed_map="vmap")
        tests = jax.tree.map(lambda *xs: jnp.stack(xs), *[sample(jax.random.PRNGKey(10_000 + s), 20_000, d.n,
                                                                 d.noise_std, d.prior_std) for s in seeds])
        keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])

        def summarise(trained, wall, label=label, d=d, seeds=seeds):
            [(params, hist)] = trained
            a_star, l_star = optimum(d.n, d.noise_std, d.prior_std)
            a = np.asarray(params["a"], float)
            return [{"point": label, "n": d.n, "a": float(a.mean()), "a_star": a_star, "loss_star": l_star,
                     "test_loss": float(np.mean(hist.metrics[-1]["test_loss"])),
                     "seeds": [{"a": float(x)} for x in a]}]

        yield Job(cfg=pcfg, targets=[Target(0, label, seeds)], problem=problem, opt=build_optimizer(pcfg.train),
                  tests=tests, keys=keys, summarise=summarise)


def run(cfg: RunConfig, rd: RunDir, reporter: Reporter) -> Trained:
    [trained] = run_jobs([rd], reporter, jobs(cfg))
    return trained


def combine(cfg: RunConfig, points: list[ToyPoint], rows: Rows, out: RunDir | None) -> ToyResult:
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([p.n for p in points], [p.a for p in points], "o", label="trained a")
    ax.plot([p.n for p in points], [p.a_star for p in points], "k--", label="a* = τ²/(τ² + σ²/n)")
    ax.set(xscale="log", xlabel="n", ylabel="a", title="toy-shrinkage")
    ax.legend()
    return ToyResult(points=points, figures=[save(fig, out, "shrinkage")],
                     table=Table(columns=["point", "trained a", "a*", "test loss", "L(a*)"],
                                 rows=[[p.point, f"{p.a:.4f}", f"{p.a_star:.4f}", f"{p.test_loss:.4f}",
                                        f"{p.loss_star:.4f}"] for p in points]),
                     report_lines=["a* is the posterior-mean shrinkage; losses are E[(ŷ − μ)²]."])


RECIPE = Recipe(
    name="toy-shrinkage", paper="toy",
    description="toy plug-in: a learned shrinkage factor a against the posterior-mean a*",
    runner=run, combine=combine, result=ToyResult,
    defaults={"seeds": 2, "grid": {"data.n": [2, 8, 32]}, "data": {"kind": "scalar_means"},
              "model": {"kind": "shrinkage"},
              "train": {"optimizer": "sgd", "lr": 0.2, "steps": 400, "batch": 1024, "log_every": 100}},
    quick={"grid": {"data.n": [2, 32]}, "train": {"steps": 150}},
)


def claims(quick: bool, store, reporter=None) -> list[Claim]:
    a, n, sigma, tau = 0.7, 5, 1.5, 1.0
    y, mu = sample(jax.random.PRNGKey(0), 400_000, n, sigma, tau)
    err = np.asarray((a * y.mean(axis=1) - mu) ** 2)
    mean, se = err.mean(), err.std() / np.sqrt(err.size)
    theory = population_loss(a, n, sigma, tau)
    out = [Claim(paper="toy", claim="L(a) = (a − 1)²τ² + a²σ²/n vs Monte Carlo", theory=theory, measured=mean,
                 tolerance=4 * se, test="|m − t| ≤ tol (4 s.e.)", passed=abs(mean - theory) <= 4 * se)]
    _, summary = execute(get("toy-shrinkage").config(quick=quick), store, reporter)
    worst = max(abs(p["a"] / p["a_star"] - 1) for p in summary["points"])
    out.append(Claim(paper="toy", claim="trained a = a* at every n (the largest |a/a* − 1|)", theory=0.0,
                     measured=worst, tolerance=0.03, test="m ≤ tol", passed=worst <= 0.03, fmt=".2%",
                     detail="a / a*: " + ", ".join(f"{p['a']:.3f} / {p['a_star']:.3f}" for p in summary["points"])))
    return out


PAPER = Paper(name="toy", title="Toy (2026): in-context estimation of a mean by a learned shrinkage factor",
              recipes=(RECIPE,), data=(ScalarMeans,), models=(Shrinkage,), claims=claims)
