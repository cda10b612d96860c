"""The task-diversity setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place): prompts
whose task comes from a finite pool of M tasks, the L-layer linear attention, and at every log step its agreement
with dMMSE and ridge (:mod:`icldyn.components.agreement`) on held-out prompts of the true prior N(0, I_d).

Every M of a grid trains in one program: the pool is padded to the grid's largest M (``PoolTask.pool``) and a
prompt draws its task index uniformly below its seed's M (``PoolTask.size``), so the program's shapes do not depend
on M. The model enters through :func:`learner`: the linear attention or the GPT."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import agreement, draws, gpt
from icldyn.components.linear_attention import LinearTransformer
from icldyn.components.prompts import TEST_KEY, Prompts, held_out_key, make_covariance, sym_sqrt
from icldyn.config import RunConfig
from icldyn.papers.raventos import theory
from icldyn.train.loop import Problem

REFERENCE_PROMPTS = 2000  # held-out prompts the agreement metrics are measured on
POOL_KEY, TRUE_KEY, PROBE_KEY = 7, TEST_KEY, 9999  # folded into a seed's key: its pool, true-prior prompts, probes


class PoolTask(NamedTuple):
    """One seed's law (a pytree): covariates x ~ N(0, Σ), the task pool, its size M, the label noise."""

    sigma_sqrt: jax.Array  # (d, d)
    pool: jax.Array  # (M_max, d): rows ≥ M unused
    size: jax.Array  # () M
    noise_std: jax.Array  # ()


class Learner(NamedTuple):
    """``init(key)``, ``loss(params, batch)`` (training), ``prepare(prompts)``, ``predict(params, prompts)`` → ŷ (b,)
    at each query, ``test_loss(params, prepared)`` (E(ŷ − y)² at the query) and the trainer's ``seed_map``."""

    init: Callable
    loss: Callable
    prepare: Callable
    predict: Callable
    test_loss: Callable
    seed_map: str


def learner(cfg: RunConfig, dtype) -> Learner:
    """The hook: the configured model as a :class:`Learner` — the linear attention, or the GPT of
    :mod:`icldyn.components.gpt` (``model.kind = "pool_gpt"``: trained on the squared error at every x position, as
    Garg et al., arXiv 2208.01066 §3 and Raventós et al.; read at the query)."""
    if cfg.model.kind == "pool_gpt":
        return Learner(**gpt.query_regressor(cfg.data.d, cfg.data.n, *cfg.model.dims(), dtype)._asdict(),
                       prepare=lambda p: p, seed_map=gpt.seed_map())
    m = LinearTransformer.from_config(cfg.model, cfg.data.d, cfg.train.threads)
    return Learner(init=lambda key: m.init(key, dtype), loss=m.loss, prepare=m.prepare,
                   predict=lambda params, p: m.predict(params, m.prepare(p)), test_loss=m.loss,
                   seed_map="vmap" if m.form == "kernel" or jax.default_backend() != "cpu" else "map")


def make_pool(cfg: RunConfig, seed: int, m_max: int) -> np.ndarray:
    """The seed's pool, w_m ~ N(0, I_d), padded to ``m_max`` rows: the first M rows are the pool of size M, so the
    pools of a seed are nested as M grows (arXiv 2306.15063 draws a fresh pool per M)."""
    g = draws.normal(held_out_key(seed, POOL_KEY), (m_max, cfg.data.d), jnp.float64)
    return np.asarray(g)


def sample(task: PoolTask, key: jax.Array, batch: int, n: int, pooled: bool = True) -> Prompts:
    """``batch`` prompts of n examples and a query; the task uniform over the first M pool rows (``pooled``) or from
    N(0, I_d) (the true prior)."""
    kx, kw, ke = jax.random.split(key, 3)
    dtype, d = task.pool.dtype, task.pool.shape[1]
    X = draws.normal(kx, (batch, n + 1, d), dtype) @ task.sigma_sqrt
    if pooled:
        idx = jnp.floor(draws.uniform(kw, (batch,), dtype) * task.size).astype(jnp.int32)
        w = task.pool[jnp.minimum(idx, task.size.astype(jnp.int32) - 1)]
    else:
        w = draws.normal(kw, (batch, d), dtype)
    y = jnp.einsum("bid,bd->bi", X, w) + task.noise_std * draws.normal(ke, (batch, n + 1), dtype)
    return Prompts(X, y)


