"""The baseline zoo of *What can transformers learn in-context?* (NeurIPS 2022, arXiv 2208.01066 §3-4; their
``src/models.py``), evaluated at every prefix of a prompt: for prompts X (b, m, d), y (b, m), each algorithm
returns (b, m) predictions, the i-th made from the points before it, (x_j, y_j)_{j<i}, at x_i (ŷ₀ = 0: nothing seen). That is exactly what a causal
transformer's i-th output sees, so every curve of a figure is on the same prompts and the same footing.

Vectorised in ``jax.numpy`` over prompts and prefixes: least squares (minimum norm), ridge (the posterior mean under
w ~ N(0, I) with noise σ² at λ = σ²), k-nearest neighbours, averaging, gradient descent and preconditioned GD with
steps tuned per prefix, and a two-layer ReLU network trained by Adam. Lasso, greedy trees and gradient-boosted trees
call scikit-learn (the ``trees`` extra) prompt by prompt, as arXiv 2208.01066 do.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from icldyn.components import draws
from icldyn.errors import ConfigError

Algorithm = Callable[[jax.Array, jax.Array], jax.Array]  # (X (b, m, d), y (b, m)) -> (b, m)
LASSO_ALPHAS = (1.0, 0.1, 0.01, 0.001, 0.0001)  # arXiv 2208.01066's grid


def _prefix_stats(X: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    """S_i = Σ_{j<i} x_j x_jᵀ and h_i = Σ_{j<i} y_j x_j (exclusive prefix sums)."""
    S = jnp.cumsum(jnp.einsum("bmi,bmj->bmij", X, X), axis=1) - jnp.einsum("bmi,bmj->bmij", X, X)
    h = jnp.cumsum(X * y[..., None], axis=1) - X * y[..., None]
    return S, h


def _mask(m: int, dtype) -> jax.Array:
    """(m, m): row i keeps the points j < i."""
    return jnp.tril(jnp.ones((m, m), dtype), k=-1)


def least_squares(X: jax.Array, y: jax.Array) -> jax.Array:
    """Minimum-norm least squares ŵ_i = X_{<i}⁺ y_{<i} (the posterior mean for noiseless y = wᵀx, w ~ N(0, I))."""
    M = _mask(X.shape[1], X.dtype)

    def one(Xb, yb):
        W = jax.vmap(lambda row: jnp.linalg.pinv(Xb * row[:, None]) @ (yb * row))(M)  # (m, d): ŵ_i per position
        return jnp.einsum("md,md->m", Xb, W)

    return jax.vmap(one)(X, y)


def ridge(X: jax.Array, y: jax.Array, lam: float) -> jax.Array:
    """ŵ_i = (S_i + λI)⁻¹ h_i: the posterior mean of w ~ N(0, I) under noise σ² at λ = σ² (the Bayes predictor
    of noisy linear regression)."""
    S, h = _prefix_stats(X, y)
    w = jnp.linalg.solve(S + lam * jnp.eye(X.shape[-1], dtype=X.dtype), h[..., None])[..., 0]
    return jnp.einsum("bmd,bmd->bm", X, w)


def averaging(X: jax.Array, y: jax.Array) -> jax.Array:
    """ŵ_i = (1/(i−1)) Σ_{j<i} y_j x_j (arXiv 2208.01066's ``AveragingModel``)."""
    _, h = _prefix_stats(X, y)
    count = jnp.maximum(jnp.arange(X.shape[1]), 1).astype(X.dtype)
    return jnp.einsum("bmd,bmd->bm", X, h) / count


def nearest_neighbours(X: jax.Array, y: jax.Array, k: int = 3) -> jax.Array:
    """The mean label of the min(k, i−1) nearest earlier points (Euclidean; arXiv 2208.01066's ``NNModel``, k = 3)."""
    m = X.shape[1]
    dist = jnp.sum(jnp.square(X[:, :, None, :] - X[:, None, :, :]), -1)  # (b, m, m)
    earlier = _mask(m, bool).astype(bool)
    neg, idx = jax.lax.top_k(jnp.where(earlier, -dist, -jnp.inf), min(k, m))
    valid = jnp.isfinite(neg)
    labels = jnp.take_along_axis(y[:, None, :], idx, axis=2)
    return jnp.sum(jnp.where(valid, labels, 0.0), -1) / jnp.maximum(valid.sum(-1), 1)


def gradient_descent(X: jax.Array, y: jax.Array, eta: jax.Array, steps: int = 1,
                     P: jax.Array | None = None) -> jax.Array:
    """``steps`` of (preconditioned) GD from w = 0 on each prefix's loss (1/2(i−1)) Σ_{j<i} (wᵀx_j − y_j)²,
    w ← w − η P (S_i w − h_i)/(i − 1); ``eta`` a scalar or one step per position (m,)."""
    S, h = _prefix_stats(X, y)
    count = jnp.maximum(jnp.arange(X.shape[1]), 1).astype(X.dtype)[None, :, None]
    eta = jnp.broadcast_to(jnp.asarray(eta, X.dtype), (X.shape[1],))[None, :, None]
    P = jnp.eye(X.shape[-1], dtype=X.dtype) if P is None else P
    w = jnp.zeros_like(h)
    for _ in range(steps):
        w = w - eta * jnp.einsum("ij,bmj->bmi", P, jnp.einsum("bmij,bmj->bmi", S, w) - h) / count
    return jnp.einsum("bmd,bmd->bm", X, w)


def tuned_step(X_val: jax.Array, y_val: jax.Array, steps: int = 1, P: jax.Array | None = None,
               grid: np.ndarray | None = None) -> jax.Array:
    """GD's step per position, the best of a log grid on held-out prompts (the zoo tunes each algorithm, as arXiv
    2208.01066 tunes Lasso's α): (m,)."""
    grid = np.geomspace(1e-3, 2.0, 40) if grid is None else grid
    errs = jnp.stack([jnp.mean(jnp.square(gradient_descent(X_val, y_val, e, steps, P) - y_val), 0) for e in grid])
    return jnp.asarray(grid, X_val.dtype)[jnp.argmin(jnp.nan_to_num(errs, nan=jnp.inf), axis=0)]


def two_layer_network(X: jax.Array, y: jax.Array, key: jax.Array, hidden: int = 100, steps: int = 100,
                      lr: float = 5e-3) -> jax.Array:
    """A two-layer ReLU network trained by ``steps`` of full-batch Adam on each prefix from PyTorch's default
    initialisation, predicting at x_i (the ``GDModel`` of arXiv 2208.01066 for the ReLU-network class: hidden 100,
    Adam 5·10⁻³,
    100 steps; their batch of 100 is the whole prefix for prompts of ≤ 100 points)."""
    b, m, d = X.shape
    M = _mask(m, X.dtype)
    opt = optax.adam(lr)

    def net(p, x):
        return jax.nn.relu(x @ p["W1"] + p["b1"]) @ p["w2"] + p["b2"]

    def fit(key, Xb, yb, row):
        k1, k2, k3, k4 = jax.random.split(key, 4)
        u = lambda k, shape, fan: draws.uniform(k, shape, X.dtype, -1 / np.sqrt(fan), 1 / np.sqrt(fan))  # noqa: E731
        p = {"W1": u(k1, (d, hidden), d), "b1": u(k2, (hidden,), d), "w2": u(k3, (hidden,), hidden),
             "b2": u(k4, (), hidden)}
        loss = lambda p: jnp.sum(row * jnp.square(net(p, Xb) - yb)) / jnp.maximum(row.sum(), 1)  # noqa: E731

        def step(carry, _):
            p, s = carry
            g = jax.grad(loss)(p)
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), None

        (p, _), _ = jax.lax.scan(step, (p, opt.init(p)), None, length=steps)
        return p

    def one(key, Xb, yb):
        ps = jax.vmap(fit, in_axes=(0, None, None, 0))(jax.random.split(key, m), Xb, yb, M)
        pred = jax.vmap(lambda p, x: net(p, x))(ps, Xb)
        return jnp.where(jnp.arange(m) > 0, pred, 0.0)

    return jax.vmap(one)(jax.random.split(key, b), X, y)


