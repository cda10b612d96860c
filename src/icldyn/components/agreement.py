"""Model-against-algorithm agreement: which in-context algorithm does a trained model run? Pure JAX functions of
predictions (or of a ``predict`` closure) on a fixed held-out prompt set, loggable at every log step.

A learner maps a context D = (x_1, y_1, …, x_n, y_n) and a query x′ to a prediction f(D)(x′). With a second
learner g (an algorithm: least squares, ridge, L steps of (preconditioned) gradient descent, …):

.. math::
    \\mathrm{SPD}(f, g) = E_{D, x′}\\big(f(D)(x′) − g(D)(x′)\\big)^2
    \\qquad\\text{(squared prediction difference)}

.. math::
    \\mathrm{ILWD}(f, g) = E_D\\,\\|\\hat w_f(D) − \\hat w_g(D)\\|_2^2,\\qquad
    \\hat w_f(D) = \\arg\\min_w \\sum_{k=1}^K \\big(f(D)(x′_k) − w^⊤x′_k\\big)^2
    \\qquad\\text{(implicit linear weight difference)}

— the learner's implicit linear weights, fitted to its own predictions on K probe queries x′_k of the same context
(arXiv 2211.15661 §4.1) — and, with the sensitivity s_f(D, x′) = ∂f(D)(x′)/∂x′ (arXiv 2212.07677 §3, "model cos"
and "model diff"),

.. math::
    \\cos(f, g) = E_{D, x′}\\frac{⟨s_f, s_g⟩}{\\|s_f\\|\\,\\|s_g\\|},\\qquad
    Δs(f, g) = E_{D, x′}\\,\\|s_f − s_g\\|_2 .

Every algorithm here predicts ⟨ŵ_g(D), x′⟩ with weights ŵ_g(D) of the context alone, so its implicit weights and
its sensitivity are both ŵ_g(D), read off exactly by querying the basis vectors (:func:`algorithm_weights`); they
are computed once, in float64, from :mod:`icldyn.components.baselines` (:func:`reference`). A model's are measured
on the same prompts at every log step (:func:`agreement`), inside the trainer's compiled program.

Prompts in row convention (:class:`~icldyn.components.prompts.Prompts`): X (b, n+1, d) with the query last, y
(b, n+1) (the query's label is never read). Definitions and citations: ``docs/metrics.md``.

References:
    Akyürek, Schuurmans, Andreas, Ma, Zhou, "What learning algorithm is in-context learning? Investigations with
    linear models", arXiv 2211.15661 (ICLR 2023), §4.1 (SPD, ILWD).
    von Oswald, Niklasson, Randazzo, Sacramento, Mordvintsev, Zhmoginov, Vladymyrov, "Transformers learn in-context
    by gradient descent", arXiv 2212.07677 (ICML 2023), §3 (sensitivity cosine and difference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import baselines
from icldyn.components.prompts import Prompts

Predict = Callable[[Prompts], jax.Array]  # prompts (b, n+1, d) -> ŷ (b,) at each query
Algorithm = Callable[[np.ndarray, np.ndarray], np.ndarray]  # float64 (X, y) -> ŷ (b,), linear in the query


class Reference(NamedTuple):
    """A fixed held-out set and the algorithms' weights on it (a pytree: stacked over seeds, cast by the trainer)."""

    prompts: Prompts  # X (b, n+1, d), y (b, n+1)
    probes: jax.Array  # (b, K, d) probe queries x′_k per context, K ≥ d (ILWD's fit)
    weights: dict[str, jax.Array]  # algorithm → ŵ_g(D) (b, d): its prediction ⟨ŵ_g, x′⟩, implicit weights, sensitivity


# ---------------------------------------------------------------- the four measures


def spd(pred: jax.Array, ref: jax.Array) -> jax.Array:
    """SPD: mean of (f − g)² over prompts (arXiv 2211.15661 §4.1)."""
    return jnp.mean(jnp.square(pred - ref))


