"""Goel, Soltanolkotabi, Bartlett: closed forms of the softmax self-attention regressor.

θ = (A ∈ R^{p×d}, B ∈ R^{d×d}); x ~ N(0, Σ), y = Mx + z, z ~ N(0, Ω).

* Population loss (Theorem 1 (i)): L(θ) = ½‖(AΣBᵀ − M)Σ^½‖²_F + ½ tr Ω, L* = ½ tr Ω.
* Balancing regulariser: R(θ) = ⅛‖Σ^½(AᵀA − BᵀΣB)Σ^½‖²_F; Q = L + R.
* Global-minimum manifold: with MΣ^½ = UΓVᵀ, S = {θ*(J) : J ∈ O(d)},
  θ*(J) = [UΓ^½JᵀΣ^{-½}; Σ^{-½}VΓ^½JᵀΣ^{-½}]; distances in the P-norm, P = blockdiag(I_p, Σ).
* Algorithm 1's spectral initialisation: θ*(I) built from the OLS M̂ and Σ̂ of one sample.
* Theorem 2: L(θ_m) − L* ≲ n⁻² log⁶ n + μ^m.

Functions take JAX or NumPy arrays and are jittable unless they say otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from icldyn.components.softmax_regressor import regulariser as balancing_regulariser
from icldyn.runtime import float64_module


def _sym_pow(S: jax.Array, power: float) -> jax.Array:
    lam, U = jnp.linalg.eigh(S)
    return (U * lam**power) @ U.T


def excess_loss(A, B, M, sigma) -> jax.Array:
    """L(θ) − L* = ½‖(AΣBᵀ − M)Σ^½‖²_F = ½ tr(E Σ Eᵀ), E = AΣBᵀ − M (no cancellation)."""
    E = A @ sigma @ B.T - M
    return 0.5 * jnp.sum((E @ sigma) * E)


def population_loss(A, B, M, sigma, noise_cov=None) -> jax.Array:
    """L(θ) = ½‖(AΣBᵀ − M)Σ^½‖²_F + ½ tr Ω: the n → ∞ limit of E[L̂] (Theorem 1 (i))."""
    return excess_loss(A, B, M, sigma) + (0.0 if noise_cov is None else 0.5 * jnp.trace(noise_cov))


def regulariser(A, B, sigma) -> jax.Array:
    """R(θ) = ⅛‖Σ^½ D Σ^½‖²_F = ⅛ tr(DΣDΣ), D = AᵀA − BᵀΣB (Σ̂ in place of Σ gives R̂): the
    regressor's balancing regulariser, in float64 on concrete values."""
    return balancing_regulariser(A, B, sigma)


def population_grads(A, B, M, sigma) -> tuple[jax.Array, jax.Array]:
    """∇Q = ∇L + ∇R in closed form: ∇_A L = E_rΣBΣ, ∇_B L = ΣE_rᵀAΣ,
    ∇_A R = ½AΣDΣ, ∇_B R = −½ΣBΣDΣ."""
    E = A @ sigma @ B.T - M
    W = sigma @ (A.T @ A - B.T @ sigma @ B) @ sigma
    return E @ sigma @ B @ sigma + 0.5 * A @ W, sigma @ E.T @ A @ sigma - 0.5 * sigma @ B @ W


def theta_star(M, sigma, J=None) -> tuple[jax.Array, jax.Array]:
    """θ*(J) ∈ S: A = UΓ^½JᵀΣ^{-½}, B = Σ^{-½}VΓ^½JᵀΣ^{-½}, MΣ^½ = UΓVᵀ (thin SVD).
    Needs p ≥ d; with (M̂, Σ̂) and J = I it is Algorithm 1's spectral initialisation."""
    d = sigma.shape[0]
    s_half, s_mhalf = _sym_pow(sigma, 0.5), _sym_pow(sigma, -0.5)
    U, g, Vt = jnp.linalg.svd(M @ s_half, full_matrices=False)
    J = jnp.eye(d, dtype=sigma.dtype) if J is None else J
    G = jnp.sqrt(g)
    return (U * G) @ J.T @ s_mhalf, s_mhalf @ (Vt.T * G) @ J.T @ s_mhalf


