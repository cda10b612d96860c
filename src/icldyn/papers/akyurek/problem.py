"""The algorithm-trajectory setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place):
Gaussian prompts on an anisotropic Σ, the L-layer linear transformer, and at every log step its agreement with
the algorithms (SPD, ILWD, sensitivity cosine and difference; :mod:`icldyn.components.agreement`) on a fixed
held-out prompt set.

The model enters through one hook, :func:`learner`: ``(init, loss, prepare, predict, …)`` of the configured model
kind — the linear transformer, or the GPT of :mod:`icldyn.components.gpt` (``predict(params, X, y)`` → predictions
at every x position, read at the query); everything else (the reference, the metrics, the figure) is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import agreement, gpt
from icldyn.components import lsa_kernel as kernel
from icldyn.components.linear_attention import Columns, LinearTransformer, Moments, resolve_sampler
from icldyn.components.prompts import (
    TEST_KEY,
    VAL_KEY,
    GaussianTask,
    Prompts,
    held_out_key,
    make_task,
    sample_prompts,
    sample_prompts_philox,
)
from icldyn.config import RunConfig
from icldyn.train.loop import Problem

REFERENCE_PROMPTS = 2000  # held-out prompts the agreement metrics are measured on (the first of the test set)
PROBES_PER_DIM = 2  # ILWD's probe queries per context: K = 2d
PROBE_KEY = 9999  # folded into a seed's key for its probe queries


class Learner(NamedTuple):
    """What the trajectory needs of a model: ``init(key)``, ``loss(params, batch)`` (training), ``prepare(prompts)``
    (a batch from raw prompts), ``predict(params, prompts)`` → ŷ (b,) at each query (differentiable in the prompts'
    X: the sensitivity), ``test_loss(params, prepared)`` (E(ŷ − y)² at the query), ``sample(task, key, batch, n)``
    (a prepared training batch) and the trainer's ``seed_map``."""

    init: Callable
    loss: Callable
    prepare: Callable
    predict: Callable
    test_loss: Callable
    sample: Callable
    seed_map: str


def depth(cfg: RunConfig) -> int:
    """The model's layers L: the steps of the GD algorithms it is held against."""
    return cfg.model.dims()[1] if cfg.model.kind == "gpt" else cfg.model.layers


def learner(cfg: RunConfig, dtype) -> Learner:
    """The hook: the configured model as a :class:`Learner` — the L-layer linear transformer, or the GPT
    (:mod:`icldyn.components.gpt`: trained on the squared error at every x position, as Garg et al., arXiv
    2208.01066 §3; read at the query)."""
    if cfg.model.kind == "gpt":
        return Learner(**gpt.query_regressor(cfg.data.d, cfg.data.n, *cfg.model.dims(), dtype)._asdict(),
                       prepare=lambda p: p, seed_map=gpt.seed_map(),
                       sample=lambda task, key, batch, n: sample_prompts_philox(task, key=key, batch=batch, n=n))
    m = LinearTransformer.from_config(cfg.model, cfg.data.d, cfg.train.threads)
    c_sampler = resolve_sampler(cfg, m.form) == "kernel"

    def sample(task, key, batch, n):  # the same prompts either way (Philox4x32-10): the C sampler or its JAX twin
        if c_sampler and m.reads_moments:
            return Moments(*kernel.sample_moments(task, key, batch, n, cfg.train.threads))
        if c_sampler:
            return Columns(*kernel.sample_moments(task, key, batch, n, cfg.train.threads, columns=True))
        return m.prepare(sample_prompts_philox(task, key=key, batch=batch, n=n))

    return Learner(init=lambda key: m.init(key, dtype), loss=m.loss, prepare=m.prepare,
                   predict=lambda params, p: m.predict(params, m.prepare(p)), test_loss=m.loss, sample=sample,
                   seed_map="vmap" if m.form == "kernel" or jax.default_backend() != "cpu" else "map")


class Setup(NamedTuple):
    problem: Problem
    tasks: GaussianTask  # stacked over seeds
    tests: tuple  # (prepared held-out set, agreement.Reference), stacked over seeds
    keys: jax.Array
    seeds: list[int]
    algorithms: tuple[str, ...]  # the reference algorithms, in metric order


def probes(task: GaussianTask, seed: int, b: int, K: int) -> np.ndarray:
    """K probe queries x′ ~ N(0, Σ) per context (b, K, d), float64, from the seed's probe stream."""
    g = np.random.default_rng([seed, PROBE_KEY]).standard_normal((b, K, task.sigma.shape[0]))
    return g @ np.asarray(task.sigma_sqrt, np.float64)


def build(cfg: RunConfig) -> Setup:
    """Per-seed tasks (Σ), held-out sets, the algorithms' weights on them (float64), keys and the Problem."""
    dtype = jnp.float64 if cfg.train.dtype == "float64" else jnp.float32
    lrn = learner(cfg, dtype)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    tasks64 = [make_task(cfg.data, s) for s in seeds]
    tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks64)
    tests, names = [], ()
    draw = jax.jit(sample_prompts, static_argnames=("batch", "n"))  # = held_out, one compiled program
    prepare = jax.jit(lrn.prepare)
    for task64, seed in zip(tasks64, seeds):
        task = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), task64)
        test, val = (draw(task, key=held_out_key(seed, which), batch=cfg.data.test_size, n=cfg.data.n)
                     for which in (TEST_KEY, VAL_KEY))
        b = min(REFERENCE_PROMPTS, cfg.data.test_size)
        ref_prompts = Prompts(test.X[:b], test.y[:b])
        algs = agreement.gd_family(np.asarray(task.sigma), depth(cfg), val)
        ref = agreement.reference(ref_prompts, probes(task, seed, b, PROBES_PER_DIM * cfg.data.d), algs)
        names = tuple(algs)
        tests.append((prepare(Prompts(test.X.astype(dtype), test.y.astype(dtype))), ref))
    tests = jax.tree.map(lambda *xs: jnp.asarray(np.stack([np.asarray(x) for x in xs]), dtype), *tests)
    keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])

    def sample(task, key):
        return lrn.sample(task, key, cfg.train.batch, cfg.data.n)

    def evaluate(params, task, test):
        prepared, ref = test
        return {"test_loss": lrn.test_loss(params, prepared),
                **agreement.agreement(lambda p: lrn.predict(params, p), ref)}

    problem = Problem(init=lambda task, key: lrn.init(key), sample=sample, loss=lrn.loss, evaluate=evaluate,
                      seed_map=lrn.seed_map)
    return Setup(problem, tasks, tests, keys, seeds, names)
