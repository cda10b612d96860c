"""Huang, Cheng, Liang's setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place): feature
tokens, one-layer softmax attention, and the exact population metrics. ``train.oracle = population`` runs GD on the
K×K scores with the exact expectation over feature counts (:mod:`icldyn.papers.huang.theory`); ``counts`` the same
engine on ``train.batch`` fresh multinomial draws of the counts every step (an unbiased estimate of the population
gradient whatever N: the sampled-counts engine); ``sampled`` runs GD on the full model's Q (d×d) with fresh
Monte-Carlo prompts."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components.feature_attention import SoftmaxICL
from icldyn.components.features import FeatureTask, make_feature_task, sample_feature_prompts
from icldyn.config import RunConfig
from icldyn.papers.huang import theory
from icldyn.train.loop import Problem

FULL_B = 8  # log every B_{k,n} up to this K; above it B_{k,1} and the mean of the others


class HuangTask(NamedTuple):
    V: jax.Array  # (d, K)
    p: jax.Array  # (K,)
    counts: jax.Array  # (M, K) count vectors of the population engine
    weights: jax.Array  # (M,)


class Setup(NamedTuple):
    problem: Problem
    tasks: HuangTask
    keys: jax.Array
    seeds: list[int]
    exact: bool  # counts enumerated (True) or Monte Carlo over counts
    tracked: list[int]  # features whose curves are logged


def tracked_features(K: int) -> list[int]:
    return list(range(K)) if K <= FULL_B else [0, 1, K - 1]


def metrics_of(s, nu, task: HuangTask, tracked: list[int]) -> dict[str, jax.Array]:
    """Exact population metrics of scores s: loss, and per tracked feature A_k, B_{k,n}, E[Attn_k], L_k."""
    K = s.shape[0]
    Lk = theory.per_query_loss(s, task.counts, task.weights, nu)
    att = theory.expected_attention(s, task.counts, task.weights)
    out = {"loss": task.p @ Lk, "attn_mean": jnp.mean(att), "attn_min": jnp.min(att)}
    for k in tracked:
        out[f"A{k}"], out[f"attn{k}"], out[f"L{k}"] = s[k, k], att[k], Lk[k]
        if K <= FULL_B:
            out.update({f"B{k}_{n}": s[k, n] for n in range(K) if n != k})
        else:
            if k != 0:
                out[f"B{k}_0"] = s[k, 0]
            rest = [n for n in range(K) if n not in (k, 0)]
            out[f"B{k}_rest"] = jnp.mean(s[k, jnp.asarray(rest)])
    return out


def build(cfg: RunConfig) -> Setup:
    dtype = jnp.float64 if cfg.train.dtype == "float64" else jnp.float32
    d, K, N = cfg.data.d, cfg.data.features, cfg.data.n
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    model = SoftmaxICL(d, cfg.model.train_value)
    population = cfg.train.oracle in ("population", "counts")  # GD on the K×K scores
    fresh = cfg.train.oracle == "counts"
    tasks, exact = [], True
    for s in seeds:
        ft = make_feature_task(cfg.data, s)
        cs, exact = theory.count_set(ft.p, N, samples=cfg.train.count_samples, seed=s)
        tasks.append(HuangTask(ft.V, ft.p, cs.counts, cs.weights))
    tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks)
    keys = jnp.stack([jax.random.fold_in(jax.random.PRNGKey(s), 0) for s in seeds])
    tracked = tracked_features(K)

    def init(task, key):
        if population:  # GD from Q = 0 is GD on the scores from 0
            params = {"s": jnp.zeros((K, K), dtype)}
            return {**params, "nu": jnp.ones((), dtype)} if cfg.model.train_value else params
        return model.init(key, dtype)

    def sample(task: HuangTask, key):
        if fresh:  # c ~ Multinomial(N, p), train.batch of them, equally weighted
            counts = jax.random.multinomial(key, N, jnp.broadcast_to(task.p, (cfg.train.batch, K)), dtype=dtype)
            return counts, jnp.full((cfg.train.batch,), 1.0 / cfg.train.batch, dtype), task.p
        if population:
            return task.counts, task.weights, task.p
        return sample_feature_prompts(FeatureTask(task.V, task.p), key, cfg.train.batch, N)

    def loss(params, batch):
        if population:
            counts, weights, p = batch
            return p @ theory.per_query_loss(params["s"], counts, weights, model.nu(params))
        return model.loss(params, batch)

    def evaluate(params, task, test):
        s = params["s"] if population else theory.scores_of(params["Q"], task.V)
        return metrics_of(s, model.nu(params), task, tracked)

    problem = Problem(init=init, sample=sample, loss=loss, evaluate=evaluate, seed_map="vmap")
    return Setup(problem, tasks, keys, seeds, exact, tracked)
