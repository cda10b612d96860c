"""Garg et al.'s training set-up (arXiv 2208.01066 §3) as a trainer :class:`~icldyn.train.loop.Problem`, built in
this one place: the GPT of :mod:`icldyn.components.gpt` on a function class (with its curriculum) or on any prompt
law icldyn has (the seeds' Gaussian prompts, the companion paper's laws), the loss at every prefix."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import function_classes as fc
from icldyn.components import gpt, laws
from icldyn.components.prompts import TEST_KEY, VAL_KEY, Prompts, held_out_key, make_task, sample_prompts
from icldyn.config import RunConfig
from icldyn.train.loop import Problem


LINEAR = ("linear_regression", "noisy_linear_regression", "prompts")  # the linear laws (Garg et al.'s Figure 2)


class Batch(NamedTuple):
    prompts: Prompts  # X (b, n + 1, d), y (b, n + 1)
    points: jax.Array  # the curriculum's prompt length: the loss counts positions < points


def is_function_class(cfg: RunConfig) -> bool:
    return cfg.data.kind in fc.CLASSES


def normaliser(cfg: RunConfig) -> float:
    """What errors are divided by: E f(x)² of a function class (d for the regression classes, Garg et al.'s
    squared error / d), d for the Gaussian prompt laws."""
    return fc.second_moment(cfg.data) if is_function_class(cfg) else float(cfg.data.d)


def sampler(cfg: RunConfig, seed: int, dtype) -> tuple[object, Callable[..., Prompts]]:
    """(the seed's task pytree, sample(task, key, batch, step) -> Prompts) for the configured data law."""
    d = cfg.data
    if is_function_class(cfg):
        return jnp.zeros((), dtype), lambda task, key, batch, step: fc.sample(
            d, key, batch, fc.stage(d, step).dims, dtype)
    if d.kind == "prompts":
        task = jax.tree.map(lambda a: jnp.asarray(a, dtype), make_task(d, seed))
        return task, lambda task, key, batch, step: sample_prompts(task, key=key, batch=batch, n=d.n)
    if d.kind == "laws":
        return jnp.zeros((), dtype), lambda task, key, batch, step: laws.sample(d, key, batch, dtype)
    raise ValueError(f"model.kind = 'gpt' reads {', '.join(gpt.GPTModel.data_kinds)}, not data.kind = {d.kind!r}")


def points_at(cfg: RunConfig, step) -> jax.Array:
    return fc.stage(cfg.data, step).points if is_function_class(cfg) else jnp.asarray(cfg.data.n + 1, jnp.int32)


def position_loss(cfg: RunConfig, pred: jax.Array, y: jax.Array) -> jax.Array:
    """Per-position training loss: squared error, or for linear classification the cross-entropy of σ(ŷ) against
    (y + 1)/2 (Garg et al.'s training metrics)."""
    if cfg.data.kind == "linear_classification":
        return -(jnp.where(y > 0, jax.nn.log_sigmoid(pred), jax.nn.log_sigmoid(-pred)))
    return jnp.square(pred - y)


def position_error(cfg: RunConfig, pred, y):
    """Per-position evaluation error: squared error / the normaliser, or the 0-1 error of sign(ŷ) (classification)."""
    if cfg.data.kind == "linear_classification":
        return (jnp.sign(pred) != y).astype(pred.dtype)
    return jnp.square(pred - y) / normaliser(cfg)


class Setup(NamedTuple):
    problem: Problem
    tasks: object
    tests: Prompts  # stacked over seeds
    vals: Prompts
    keys: jax.Array
    seeds: list[int]
    n_head: int


def build(cfg: RunConfig) -> Setup:
    dtype = jnp.dtype(cfg.train.dtype)
    E, L, H = cfg.model.dims()
    m = cfg.data.n + 1
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    made = [sampler(cfg, s, dtype) for s in seeds]
    draw = made[0][1]
    final = 2**30  # a step past every curriculum stage: held-out prompts are the last stage's
    size = cfg.data.test_size
    held = lambda which: [draw(t, held_out_key(s, which), size, final) for (t, _), s in zip(made, seeds)]  # noqa: E731
    stack = lambda xs: jax.tree.map(lambda *a: jnp.stack(a), *xs)  # noqa: E731
    tasks, tests, vals = stack([t for t, _ in made]), stack(held(TEST_KEY)), stack(held(VAL_KEY))
    keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])

    def loss(params, batch: Batch):
        p = batch.prompts
        per = position_loss(cfg, gpt.predict(params, p.X, p.y, H), p.y)
        keep = (jnp.arange(m) < batch.points).astype(per.dtype)
        return jnp.sum(per * keep) / (per.shape[0] * batch.points)

    def sample(task, key, step):
        return Batch(draw(task, key, cfg.train.batch, step), points_at(cfg, step))

    def evaluate(params, task, test: Prompts):
        pred = gpt.predict(params, test.X, test.y, H)
        err = position_error(cfg, pred, test.y).mean(0)
        return {"test_loss": position_loss(cfg, pred, test.y).mean(), "error": err.mean(), "error_last": err[-1]}

    problem = Problem(init=lambda task, key: gpt.init(key, cfg.data.d, m, E, L, H, dtype), sample=sample, loss=loss,
                      evaluate=evaluate, seed_map=gpt.seed_map(), stepped=True)
    return Setup(problem, tasks, tests, vals, keys, seeds, H)


def numpy_prompts(p: Prompts, i: int) -> Prompts:
    """Seed ``i``'s prompts as float64 NumPy (for the baselines); waited for first, so that a failed allocation raises
    XLA's error rather than aborting in NumPy's buffer protocol."""
    X, y = jax.block_until_ready((p.X[i], p.y[i]))
    return Prompts(np.asarray(X, np.float64), np.asarray(y, np.float64))