def ilwd(w: jax.Array, w_ref: jax.Array) -> jax.Array:
    """ILWD: mean of ‖ŵ_f − ŵ_g‖² over contexts; ``w``, ``w_ref`` (b, d) (arXiv 2211.15661 §4.1)."""
    return jnp.mean(jnp.sum(jnp.square(w - w_ref), axis=-1))


def sensitivity_cosine(s: jax.Array, s_ref: jax.Array) -> jax.Array:
    """Mean cosine between sensitivities (b, d) (arXiv 2212.07677 §3, "model cos")."""
    dot = jnp.sum(s * s_ref, axis=-1)
    return jnp.mean(dot / (jnp.linalg.norm(s, axis=-1) * jnp.linalg.norm(s_ref, axis=-1)))


def sensitivity_difference(s: jax.Array, s_ref: jax.Array) -> jax.Array:
    """Mean ‖s_f − s_g‖₂ over prompts (arXiv 2212.07677 §3, "model diff")."""
    return jnp.mean(jnp.linalg.norm(s - s_ref, axis=-1))


# ---------------------------------------------------------------- a learner's predictions, weights, sensitivity


def with_queries(p: Prompts, queries: jax.Array) -> Prompts:
    """Every context of ``p`` with each of its K queries ``queries`` (b, K, d): b·K prompts, context-major; the
    queries' labels zero (never read)."""
    b, K, d = queries.shape
    n = p.X.shape[1] - 1
    ctx_X = jnp.broadcast_to(p.X[:, None, :n], (b, K, n, d))
    X = jnp.concatenate([ctx_X, queries[:, :, None, :]], axis=2).reshape(b * K, n + 1, d)
    y = jnp.concatenate([jnp.broadcast_to(p.y[:, None, :n], (b, K, n)), jnp.zeros((b, K, 1), p.y.dtype)], axis=2)
    return Prompts(X, y.reshape(b * K, n + 1))


def implicit_weights(predict: Predict, p: Prompts, probes: jax.Array) -> jax.Array:
    """ŵ_f(D) (b, d): the least-squares linear fit of the learner's own predictions at the K probe queries of each
    context (arXiv 2211.15661 §4.1), by the normal equations (K ≥ d probes in general position)."""
    b, K, _ = probes.shape
    f = predict(with_queries(p, probes)).reshape(b, K)
    G = jnp.einsum("bki,bkj->bij", probes, probes)  # (b, d, d) Σ_k x′_k x′_kᵀ
    return jnp.linalg.solve(G, jnp.einsum("bki,bk->bi", probes, f)[..., None])[..., 0]


def sensitivity(predict: Predict, p: Prompts) -> jax.Array:
    """s_f = ∂f(D)(x_q)/∂x_q at each prompt's query (b, d) (arXiv 2212.07677 §3): the prompts are independent, so
    one gradient of Σ_b f_b gives every prompt's."""
    grad = jax.grad(lambda X: jnp.sum(predict(Prompts(X, p.y))))(p.X)
    return grad[:, -1]


def agreement(predict: Predict, ref: Reference) -> dict[str, jax.Array]:
    """Per algorithm g of ``ref``: ``spd_g``, ``ilwd_g``, ``cos_g`` (sensitivity cosine) and ``sdiff_g``
    (sensitivity difference) of the learner ``predict`` on the reference's prompts; pure JAX (jit, vmap over
    seeds)."""
    xq = ref.prompts.X[:, -1]
    pred = predict(ref.prompts)
    w = implicit_weights(predict, ref.prompts, ref.probes)
    s = sensitivity(predict, ref.prompts)
    out: dict[str, jax.Array] = {}
    for name, w_g in ref.weights.items():
        out[f"spd_{name}"] = spd(pred, jnp.einsum("bd,bd->b", w_g, xq))
        out[f"ilwd_{name}"] = ilwd(w, w_g)
        out[f"cos_{name}"] = sensitivity_cosine(s, w_g)
        out[f"sdiff_{name}"] = sensitivity_difference(s, w_g)
    return out