def _sklearn(what: str):
    try:
        import sklearn  # noqa: F401
    except ImportError as e:  # pragma: no cover  (the trees extra is in the test extra)
        raise ConfigError(f"the {what} baseline needs scikit-learn: pip install 'icldyn[trees]'") from e


def _per_prefix(X, y, make, min_points: int = 1) -> np.ndarray:
    """Fit ``make()`` on each prompt's prefix (x_j, y_j)_{j<i} and predict at x_i (0 before ``min_points``)."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    out = np.zeros(y.shape)
    for b in range(X.shape[0]):
        for i in range(min_points, X.shape[1]):
            out[b, i] = make().fit(X[b, :i], y[b, :i]).predict(X[b, i:i + 1])[0]
    return out


def lasso(X, y, alpha: float) -> np.ndarray:
    """Lasso, (1/2i)‖y − Xw‖² + α‖w‖₁, no intercept (arXiv 2208.01066's ``LassoModel``; scikit-learn)."""
    _sklearn("Lasso")
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import Lasso

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _per_prefix(X, y, lambda: Lasso(alpha=alpha, fit_intercept=False, max_iter=100_000))


def decision_tree(X, y, max_depth: int | None = 4) -> np.ndarray:
    """A greedy regression tree (CART; arXiv 2208.01066's ``DecisionTreeModel``, depth 4 and unbounded)."""
    _sklearn("decision-tree")
    from sklearn.tree import DecisionTreeRegressor

    return _per_prefix(X, y, lambda: DecisionTreeRegressor(max_depth=max_depth, random_state=0))


def boosted_trees(X, y) -> np.ndarray:
    """Gradient-boosted trees with XGBoost's defaults (100 trees of depth 6, learning rate 0.3; arXiv 2208.01066's
    ``XGBoostModel``), fitted by scikit-learn's ``GradientBoostingRegressor`` — XGBoost itself installs ~480 MB
    (its NCCL) for the same greedy boosting."""
    _sklearn("gradient-boosted-trees")
    from sklearn.ensemble import GradientBoostingRegressor

    return _per_prefix(X, y, lambda: GradientBoostingRegressor(n_estimators=100, max_depth=6, learning_rate=0.3,
                                                               random_state=0))