def sample_moments(X, Y) -> tuple[jax.Array, jax.Array]:
    """Σ̂ = (1/n)Σ x_i x_iᵀ (uncentred) and the OLS M̂ = ((1/n)Σ y_i x_iᵀ) Σ̂⁻¹ of one sample (Algorithm 1, step 1)."""
    n = X.shape[0]
    sigma_hat = X.T @ X / n
    return sigma_hat, jnp.linalg.solve(sigma_hat, X.T @ Y / n).T


def spectral_init(X, Y) -> tuple[jax.Array, jax.Array]:
    """Algorithm 1, steps 1-3: (A₀, B₀) = θ*(I) for (M̂, Σ̂); then A₀Σ̂B₀ᵀ = M̂ and R̂(θ₀) = 0."""
    sigma_hat, M_hat = sample_moments(X, Y)
    return theta_star(M_hat, sigma_hat)


class Projection(NamedTuple):
    J: jax.Array  # the orthogonal matrix of the nearest point θ*(J)
    distance: jax.Array  # ‖θ − θ*(J)‖_P
    grad_norm: jax.Array  # first-order certificate: ‖Riemannian gradient‖ of the objective at J (≈ 0)
    hess_min: jax.Array  # second-order certificate: least eigenvalue of the Riemannian Hessian at J (≥ 0)


def _skew(w: jax.Array, d: int) -> jax.Array:
    """The d×d skew-symmetric matrix of the d(d−1)/2 coordinates w."""
    rows, cols = np.triu_indices(d, 1)
    S = jnp.zeros((d, d), w.dtype).at[rows, cols].set(w)
    return S - S.T


def project(A, B, M, sigma, iters: int = 30) -> Projection:
    """P-projection of θ onto S: argmin_{J ∈ O(d)} ‖P^½(θ − θ*(J))‖_F, exact at any κ(Σ).

    With θ*(J) = C JᵀΣ^{-½} and CᵀPC = 2Γ the objective is f(J) = const − 2 tr(N Jᵀ) + 2 tr(JΓJᵀΣ⁻¹),
    N = Σ^{-½}θᵀPC: a weighted Procrustes problem, with no closed form unless Σ ∝ I. It is solved by a Riemannian
    Newton method on O(d) — the pull-back h(ω) = f(J exp(skew ω)), Newton steps on the Hessian shifted to be
    positive definite, held inside a trust radius of 0.5 and retracted by the Cayley map — from d + 1 starts (the
    polar factor of N, exact
    when Σ ∝ I, and its d single-axis reflections, so both components of O(d) are searched); the best end point is
    returned with its certificates: the gradient norm (first order) and the least Hessian eigenvalue (second
    order) of h at ω = 0, the Riemannian gradient and Hessian at a critical point.
    """
    d = sigma.shape[0]
    s_half, s_mhalf = _sym_pow(sigma, 0.5), _sym_pow(sigma, -0.5)
    s_inv = s_mhalf @ s_mhalf
    U, g, Vt = jnp.linalg.svd(M @ s_half, full_matrices=False)
    G = jnp.sqrt(g)
    C_A, C_B = U * G, s_mhalf @ (Vt.T * G)  # θ*(J) = [C_A; C_B] Jᵀ Σ^{-½}
    N = s_mhalf @ (A.T @ C_A + B.T @ sigma @ C_B)
    k = d * (d - 1) // 2

    def f(J):
        return -2.0 * jnp.sum(N * J) + 2.0 * jnp.sum((J * g) @ J.T * s_inv)

    def pullback(w, J):  # f(J exp Ω) to second order in Ω: the same gradient and Hessian at Ω = 0
        O = _skew(w, d)
        return f(J + J @ O + 0.5 * J @ O @ O)

    def cayley(O):  # an orthogonal retraction: (I − Ω/2)⁻¹(I + Ω/2)
        eye = jnp.eye(d, dtype=O.dtype)
        return jnp.linalg.solve(eye - 0.5 * O, eye + 0.5 * O)

    grad_h, hess_h = jax.grad(pullback), jax.hessian(pullback)
    zero = jnp.zeros(k, sigma.dtype)

    def newton(_, J):
        gr, H = grad_h(zero, J), hess_h(zero, J)
        lam = jnp.linalg.eigvalsh(H)
        shift = jnp.maximum(0.0, -lam[0]) + 1e-12 * jnp.maximum(jnp.abs(lam[-1]), 1e-300)
        step = -jnp.linalg.solve(H + shift * jnp.eye(k, dtype=H.dtype), gr)
        step = step * jnp.minimum(1.0, 0.5 / jnp.maximum(jnp.linalg.norm(step), 1e-300))
        return J @ cayley(_skew(step, d))

    u, _, vt = jnp.linalg.svd(N)
    starts = jnp.stack([u @ vt] + [u @ vt @ jnp.diag(jnp.ones(d, sigma.dtype).at[i].set(-1.0)) for i in range(d)])
    ends = jax.vmap(lambda J: jax.lax.fori_loop(0, iters, newton, J))(starts) if k else starts
    J = ends[jnp.argmin(jax.vmap(f)(ends))]
    A_s, B_s = C_A @ J.T @ s_mhalf, C_B @ J.T @ s_mhalf
    dist2 = jnp.sum((A - A_s) ** 2) + jnp.sum(((B - B_s).T @ sigma) * (B - B_s).T)
    if k:
        grad_norm, hess_min = jnp.linalg.norm(grad_h(zero, J)), jnp.linalg.eigvalsh(hess_h(zero, J))[0]
    else:
        grad_norm = hess_min = jnp.zeros((), sigma.dtype)
    return Projection(J, jnp.sqrt(jnp.maximum(dist2, 0.0)), grad_norm, hess_min)