# ---------------------------------------------------------------- the algorithms' side, float64 NumPy, once


def algorithm_weights(algorithm: Algorithm, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ŵ_g(D) (b, d) of an algorithm linear in the query, ŷ = ⟨ŵ_g(D), x_q⟩: its predictions at the queries
    e_1 … e_d of each context (exact; float64)."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    b, m, d = X.shape
    Xe = np.repeat(X[:, None], d, axis=1).copy()  # (b, d, n+1, d)
    Xe[:, :, -1, :] = np.eye(d)
    ye = np.repeat(y[:, None], d, axis=1)
    return np.asarray(algorithm(Xe.reshape(b * d, m, d), ye.reshape(b * d, m)), np.float64).reshape(b, d)


def reference(prompts: Prompts, probes: np.ndarray, algorithms: dict[str, Algorithm]) -> Reference:
    """The fixed held-out set of :func:`agreement`: prompts, probes and each algorithm's weights (float64)."""
    X, y = np.asarray(prompts.X, np.float64), np.asarray(prompts.y, np.float64)
    return Reference(Prompts(X, y), np.asarray(probes, np.float64),
                     {name: algorithm_weights(alg, X, y) for name, alg in algorithms.items()})


def tune_steps(X: np.ndarray, y: np.ndarray, base: np.ndarray, steps: int) -> list[float]:
    """Per-step sizes η_ℓ minimising the validation loss of ``steps`` steps of GD preconditioned by ``base``
    (A_ℓ = η_ℓ·base): the best constant step (:func:`~icldyn.components.baselines.tune_step`), then Nelder–Mead
    over log η_ℓ from it."""
    from scipy.optimize import minimize

    eta = baselines.tune_step(X, y, base, steps)
    if steps == 1:
        return [eta]
    stats = baselines.context_stats(X, y)

    def loss(log_eta: np.ndarray) -> float:
        with np.errstate(over="ignore", invalid="ignore"):
            val = baselines.mse(baselines.pgd_from_stats(*stats, [np.exp(e) * base for e in log_eta]), y)
        return val if np.isfinite(val) else 1e300

    res = minimize(loss, np.full(steps, np.log(eta)), method="Nelder-Mead", options={"xatol": 1e-4, "fatol": 1e-10})
    return [float(e) for e in np.exp(res.x)]


def steps_of(base: np.ndarray, steps: int, val: Prompts) -> Algorithm:
    """``steps`` steps of GD preconditioned by ``base`` from w₀ = 0 on all n context examples, A_ℓ = η_ℓ·base with
    the step sizes tuned on the validation prompts ``val`` (:func:`tune_steps`)."""
    etas = tune_steps(np.asarray(val.X, np.float64), np.asarray(val.y, np.float64), base, steps)
    return lambda X, y: baselines.preconditioned_gd(X, y, [eta * base for eta in etas])


def gd_family(sigma: np.ndarray, steps: int, val: Prompts) -> dict[str, Algorithm]:
    """The algorithms an L-layer linear transformer is compared with (arXiv 2306.00297 §5 and Theorem 3; arXiv
    2211.15661 §4): ``gd`` (L steps, A_ℓ = η_ℓI), ``pgd`` (L steps, A_ℓ = η_ℓΣ⁻¹), each with its steps tuned on
    ``val``; ``gd1`` and ``pgd1`` (one tuned step of each, where L > 1); ``ols`` (least squares)."""
    out: dict[str, Algorithm] = {}
    for name, base in (("gd", np.eye(sigma.shape[0])), ("pgd", np.linalg.inv(sigma))):
        out[name] = steps_of(base, steps, val)
        if steps > 1:
            out[f"{name}1"] = steps_of(base, 1, val)
    out["ols"] = baselines.ols
    return out
