"""Goel, Soltanolkotabi, Bartlett's setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place):
the fixed regression law, the softmax self-attention regressor, Algorithm 1's spectral initialisation, balancing
regulariser and preconditioner (an optax transformation)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from icldyn.components.regression import RegressionTask, make_regression_task, sample_regression
from icldyn.components.softmax_regressor import SoftmaxRegressor
from icldyn.config import RunConfig
from icldyn.papers.goel import theory
from icldyn.train.loop import Problem
from icldyn.train.optimizers import build_optimizer


def precondition(sigma_hat_inv: jax.Array) -> optax.GradientTransformation:
    """Algorithm 1's preconditioner (Goel et al.): the gradient of θ = (A, B) is multiplied by
    P̂⁻¹ = blockdiag(I_p, Σ̂⁻¹), i.e. g_B ← Σ̂⁻¹ g_B, with Σ̂ from the initial sample. Chained before
    ``optax.sgd(η)`` it gives θ_{t+1} = θ_t − η P̂⁻¹ Ẑ_t."""

    def update(updates, state, params=None):
        return {**updates, "B": sigma_hat_inv @ updates["B"]}, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


INIT_KEY = 7  # fold_in tag of the initial sample (spectral initialisation and P̂)


class GoelTask(NamedTuple):
    """One seed's data law and initial-sample statistics (a pytree, stacked over seeds)."""

    sigma: jax.Array
    sigma_sqrt: jax.Array
    M: jax.Array
    noise_std: jax.Array
    sigma_hat: jax.Array  # Σ̂ of the initial sample (spectral init, P̂)
    sigma_hat_inv: jax.Array
    M_hat: jax.Array  # OLS estimate from the initial sample


class Setup(NamedTuple):
    problem: Problem
    opt: Any  # task -> optax transform
    tasks: GoelTask
    keys: jax.Array
    seeds: list[int]
    assumptions: list[dict]  # per seed


def initial_sample(task: RegressionTask, seed: int, n: int):
    """The sample Algorithm 1 starts from: n noisy samples, its Σ̂ and OLS M̂ (float64)."""
    t = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), task)
    X, Y = sample_regression(t, jax.random.fold_in(jax.random.PRNGKey(seed), INIT_KEY), 1, n)
    return theory.sample_moments(X[0], Y[0])


def build(cfg: RunConfig) -> Setup:
    """Every seed's task and initial-sample statistics, and the Problem."""
    dtype = jnp.float64 if cfg.train.dtype == "float64" else jnp.float32
    d, train_cfg = cfg.data, cfg.train
    model = SoftmaxRegressor(d.d, d.p, cfg.model.init_std)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    base = {s: make_regression_task(d, s) for s in seeds}
    stats = {s: initial_sample(base[s], s, d.n) for s in seeds}
    tasks = [GoelTask(*base[s], stats[s][0], np.linalg.inv(stats[s][0]), stats[s][1]) for s in seeds]
    tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks)
    keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])
    lam = train_cfg.regularizer

    def init(task: GoelTask, key):
        if cfg.model.init == "spectral":
            A, B = theory.theta_star(task.M_hat, task.sigma_hat)
            return {"A": A, "B": B}
        return model.init(key, dtype)

    def sample(task: GoelTask, key):
        if train_cfg.oracle == "population":  # the exact oracle needs the law, not a sample
            return task.sigma, task.M
        X, Y = sample_regression(RegressionTask(task.sigma, task.sigma_sqrt, task.M, task.noise_std), key,
                                 train_cfg.batch, d.n, noise=False)
        return X, Y

    def loss(params, batch):
        A, B = params["A"], params["B"]
        if train_cfg.oracle == "population":  # Q(θ) − L*
            sigma, M = batch
            return theory.excess_loss(A, B, M, sigma) + lam * theory.regulariser(A, B, sigma)
        X, Y = batch  # L̂ + λR̂ (label noise integrated out: the same expected gradient, less variance)
        out = model.empirical_loss(params, X, Y)
        return out + lam * model.empirical_regulariser(params, X) if lam else out

    def evaluate(params, task: GoelTask, test):
        A, B = params["A"], params["B"]
        return {"excess_loss": theory.excess_loss(A, B, task.M, task.sigma),
                "regulariser": theory.regulariser(A, B, task.sigma),
                "p_distance": theory.project_jit(A, B, task.M, task.sigma).distance}

    def opt(task: GoelTask):
        pre = precondition(task.sigma_hat_inv) if train_cfg.precondition else None
        return build_optimizer(train_cfg, precondition=pre)

    problem = Problem(init=init, sample=sample, loss=loss, evaluate=evaluate, seed_map="vmap")
    return Setup(problem, opt, tasks, keys, seeds, [theory.assumptions(base[s].M, base[s].sigma) for s in seeds])


def stack(setups: list[Setup]) -> Setup:
    """Several runs' setups on one seed axis: one program for runs that differ only in the recipes' ``GROUP_FIELDS``."""
    cat = lambda *xs: jnp.concatenate(xs)  # noqa: E731
    return setups[0]._replace(tasks=jax.tree.map(cat, *(s.tasks for s in setups)), keys=cat(*(s.keys for s in setups)),
                              seeds=[x for s in setups for x in s.seeds],
                              assumptions=[a for s in setups for a in s.assumptions])
