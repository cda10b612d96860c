"""Ahn et al.'s setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place): Gaussian prompts,
the linear transformer, and the paper's structure metrics."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import lsa_kernel as kernel
from icldyn.components.linear_attention import Columns, LinearTransformer, Moments, resolve_sampler
from icldyn.components.metrics import dist_to_identity_batched as dist_to_identity
from icldyn.components.prompts import (
    TEST_KEY,
    VAL_KEY,
    GaussianTask,
    Prompts,
    data_seeds,
    held_out,
    make_task,
    sample_prompts_philox,
    w_law,
)
from icldyn.config import RunConfig
from icldyn.train.loop import Problem


class Setup(NamedTuple):
    model: LinearTransformer
    problem: Problem
    tasks: GaussianTask  # stacked over seeds, training dtype
    tests: object  # prepared held-out sets, stacked over seeds
    test_prompts: list[Prompts]  # per seed, float64 NumPy (for the baselines)
    val_prompts: list[Prompts]
    keys: jax.Array  # (seeds, 2) training keys (from the data seeds: the batches)
    seeds: list[int]
    init_keys: jax.Array  # (seeds, 2) the keys of the initial parameters (from the seeds)


def structure_metrics(model: LinearTransformer, params, task: GaussianTask) -> dict[str, jax.Array]:
    """Per layer: ‖A_ℓ‖_F, Dist(Σ^½A_ℓΣ^½, I), Dist(A_ℓ, I); relaxed/full also Dist(B_ℓ, I)."""
    A = model.A(params)
    rot = task.sigma_sqrt @ A @ task.sigma_sqrt  # (L, d, d)
    out: dict[str, jax.Array] = {}
    for ell in range(model.layers):
        out[f"norm_A{ell}"] = jnp.linalg.norm(A[ell])
        out[f"dist_sigma_A{ell}"] = dist_to_identity(rot[ell])
        out[f"dist_I_A{ell}"] = dist_to_identity(A[ell])
    if model.parameterization != "sparse":
        B = model.B(params)
        for ell in range(model.layers - 1):  # B_{L-1} does not reach the output
            out[f"dist_I_B{ell}"] = dist_to_identity(B[ell])
    return out


def _to_numpy(p: Prompts) -> Prompts:
    """Float64 NumPy copies; waited for first, so that a failed allocation raises XLA's error (np.asarray of a
    failed array aborts the process in jaxlib 0.10: a CHECK in its buffer protocol)."""
    p = jax.block_until_ready(p)
    return Prompts(np.asarray(p.X, np.float64), np.asarray(p.y, np.float64))


def build(cfg: RunConfig) -> Setup:
    """Everything one grid point needs: per-seed tasks, held-out sets, keys, and the Problem. Each seed's data (Σ's
    rotation, held-out sets, training batches) comes from its data seed (``data.seed``), its initial parameters from
    the seed itself."""
    dtype = jnp.float64 if cfg.train.dtype == "float64" else jnp.float32
    model = LinearTransformer.from_config(cfg.model, cfg.data.d, cfg.train.threads)
    seeds = list(range(cfg.seed, cfg.seed + cfg.seeds))
    dseeds = data_seeds(cfg.data, seeds)
    tasks64 = [make_task(cfg.data, s) for s in dseeds]
    tasks = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs), dtype), *tasks64)

    tests_raw = [held_out(cfg.data, t, s, TEST_KEY, dtype) for t, s in zip(tasks64, dseeds)]
    tests = jax.tree.map(lambda *xs: jnp.stack(xs), *[model.prepare(p) for p in tests_raw])
    vals = [_to_numpy(held_out(cfg.data, t, s, VAL_KEY, dtype)) for t, s in zip(tasks64, dseeds)]
    key_of = lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 0)  # noqa: E731
    keys, init_keys = jnp.stack([key_of(s) for s in dseeds]), jnp.stack([key_of(s) for s in seeds])
    law = w_law(cfg.data)

    c_sampler = resolve_sampler(cfg, model.form) == "kernel"

    def sample(task, key):  # the same prompts either way (Philox4x32-10): kernel.sample_moments or its JAX twin
        if c_sampler and model.reads_moments:
            return Moments(*kernel.sample_moments(task, key, cfg.train.batch, cfg.data.n, cfg.train.threads))
        if c_sampler:
            return Columns(*kernel.sample_moments(task, key, cfg.train.batch, cfg.data.n, cfg.train.threads,
                                                  columns=True))
        return model.prepare(sample_prompts_philox(task, key=key, batch=cfg.train.batch, n=cfg.data.n, law=law))

    def evaluate(params, task, test):
        return {"test_loss": model.loss(params, test), **structure_metrics(model, params, task)}

    problem = Problem(init=lambda task, key: model.init(key=key, dtype=dtype), sample=sample,
                      loss=model.loss, evaluate=evaluate,
                      seed_map="vmap" if model.form == "kernel" or jax.default_backend() != "cpu" else "map")
    return Setup(model, problem, tasks, tests, [_to_numpy(p) for p in tests_raw], vals, keys, seeds, init_keys)


def stack(setups: list[Setup]) -> Setup:
    """Several runs' setups on one seed axis: one program for runs of the same shapes that differ in their
    seeds or data law (Σ, task prior, noise)."""
    cat = lambda *xs: jnp.concatenate(xs)  # noqa: E731
    return setups[0]._replace(tasks=jax.tree.map(cat, *(s.tasks for s in setups)),
                              tests=jax.tree.map(cat, *(s.tests for s in setups)),
                              test_prompts=[p for s in setups for p in s.test_prompts],
                              val_prompts=[p for s in setups for p in s.val_prompts],
                              keys=cat(*(s.keys for s in setups)), seeds=[x for s in setups for x in s.seeds],
                              init_keys=cat(*(s.init_keys for s in setups)))