# :func:`project` jitted once: inside another program it is traced once per shape (a Newton loop over Hessians,
# ≈ 0.4 s to trace) and shared by every run's evaluation, not traced again in each
project_jit = jax.jit(project)


def q_identity(A, B, M, sigma) -> jax.Array:
    """The right side of the paper's identity for the regularised loss (Theorem 1 (ii)), less L*:
    Q(θ) − L* = ⅛‖P^½(θΣθᵀ − 2 Sym(M))P^½‖²_F − ½‖MΣ^½‖²_F, P = blockdiag(I_p, Σ), Sym(M) = [[0, M], [Mᵀ, 0]]."""
    p, d = M.shape
    theta = jnp.concatenate([A, B])
    sym = jnp.block([[jnp.zeros((p, p), M.dtype), M], [M.T, jnp.zeros((d, d), M.dtype)]])
    P_half = jax.scipy.linalg.block_diag(jnp.eye(p, dtype=M.dtype), _sym_pow(sigma, 0.5))
    inner = P_half @ (theta @ sigma @ theta.T - 2.0 * sym) @ P_half
    return jnp.sum(inner**2) / 8.0 - 0.5 * jnp.sum((M @ _sym_pow(sigma, 0.5)) ** 2)


def loglog_slope(x, y, weights=None) -> tuple[float, tuple[float, float]]:
    """Least-squares slope of log y against log x (weights: inverse variances of log y) and its 95% interval."""
    lx, ly = np.log(np.asarray(x, float)), np.log(np.asarray(y, float))
    w = np.ones_like(lx) if weights is None else np.asarray(weights, float)
    X = np.stack([np.ones_like(lx), lx], 1)
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    coef = cov @ X.T @ (w * ly)
    resid = ly - X @ coef
    dof = max(len(lx) - 2, 1)
    s2 = float(np.sum(w * resid**2) / dof)
    if weights is not None:
        s2 = max(s2, 1.0)  # known variances: do not claim more precision than they give
    half = stats.t.ppf(0.975, dof) * np.sqrt(s2 * cov[1, 1])
    return float(coef[1]), (float(coef[1] - half), float(coef[1] + half))


