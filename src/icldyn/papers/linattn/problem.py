"""The companion paper's setting as a trainer :class:`~icldyn.train.loop.Problem` (built here, one place): the
official code's laws (:mod:`icldyn.components.laws`), the L-layer attention, and the loss landscape the notebooks
measure along training (the full Hessian, smoothness along the gradient and along the optimiser's step)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from icldyn.components import laws as data
from icldyn.components.linear_attention import LinearTransformer, Moments, gdpp_error, resolve_forward
from icldyn.config import RunConfig
from icldyn.train.loop import Problem

TEST_KEY = 99  # the official notebooks' test seed


def model_of(cfg: RunConfig) -> LinearTransformer:
    m = cfg.model
    return LinearTransformer(cfg.data.d, m.layers, m.heads, m.parameterization, m.init_std,
                             resolve_forward(m, cfg.data.d), cfg.train.threads, m.activation)


def landscape(model: LinearTransformer, params, test, hessian: bool = True) -> dict[str, jax.Array]:
    """The loss landscape at ``params`` on the fixed held-out batch: the loss f, ‖∇f‖ and the smoothness along the
    gradient, dᵀHd with d = ∇f/‖∇f‖ (the notebook's direction is the optimiser's step:
    :func:`smoothness_along_update`), one Hessian-vector product; with ``hessian`` also the full Hessian H over
    every trained entry (150 at L = 3, d = 5: exact, no Lanczos needed; 150 Hessian-vector products), the notebook's
    condition number max|diag H| / median|diag H| (plot_condition_number) and H's extreme eigenvalues."""
    f, flat, value, g, hvp = _curvature(model, params, test)
    gn = jnp.linalg.norm(g)
    u = g / gn
    out = {"test_loss": value, "grad_norm_test": gn, "smoothness_along_grad": u @ hvp(u)}
    if hessian:
        H = jax.hessian(f)(flat)
        diag, eig = jnp.abs(jnp.diag(H)), jnp.linalg.eigvalsh(H)
        out |= {"hess_diag_ratio": jnp.max(diag) / jnp.median(diag), "lambda_max": eig[-1], "lambda_min": eig[0]}
    return out


def smoothness_along_update(model: LinearTransformer, before, update, test) -> dict[str, jax.Array]:
    """The notebook's directional smoothness (plot_smoothness_vs_gradnorm): at the parameters θ_t before an
    optimiser step, uᵀ∇²f(θ_t)u along that step's direction u = (θ_{t+1} − θ_t)/‖θ_{t+1} − θ_t‖, and
    ‖∇f(θ_t)‖, on the fixed held-out batch; one Hessian-vector product."""
    from jax.flatten_util import ravel_pytree

    *_, g, hvp = _curvature(model, before, test)
    du = ravel_pytree(update)[0]
    u = du / jnp.linalg.norm(du)
    return {"grad_norm_step": jnp.linalg.norm(g), "smoothness_along_update": u @ hvp(u)}


def _curvature(model: LinearTransformer, params, test):
    """The held-out loss f over the flattened parameters, the flat point, f and ∇f there, and its Hessian-vector
    product v ↦ ∇²f v (linearised once: ∇f is not recomputed per product)."""
    from jax.flatten_util import ravel_pytree

    flat, unravel = ravel_pytree(params)
    loss = held_out_loss(model, test)
    f = lambda v: loss(unravel(v))  # noqa: E731
    (value, g), lin = jax.linearize(jax.value_and_grad(f), flat)
    return f, flat, value, g, lambda v: lin(v)[1]


def held_out_loss(model: LinearTransformer, test):
    """The loss on ``test`` as a function of the parameters, in its cheapest exact form for autodiff twice: for one
    head of linear attention, sparse or relaxed, the d×d GD++ form (``ahn.claims.gdpp_error``: matrix-vector products,
    its Hessian ≈ 4× faster than the moment form's), else the model's JAX form (moments or columns)."""
    if (isinstance(test, Moments) and model.parameterization != "full" and model.heads == 1
            and model.activation == "linear"):
        d = model.d
        S, h, xq = test.S[:, :d, :d], test.S[:, :d, d], test.zq[:, :d]
        Bs = lambda p: p["B"][:-1, 0] if "B" in p else jnp.zeros((0, d, d), S.dtype)  # noqa: E731  B_{L−1} unused
        return lambda p: jnp.mean(gdpp_error(p["A"][:, 0], Bs(p), S, h, xq, test.yq) ** 2)
    pure = model if model.form != "kernel" else dataclasses.replace(
        model, form="moments" if model.reads_moments else "columns")
    return lambda p: pure.loss(p, test)


def problem_of(cfg: RunConfig, model: LinearTransformer, with_landscape: str | None = None) -> Problem:
    """The trainer's view: a fresh batch of ``cfg.data``'s law per step (or every ``resample_every``), the
    in-context loss without ½ (official), and the held-out loss (and, ``with_landscape`` = "hessian" or
    "smoothness", :func:`landscape` with or without the full Hessian; with "smoothness" also the smoothness along
    each chunk's last optimiser step, :func:`smoothness_along_update`)."""
    dtype = jnp.dtype(cfg.train.dtype)

    def evaluate(params, task, test):
        if not with_landscape:
            return {"test_loss": model.loss(params, test)}
        # in pure JAX (test_loss included): the kernel's loss has no second derivatives for the Hessian
        return landscape(model, params, test, with_landscape == "hessian")

    def evaluate_step(before, update, task, test):
        return smoothness_along_update(model, before, update, test)

    return Problem(init=lambda task, key: model.init(key=key, dtype=dtype),
                   sample=lambda task, key: model.prepare(data.sample(cfg.data, key, cfg.train.batch, dtype)),
                   loss=model.loss, evaluate=evaluate, seed_map="vmap" if model.form == "kernel" else "map",
                   evaluate_step=evaluate_step if with_landscape == "smoothness" else None)