_draw = jax.jit(sample, static_argnums=(2, 3, 4))  # the held-out sets: one compiled program each


class Setup(NamedTuple):
    problem: Problem
    tasks: PoolTask  # stacked over slots
    tests: tuple  # (pool-task held-out set, true-prior held-out set, agreement.Reference), prepared, stacked
    keys: jax.Array
    refs: list[dict[str, float]]  # per slot: the losses of dMMSE and ridge on both held-out sets


def references(cfg: RunConfig, task: PoolTask, seed: int, M: int) -> tuple[Prompts, Prompts, agreement.Reference,
                                                                             dict[str, float]]:
    """A seed's held-out sets (float64): prompts of pool tasks, of true-prior tasks, the agreement reference on the
    first :data:`REFERENCE_PROMPTS` true-prior prompts (dMMSE and ridge weights), and the algorithms' losses."""
    key = held_out_key(seed, TRUE_KEY)
    pool_p = _draw(task, jax.random.fold_in(key, 1), cfg.data.test_size, cfg.data.n)
    true_p = _draw(task, key, cfg.data.test_size, cfg.data.n, pooled=False)
    pool = np.asarray(task.pool)[:M]
    sigma = float(task.noise_std)
    b = min(REFERENCE_PROMPTS, cfg.data.test_size)
    X, y = np.asarray(true_p.X[:b]), np.asarray(true_p.y[:b])
    probes = np.random.default_rng([seed, PROBE_KEY]).standard_normal((b, 2 * cfg.data.d, cfg.data.d)) @ np.asarray(
        task.sigma_sqrt)
    ref = agreement.Reference(Prompts(X, y), probes,
                              {"dmmse": theory.dmmse_weights(X, y, pool, sigma),
                               "ridge": agreement.algorithm_weights(lambda X, y: theory.ridge(X, y, sigma), X, y)})
    losses = {}
    for name, p in (("pool", pool_p), ("true", true_p)):
        Xp, yp = np.asarray(p.X), np.asarray(p.y)
        losses[f"dmmse_{name}_loss"] = float(np.mean((theory.dmmse(Xp, yp, pool, sigma) - yp[:, -1]) ** 2))
        losses[f"ridge_{name}_loss"] = float(np.mean((theory.ridge(Xp, yp, sigma) - yp[:, -1]) ** 2))
    return pool_p, true_p, ref, losses


def build(cfgs: list[RunConfig], m_max: int) -> Setup:
    """Every grid point's seeds on one slot axis (point-major): pools padded to ``m_max``, held-out sets, the
    algorithms' losses, keys and the Problem (its shapes those of ``cfgs[0]``: the points differ only in M)."""
    cfg = cfgs[0]
    dtype = jnp.float64 if cfg.train.dtype == "float64" else jnp.float32
    lrn = learner(cfg, dtype)
    prepare = jax.jit(lrn.prepare)
    tasks, tests, refs, keys = [], [], [], []
    for c in cfgs:
        for seed in range(c.seed, c.seed + c.seeds):
            sigma_sqrt = sym_sqrt(make_covariance(c.data, seed))
            task = PoolTask(jnp.asarray(sigma_sqrt), jnp.asarray(make_pool(c, seed, m_max)),
                            jnp.asarray(float(c.data.pool_size)), jnp.asarray(c.data.noise_std))
            pool_p, true_p, ref, losses = references(c, task, seed, c.data.pool_size)
            tasks.append(task)
            tests.append((prepare(pool_p), prepare(true_p), ref))
            refs.append(losses)
            keys.append(jax.random.fold_in(jax.random.PRNGKey(seed), 0))
    stack = lambda xs: jax.tree.map(lambda *a: jnp.asarray(np.stack([np.asarray(x) for x in a]), dtype), *xs)

    def evaluate(params, task, test):
        pool_t, true_t, ref = test
        return {"test_loss": lrn.test_loss(params, true_t), "pool_loss": lrn.test_loss(params, pool_t),
                **agreement.agreement(lambda p: lrn.predict(params, p), ref)}

    problem = Problem(init=lambda task, key: lrn.init(key),
                      sample=lambda task, key: lrn.prepare(sample(task, key, cfg.train.batch, cfg.data.n)),
                      loss=lrn.loss, evaluate=evaluate, seed_map=lrn.seed_map)
    return Setup(problem, stack(tasks), stack(tests), jnp.stack(keys), refs)
