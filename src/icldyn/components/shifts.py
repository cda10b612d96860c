"""Distribution shifts of in-context linear-regression prompts as named evaluation settings: the prompt strategies and
scalings of *What Can Transformers Learn In-Context? A Case Study of Simple Function Classes* (arXiv 2208.01066, §4
and Fig. 3; its code's ``src/eval.py``, ``build_evals``), plus outliers and prompts longer than trained on.

Every shift starts from a run's own Gaussian law (:class:`~icldyn.components.prompts.GaussianTask`: x ~ N(0, Σ),
w ~ N(0, Ω_w), y = wᵀx + σε) and draws :class:`~icldyn.components.prompts.Prompts` of k context examples and a
query from explicit keys. A shift is a test law (:attr:`Shift.law`, drawn once per evaluation: the rotation U of
``skewed`` and ``half_subspace``) and a prompt strategy on it (:attr:`Shift.prompts`, per prompt length k):

==================== ==================================================================================================
``standard``         the training law
``skewed``           x ← Tx, T = U diag(λ) Uᵀ (d/Σλ²)^½, λ_i = 1/i, U a random rotation: Σ' = TΣTᵀ (tr Σ' = d at Σ = I)
``half_subspace``    x ← Tx as ``skewed`` with λ = 1 on ⌊d/2⌋ directions and 0 on the rest: Σ' = (d/⌊d/2⌋) P_U at Σ = I
``orthogonal``       the query projected orthogonally to the k context covariates, at its own norm (k < d)
``overlapping``      the query is one of the k context covariates, chosen uniformly
``random_quadrants`` the context covariates reflected into one random orthant per prompt, x_i ← |x_i| ⊙ s; the query
                     from the law
``opposite_quadrants`` as ``random_quadrants``, the query in the opposite orthant, x_q ← −|x_q| ⊙ s
``scale_x=s``        x ← s·x, s ∈ {1/3, 1/2, 2, 3}
``scale_y=s``        w ← s·w (y = s·wᵀx + σε), s ∈ {1/3, 1/2, 2, 3}
``noisy``            label noise of variance 1 added, every label then rescaled to the law's own E[y²] (the code's
                     ``noisyLR``: noise_std = 1, renormalize_ys; here by the population variance, not the batch's)
``outliers``         each context label, with probability 1/10, moved by 5·std(y)·N(0, 1) (the query's label clean)
``longer``           the training law at k = 1 … 2n: prompts longer than trained on
==================== ==================================================================================================

The Gaussian shifts (``gaussian``: standard, skewed, half_subspace, scale_x, scale_y, noisy, longer) draw context and
query iid from their law, so closed forms of the training law hold for them with Σ', Ω_w', σ' in place.
:func:`curves` measures a model (any :class:`~icldyn.config.Predict`) and the in-context baselines on the same
prompts of each shift at each prompt length.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from icldyn.components import baselines as bl
from icldyn.components import draws
from icldyn.components.prompts import GaussianTask, Prompts, PromptsData, make_task
from icldyn.config import ConfigError, Predict, PrefixPredict, RunConfig

Law = Callable[[GaussianTask, jax.Array], GaussianTask]  # (training law, key) → test law


# ---------------------------------------------------------------- test laws (float64 NumPy: constants of a prompt set)


def as_numpy(task: GaussianTask) -> GaussianTask:
    return GaussianTask(*(np.asarray(a, np.float64) for a in task))


def _psd_sqrt(S: np.ndarray) -> np.ndarray:
    lam, U = np.linalg.eigh(S)
    return (U * np.sqrt(np.clip(lam, 0.0, None))) @ U.T


def rotation(key: jax.Array, d: int) -> np.ndarray:
    """A Haar-random d×d rotation from ``key`` (QR of a Gaussian matrix, signs fixed by R's diagonal)."""
    Q, R = np.linalg.qr(np.asarray(draws.normal(key, (d, d), jnp.float32), np.float64))
    return Q * np.sign(np.diag(R))


def transformed(task: GaussianTask, T: np.ndarray) -> GaussianTask:
    """The law of x ← Tx: Σ' = TΣTᵀ (Ω_w and σ unchanged)."""
    task = as_numpy(task)
    sigma = T @ task.sigma @ T.T
    return task._replace(sigma=sigma, sigma_sqrt=_psd_sqrt(sigma))


def spectrum(lam: np.ndarray, key: jax.Array) -> np.ndarray:
    """T = U diag(λ) Uᵀ · (d / Σλ²)^½ with U a random rotation (the code's ``sample_transformation(normalize=True)``:
    tr(TᵀT) = d)."""
    d = lam.shape[0]
    U = rotation(key, d)
    return (U * lam) @ U.T * np.sqrt(d / np.sum(lam**2))


def _skewed(task: GaussianTask, key: jax.Array) -> GaussianTask:
    d = task.sigma.shape[0]
    return transformed(task, spectrum(1.0 / np.arange(1, d + 1), key))


def _half_subspace(task: GaussianTask, key: jax.Array) -> GaussianTask:
    d = task.sigma.shape[0]
    return transformed(task, spectrum((np.arange(d) < d // 2).astype(np.float64), key))


def _scale_x(s: float) -> Law:
    return lambda task, key: transformed(task, s * np.eye(task.sigma.shape[0]))


def _scale_y(s: float) -> Law:
    return lambda task, key: as_numpy(task)._replace(w_sqrt=s * np.asarray(task.w_sqrt, np.float64))


def label_variance(task: GaussianTask):
    """E[y²] = tr(Ω_w Σ) + σ² (NumPy or JAX arrays; Σ symmetric)."""
    return ((task.w_sqrt @ task.w_sqrt.T) * task.sigma).sum() + task.noise_std**2


def _noisy(task: GaussianTask, key: jax.Array) -> GaussianTask:
    task = as_numpy(task)
    v = label_variance(task)
    c = np.sqrt(v / (v + 1.0))  # (wᵀx + σε + ε')·c has the law's own variance v
    return task._replace(w_sqrt=c * task.w_sqrt, noise_std=c * np.sqrt(task.noise_std**2 + 1.0))


def _same(task: GaussianTask, key: jax.Array) -> GaussianTask:
    return as_numpy(task)


# ---------------------------------------------------------------- prompt strategies


class Draw(NamedTuple):
    """Prompts of every context length k = 1 … K at once, as the paper's code evaluates a prompt at each of its
    positions: the prompt of length k is the first k context examples and its own query, ``Xq[:, k−1]``."""

    X: jax.Array  # (b, K, d) context covariates
    y: jax.Array  # (b, K) their labels
    Xq: jax.Array  # (b, K, d) the query of the prompt with k context examples at [:, k − 1]
    yq: jax.Array  # (b, K) its label

    def prompts(self, k: int) -> Prompts:
        """The prompts of k context examples: X (b, k+1, d), y (b, k+1)."""
        xp = jnp if isinstance(self.X, jax.Array) else np
        return Prompts(xp.concatenate([self.X[:, :k], self.Xq[:, k - 1:k]], axis=1),
                       xp.concatenate([self.y[:, :k], self.yq[:, k - 1:k]], axis=1))


Strategy = Callable[[GaussianTask, jax.Array, int, int], Draw]  # (test law, key, batch, K) → Draw


def _covariates(task: GaussianTask, key: jax.Array, batch: int, K: int) -> tuple[jax.Array, jax.Array]:
    """Context and query covariates, iid from the law: (b, K, d) each."""
    g = draws.normal(key, (2, batch, K, task.sigma.shape[0]), task.sigma.dtype) @ task.sigma_sqrt
    return g[0], g[1]


def _labelled(task: GaussianTask, key: jax.Array, X: jax.Array, Xq: jax.Array) -> Draw:
    """y = wᵀx + σε with one w ~ N(0, Ω_w) per prompt, shared by its context and its queries."""
    kw, ke = jax.random.split(jax.random.fold_in(key, 7))
    b, K, d = X.shape
    w = draws.normal(kw, (b, d), X.dtype) @ task.w_sqrt.T  # (b, d)
    e = task.noise_std * draws.normal(ke, (2, b, K), X.dtype)
    return Draw(X, jnp.einsum("bkd,bd->bk", X, w) + e[0], Xq, jnp.einsum("bkd,bd->bk", Xq, w) + e[1])


def _gaussian(task: GaussianTask, key: jax.Array, batch: int, K: int) -> Draw:
    return _labelled(task, key, *_covariates(task, key, batch, K))


def _quadrants(opposite: bool) -> Strategy:
    def draw(task: GaussianTask, key: jax.Array, batch: int, K: int) -> Draw:
        X, Xq = _covariates(task, key, batch, K)
        s = jnp.sign(draws.normal(jax.random.fold_in(key, 1), (batch, 1, X.shape[-1]), X.dtype))  # the orthant
        return _labelled(task, key, jnp.abs(X) * s, -jnp.abs(Xq) * s if opposite else Xq)
    return draw


def _orthogonal(task: GaussianTask, key: jax.Array, batch: int, K: int) -> Draw:
    """Query k (k < d) minus its projection on the span of the first k context covariates, rescaled to its norm:
    the QR basis of the context's columns spans the first k of them in its first k columns."""
    X, Xq = _covariates(task, key, batch, K)
    d = X.shape[-1]
    B, _ = jnp.linalg.qr(jnp.swapaxes(X, 1, 2))  # (b, d, min(d, K))
    r = B.shape[-1]
    coef = jnp.einsum("bdj,bkd->bkj", B, Xq) * (jnp.arange(r)[None, :] < jnp.arange(1, K + 1)[:, None])  # j < k
    perp = Xq - jnp.einsum("bdj,bkj->bkd", B, coef)
    scale = jnp.linalg.norm(Xq, axis=-1) / jnp.maximum(jnp.linalg.norm(perp, axis=-1), 1e-300)
    Xq = jnp.where((jnp.arange(1, K + 1) < d)[None, :, None], perp * scale[..., None], 0.0)  # k ≥ d: undefined
    return _labelled(task, key, X, Xq)


def _overlapping(task: GaussianTask, key: jax.Array, batch: int, K: int) -> Draw:
    X, _ = _covariates(task, key, batch, K)
    u = draws.uniform(jax.random.fold_in(key, 1), (batch, K))
    j = jnp.floor(u * jnp.arange(1, K + 1)).astype(jnp.int32)  # uniform on {0, …, k − 1} for query k
    return _labelled(task, key, X, jnp.take_along_axis(X, j[..., None], axis=1))


OUTLIER_RATE, OUTLIER_SIZE = 0.1, 5.0


def _outliers(task: GaussianTask, key: jax.Array, batch: int, K: int) -> Draw:
    p = _gaussian(task, key, batch, K)
    ko, kz = jax.random.split(jax.random.fold_in(key, 1))
    hit = jax.random.bernoulli(ko, OUTLIER_RATE, (batch, K)).astype(p.y.dtype)
    jump = OUTLIER_SIZE * jnp.sqrt(label_variance(task)) * draws.normal(kz, (batch, K), p.y.dtype)
    return p._replace(y=p.y + hit * jump)


# ---------------------------------------------------------------- the registry


class Shift(NamedTuple):
    name: str
    description: str
    law: Law
    draw: Strategy  # (test law, key, batch, K) → the prompts of every length k ≤ K
    gaussian: bool  # context and query iid from ``law``: the training law's closed forms hold with its Σ', Ω', σ'
    lengths: Callable[[int, int], range]  # (trained n, d) → the prompt lengths k evaluated



def _upto_n(n: int, d: int) -> range:
    return range(1, n + 1)


SCALES = (Fraction(1, 3), Fraction(1, 2), Fraction(2), Fraction(3))


def _registry() -> dict[str, Shift]:
    out = [Shift("standard", "the training law", _same, _gaussian, True, _upto_n),
           Shift("skewed", "x ← Tx, T's eigenvalues ∝ 1/i in a random basis, tr(TᵀT) = d", _skewed, _gaussian, True,
                 _upto_n),
           Shift("half_subspace", "x ← Tx, x confined to a random ⌊d/2⌋-dimensional subspace, tr(TᵀT) = d",
                 _half_subspace, _gaussian, True, _upto_n),
           Shift("orthogonal", "the query orthogonal to the context covariates, at its own norm (k < d)", _same,
                 _orthogonal, False, lambda n, d: range(1, min(n, d - 1) + 1)),
           Shift("overlapping", "the query is one of the context covariates", _same, _overlapping, False, _upto_n),
           Shift("random_quadrants", "the context in one random orthant, the query from the law", _same,
                 _quadrants(False), False, _upto_n),
           Shift("opposite_quadrants", "the context in one random orthant, the query in the opposite one", _same,
                 _quadrants(True), False, _upto_n)]
    for s in SCALES:
        out.append(Shift(f"scale_x={s}", f"x ← {s}·x", _scale_x(float(s)), _gaussian, True, _upto_n))
    for s in SCALES:
        out.append(Shift(f"scale_y={s}", f"w ← {s}·w (y scaled)", _scale_y(float(s)), _gaussian, True, _upto_n))
    out += [Shift("noisy", "label noise of variance 1, labels rescaled to the law's E[y²]", _noisy, _gaussian, True,
                  _upto_n),
            Shift("outliers", f"each context label moved by {OUTLIER_SIZE:g}·std(y)·N(0, 1) with probability "
                  f"{OUTLIER_RATE:g}", _same, _outliers, False, _upto_n),
            Shift("longer", "the training law at k = 1 … 2n (longer than trained)", _same, _gaussian, True,
                  lambda n, d: range(1, 2 * n + 1))]
    return {s.name: s for s in out}


SHIFTS: dict[str, Shift] = _registry()


def get(name: str) -> Shift:
    """The shift named ``name``; an unknown name is one line listing the allowed ones."""
    if name not in SHIFTS:
        raise ConfigError(f"shift {name!r} is not allowed: must be one of {', '.join(SHIFTS)}")
    return SHIFTS[name]


def shift_key(key: jax.Array, name: str) -> jax.Array:
    """A shift's own key, stable under any reordering of the registry (the CRC-32 of its name folded in)."""
    return jax.random.fold_in(key, zlib.crc32(name.encode()) & 0x7FFFFFFF)


LINEAR_CLASSES = ("linear_regression", "noisy_linear_regression")  # function classes that are Gaussian laws


def base_law(cfg: RunConfig, seed: int) -> GaussianTask:
    """A run's training law for one seed, float64, that the shifts start from: the Gaussian prompts law
    (``data.kind = "prompts"``), or a linear function class (x ~ N(0, I), w ~ N(0, s²I), noise σ); any other law is
    one line."""
    data = cfg.data
    if isinstance(data, PromptsData):
        return as_numpy(make_task(data, seed))
    if data.kind in LINEAR_CLASSES:
        eye = np.eye(data.d)
        return GaussianTask(eye, eye, data.scale * eye, np.asarray(float(getattr(data, "noise_std", 0.0))))
    raise ConfigError(f"data.kind = {data.kind!r} has no shift suite: the shifts start from a Gaussian linear "
                      f"law; allowed: data.kind = {', '.join(repr(k) for k in ('prompts', *LINEAR_CLASSES))}")


def gd_steps(cfg: RunConfig) -> int:
    """The GD/PGD baselines' step count for a model: its layers where it has them (Lemma 1 of arXiv 2306.00297:
    L layers ↔ L steps), else 1."""
    return int(getattr(cfg.model, "layers", 1))


# ---------------------------------------------------------------- error-vs-k curves

METHODS = ("model", "ols", "ridge", "gd", "pgd", "zero")


def ridge_lambda(law: GaussianTask) -> float:
    """λ = d·max(σ², 0.01)/tr(Ω_w): the posterior mean's penalty for a prior N(0, tr(Ω_w)/d · I) and the law's
    noise σ (floored, so that a noiseless law's ridge is a slightly shrunk least squares)."""
    W = np.asarray(law.w_sqrt, np.float64)
    return float(W.shape[0] * max(float(law.noise_std) ** 2, 0.01) / np.sum(W * W))


LAW_KEY, PROMPT_KEY, VAL_KEY = 0x1A3, 0x2B4, 0x3C5  # folded into a shift's key: its test law, its prompts, tuning
TUNE_PROMPTS = 1000  # training-law prompts per k that tune the GD/PGD steps


def shifted_law(shift: Shift, law: GaussianTask, key: jax.Array) -> GaussianTask:
    """The shift's test law of the training ``law`` (float64 NumPy), from ``fold_in(key, LAW_KEY)``: what
    :func:`curves` draws from for ``key = shift_key(its key, shift.name)``."""
    return shift.law(as_numpy(law), jax.random.fold_in(key, LAW_KEY))


def sample(shift: Shift, law: GaussianTask, key: jax.Array, batch: int, k: int) -> Prompts:
    """``batch`` prompts of k context examples under ``shift`` of the training ``law``: its :func:`shifted_law`, the
    prompts from ``fold_in(key, PROMPT_KEY)`` (for ``key = shift_key(key', name)``, :func:`curves`'s own prompts at
    length k when k is its largest)."""
    return shift.draw(shifted_law(shift, law, key), jax.random.fold_in(key, PROMPT_KEY), batch, k).prompts(k)


def curves(predict: Predict, params, law: GaussianTask, shifts: list[str], *, n: int, key: jax.Array,
           batch: int = 2000, steps: int = 1, prefix: PrefixPredict | None = None, dtype=jnp.float64) -> list[dict]:
    """The squared error at the query, E[(ŷ − y_q)²], of a model (``predict``, its ``params``) and of the baselines
    on the very same prompts, for each shift at each of its prompt lengths k (``Shift.lengths(n, d)``): one row
    ``{shift, k, method, error, se}`` per method (``METHODS``), ``se`` the standard error over the ``batch`` prompts.
    The prompts of every length share their context prefix (:class:`Draw`, from ``shift_key(key, name)`` as
    :func:`sample` draws them). Baselines: ``ols`` (minimum-norm least squares), ``ridge`` (:func:`ridge_lambda` of
    the test law), ``steps``-step ``gd`` (A = ηI) and ``pgd`` (A = ηΣ⁻¹, Σ the training law's), η tuned at each k on
    ``TUNE_PROMPTS`` prompts of the training law (:func:`~icldyn.components.baselines.tune_step`: what the training
    law teaches, not the shift), and ``zero`` (ŷ = 0: E[y_q²]). The model runs in ``dtype`` (its errors in
    float64); a causal model's ``prefix`` predictor (:class:`~icldyn.config.PrefixPredict`) is given every prompt
    padded after its query to the longest, one compiled program for every k and shift."""
    law = as_numpy(law)
    params = jax.tree.map(lambda a: jnp.asarray(a, dtype), params)
    sigma_inv = np.linalg.inv(np.asarray(law.sigma))
    d = law.sigma.shape[0]
    lengths = {name: list(get(name).lengths(n, d)) for name in shifts}
    K = max(max(ks) for ks in lengths.values())
    val = jax.tree.map(np.asarray, _gaussian(law, jax.random.fold_in(key, VAL_KEY), min(batch, TUNE_PROMPTS), K))
    etas: dict[int, tuple[float, float]] = {}
    if prefix is None:
        run = jax.jit(predict)
        model = lambda X, y: run(params, Prompts(jnp.asarray(X, dtype), jnp.asarray(y, dtype)))  # noqa: E731
    else:
        at = jax.jit(lambda params, X, y, k: prefix(params, Prompts(X, y))[:, k])

        def model(X, y):  # (b, k + 1, d): zeros after the query up to K + 1 points, which it cannot read
            k, pad = X.shape[1] - 1, K + 1 - X.shape[1]
            X, y = np.pad(X, ((0, 0), (0, pad), (0, 0))), np.pad(y, ((0, 0), (0, pad)))
            return at(params, jnp.asarray(X, dtype), jnp.asarray(y, dtype), k)

    def tuned(k: int) -> tuple[float, float]:  # per k, on the training law's prompts, shared by every shift
        if k not in etas:
            Xv, yv = val.prompts(k)
            etas[k] = (bl.tune_step(Xv, yv, np.eye(d), steps), bl.tune_step(Xv, yv, sigma_inv, steps))
        return etas[k]

    rows = []
    for name in shifts:
        shift, skey = get(name), shift_key(key, name)
        shifted = shifted_law(shift, law, skey)
        lam = ridge_lambda(shifted)
        ks = lengths[name]
        # eagerly: the shifts share their primitives' shapes, so each is compiled once, not once per shift
        draw = jax.tree.map(np.asarray, shift.draw(shifted, jax.random.fold_in(skey, PROMPT_KEY), batch, max(ks)))
        for k in ks:
            X, y = draw.prompts(k)
            eta_gd, eta_pgd = tuned(k)
            preds = {"model": np.asarray(model(X, y)), "ols": bl.ols(X, y),
                     "ridge": bl.ridge(X, y, lam), "gd": bl.preconditioned_gd(X, y, [eta_gd * np.eye(d)] * steps),
                     "pgd": bl.preconditioned_gd(X, y, [eta_pgd * sigma_inv] * steps), "zero": np.zeros(len(y))}
            for method, pred in preds.items():
                err = np.square(np.asarray(pred, np.float64) - y[:, -1])
                rows.append({"shift": name, "k": k, "method": method, "error": float(err.mean()),
                             "se": float(err.std(ddof=1) / np.sqrt(err.size))})
    return rows