def lemma1_asymmetry(A, B, M, sigma, J) -> jax.Array:
    """Lemma 1: at the projection, ΔᵀPθ*Σ is symmetric (Δ = θ − θ*); returns its relative asymmetry."""
    As, Bs = theta_star(M, sigma, J)
    S = (A - As).T @ As @ sigma + (B - Bs).T @ sigma @ Bs @ sigma
    return jnp.linalg.norm(S - S.T) / jnp.maximum(jnp.linalg.norm(S), 1e-300)


class Rate(NamedTuple):
    mu: float  # per-iteration contraction factor exp(slope)
    low: float  # 95% confidence interval of μ
    high: float
    first: int  # fitted window of steps
    last: int


def fit_rate(steps, values, floor_factor: float = 10.0, span: float = 1e-6) -> Rate | None:
    """μ from a log-linear least-squares fit of a geometrically decaying positive curve (e.g. the P-distance):
    fitted from the start until it first falls below max(``floor_factor`` × its minimum, ``span`` × its start)
    — the geometric phase before the floor. None when fewer than 3 points qualify."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    ok = np.isfinite(values) & (values > 0)
    steps, values = steps[ok], values[ok]
    if len(values) < 3:
        return None
    stop = max(floor_factor * values.min(), span * values[0])
    below = np.nonzero(values < stop)[0]
    end = below[0] if len(below) else len(values)
    if end < 3:
        return None
    fit = stats.linregress(steps[:end], np.log(values[:end]))
    half = stats.t.ppf(0.975, max(end - 2, 1)) * fit.stderr
    return Rate(float(np.exp(fit.slope)), float(np.exp(fit.slope - half)), float(np.exp(fit.slope + half)),
                int(steps[0]), int(steps[end - 1]))


def steps_to(steps, values, threshold: float, stay: bool = True) -> int | None:
    """First logged step from which the curve stays below ``threshold`` to the end of the run
    (``stay=False``: first step below it at all); None if there is none."""
    below = np.asarray(values) < threshold
    if stay:
        above = np.nonzero(~below)[0]
        first = 0 if len(above) == 0 else above[-1] + 1
        return int(np.asarray(steps)[first]) if first < len(below) else None
    idx = np.nonzero(below)[0]
    return int(np.asarray(steps)[idx[0]]) if len(idx) else None


class LocalRate(NamedTuple):
    eta: float | None  # the step size asked about
    mu: float | None  # predicted contraction of the P-distance per iteration at eta
    eta_best: float  # 2/(λ_min + λ_max): the step size with the fastest local rate
    mu_best: float  # (κ − 1)/(κ + 1), κ = λ_max/λ_min: no step size contracts faster
    lam_min: float  # smallest and largest nonzero eigenvalues of P̂⁻¹∇²Q(θ*)
    lam_max: float
    zero: int  # eigenvalues at zero: the directions along S (d(d−1)/2; d² without the regulariser)


def local_rate(M, sigma, eta: float | None = None, sigma_hat=None, J=None, precondition: bool = True,
               regularizer: float = 1.0) -> LocalRate:
    """Algorithm 1 (population oracle) linearised at θ* ∈ S: θ_{t+1} − θ* ≈ (I − ηP̂⁻¹∇²Q(θ*))(θ_t − θ*),
    P̂ = blockdiag(I_p, Σ̂) acting on B from the left (I without the preconditioner), Q = L + λR.
    P̂⁻¹∇²Q is similar to the positive semidefinite P̂^{-½}∇²QP̂^{-½}; its zero eigenvalues span the tangent
    space of S, and across S the error contracts by μ(η) = max(|1 − ηλ_min|, |1 − ηλ_max|) over the nonzero
    ones. So μ* = (κ − 1)/(κ + 1) at η* = 2/(λ_min + λ_max) bounds every step size's local rate, and from
    an initial excess ε₀ (≈ the spectral initialisation's) reaching ε needs ≳ log(ε/ε₀)/(2 log μ*) iterations.
    The spectrum depends on the point θ*(J) of S (Q is invariant under θ → θΣ^½OΣ^{-½}, which P̂ does not
    see unless Σ ∝ I): pass the J of the point the iterates approach, e.g. ``project(A₀, B₀, M, Σ).J``.
    The paper proves a geometric rate without its value; this is derived here. At θ*,
    E = AΣBᵀ − M = 0 and W = Σ(AᵀA − BᵀΣB)Σ = 0, so differentiating ``population_grads`` gives the Hessian
    ∇²Q·(dA, dB) = (dE ΣBΣ + ½λ A dW, Σ dEᵀ AΣ − ½λ ΣB dW) with dE = dAΣBᵀ + AΣdBᵀ and
    dW = Σ(dAᵀA + AᵀdA − dBᵀΣB − BᵀΣdB)Σ. Float64 (with JAX's x64 on, as the entry points set it); checked
    against the fitted μ in tests/test_goel.py."""
    M, sigma = np.asarray(M, np.float64), np.asarray(sigma, np.float64)
    p, d = M.shape
    A, B = (np.asarray(x, np.float64) for x in theta_star(M, sigma, J))

    def hvp(v):
        dA, dB = v[: p * d].reshape(p, d), v[p * d:].reshape(d, d)
        dE = dA @ sigma @ B.T + A @ sigma @ dB.T
        dW = sigma @ (dA.T @ A + A.T @ dA - dB.T @ sigma @ B - B.T @ sigma @ dB) @ sigma
        gA = dE @ sigma @ B @ sigma + 0.5 * regularizer * A @ dW
        gB = sigma @ dE.T @ A @ sigma - 0.5 * regularizer * sigma @ B @ dW
        return np.concatenate([gA.ravel(), gB.ravel()])

    H = np.stack([hvp(e) for e in np.eye(p * d + d * d)], axis=1)
    if precondition:  # P̂^{-½} on the flattened (A, B): I on A, Σ̂^{-½} from the left on B (row-major)
        s_mhalf = np.asarray(_sym_pow(jnp.asarray(sigma if sigma_hat is None else sigma_hat, jnp.float64), -0.5))
        Ph = np.eye(p * d + d * d)
        Ph[p * d:, p * d:] = np.kron(s_mhalf, np.eye(d))
        H = Ph @ H @ Ph
    lam = np.linalg.eigvalsh((H + H.T) / 2)
    zero = d * (d - 1) // 2 if regularizer else d * d
    nonzero = np.sort(lam)[zero:]
    lo, hi = float(nonzero[0]), float(nonzero[-1])
    mu = None if eta is None else float(max(abs(1 - eta * lo), abs(1 - eta * hi)))
    return LocalRate(eta, mu, 2 / (lo + hi), (hi - lo) / (hi + lo), lo, hi, zero)


def sample_size_bound(n) -> np.ndarray:
    """Theorem 2's statistical term n⁻² log⁶ n (up to constants)."""
    n = np.asarray(n, float)
    return np.log(n) ** 6 / n**2


def assumptions(M, sigma) -> dict:
    """The paper's assumptions evaluated: p ≥ d, MΣ^½ full column rank, ‖MΣ^½‖_op < 1/16.
    Returns the values and a list of warnings (empty when all hold)."""
    M, sigma = np.asarray(M, np.float64), np.asarray(sigma, np.float64)
    p, d = M.shape
    g = np.linalg.svd(M @ np.asarray(_sym_pow(jnp.asarray(sigma), 0.5)), compute_uv=False)
    out = {"p": p, "d": d, "norm_M_sigma_half": float(g[0]), "sigma_d": float(g[-1]),
           "kappa_sigma": float(np.linalg.cond(sigma)), "warnings": []}
    if p < d:
        out["warnings"].append(f"p = {p} < d = {d}: the paper assumes p ≥ d")
    if g[-1] <= 1e-12 * g[0] or len(g) < d:
        out["warnings"].append(f"MΣ^½ is rank deficient (σ_d = {g[-1]:.3g}): S is not the set of global minima")
    if g[0] >= 1 / 16:
        out["warnings"].append(f"‖MΣ^½‖_op = {g[0]:.4g} ≥ 1/16: outside Theorem 2's assumption")
    return out


float64_module(globals())  # every public function computes in float64 whatever JAX's x64 flag
