"""The three exact forwards of the linear transformer agree (float64): column form (eq. 3),
moment form, fused C kernel (loss and gradient)."""

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from icldyn.components import lsa_kernel as kernel
from icldyn.components.linear_attention import LinearTransformer, moments
from icldyn.components.prompts import GaussianTask, sample_prompts

D_, N_ = 4, 7


def needs_kernel(D: int):
    """Skipped where the kernel for token dimension D cannot be built, asked when the test runs, not at collection (a
    build takes ≈ 3 s, and every worker collects every module)."""
    return pytest.mark.skipif(f"not kernel.available({D})", reason="no C compiler: the kernel path is not built here")


@functools.cache
def _prompts(d: int):
    task = GaussianTask(jnp.eye(d), jnp.eye(d), jnp.eye(d), jnp.asarray(0.1))
    return sample_prompts(task, key=jax.random.PRNGKey(0), batch=130, n=N_)  # 130: not a multiple of the block


@pytest.fixture(scope="module")
def prompts():
    return _prompts(D_)


@pytest.mark.parametrize("parameterization", ["full", "sparse", "relaxed"])
def test_moment_form_equals_column_form(prompts, parameterization):
    cols = LinearTransformer(D_, 3, heads=2, parameterization=parameterization, init_std=0.3, form="columns")
    mom = LinearTransformer(D_, 3, heads=2, parameterization=parameterization, init_std=0.3, form="moments")
    params = cols.init(key=jax.random.PRNGKey(1), dtype=jnp.float64)
    a, b = cols.predict(params, cols.prepare(prompts)), mom.predict(params, mom.prepare(prompts))
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@needs_kernel(6)
@pytest.mark.parametrize("d, parameterization, dtype, tol", [
    *((5, par, dtype, tol) for par in ("full", "sparse", "relaxed")
      for dtype, tol in ((jnp.float64, 1e-12), (jnp.float32, 2e-5))),
    (3, "full", jnp.float64, 1e-12),  # the kernel is compiled per D = d + 1: a second D (the sampler test's)
])
def test_kernel_loss_and_gradient_equal_autodiff(d, parameterization, dtype, tol):
    x = jax.tree.map(lambda a: a.astype(dtype), moments(_prompts(d)))
    mom = LinearTransformer(d, 3, heads=2, parameterization=parameterization, init_std=0.3, form="moments")
    ker = LinearTransformer(d, 3, heads=2, parameterization=parameterization, init_std=0.3, form="kernel")
    params = mom.init(key=jax.random.PRNGKey(2), dtype=dtype)
    ref_l, ref_g = jax.value_and_grad(mom.loss)(params, x)
    ker_l, ker_g = jax.jit(jax.value_and_grad(ker.loss))(params, x)
    np.testing.assert_allclose(ker_l, ref_l, rtol=tol)
    for k in ref_g:
        np.testing.assert_allclose(ker_g[k], ref_g[k], rtol=tol, atol=tol * float(jnp.abs(ref_g[k]).max()))


def test_effective_preconditioner_of_each_parameterisation():
    m = LinearTransformer(3, 2, parameterization="relaxed")
    params = {"A": jnp.arange(18.0).reshape(2, 1, 3, 3), "B": jnp.ones((2, 1, 3, 3))}
    P, Q = m.PQ(params)
    assert float(P[0, 0, 3, 3]) == 1.0 and float(Q[0, 0, 3, 3]) == 0.0
    np.testing.assert_array_equal(m.A(params), params["A"][:, 0])
    np.testing.assert_array_equal(m.B(params), params["B"][:, 0])


@needs_kernel(4)
def test_kernel_sampler_draws_the_same_law_as_the_jax_sampler():
    from icldyn.components.prompts import PromptsData, make_task

    task = jax.tree.map(jnp.asarray, make_task(PromptsData(covariance="official", noise_std=0.5), 3))
    b, n = 40_000, 9  # neither a multiple of the kernel's block
    fast = kernel.sample_moments(task, jax.random.PRNGKey(0), b, n)
    ref = moments(sample_prompts(task, key=jax.random.PRNGKey(1), batch=b, n=n))
    for a, r in zip(fast, ref):
        a, r = np.asarray(a).reshape(b, -1), np.asarray(r).reshape(b, -1)
        feats = [a, r, a**2, r**2] if a.shape[1] < 10 else [a, r]
        se = np.sqrt(feats[0].var(0) / b + feats[1].var(0) / b)
        assert np.all(np.abs(feats[0].mean(0) - feats[1].mean(0)) <= 4.5 * se + 1e-12)
    # thread count does not change the draws (counter-based Philox)
    one, two = (kernel.sample_moments(task, jax.random.PRNGKey(7), 300, n, threads) for threads in (1, 2))
    for x, y in zip(one, two):
        np.testing.assert_array_equal(x, y)


@needs_kernel(6)
def test_loading_the_kernel_leaves_subnormals_alone():
    """A fast-math link would set flush-to-zero for the whole process (crtfastmath.o)."""
    P = jnp.zeros((1, 1, 6, 6), jnp.float32)
    S, zq, y = jnp.zeros((4, 6, 6), jnp.float32), jnp.zeros((4, 6), jnp.float32), jnp.ones(4, jnp.float32)
    kernel.loss(P, P, S, zq, y).block_until_ready()
    tiny = np.float32(1e-38) * np.float32(1e-3)  # a float32 subnormal
    assert tiny > 0 and np.float64(5e-324) > 0


@needs_kernel(6)
def test_kernel_copies_of_a_seed_share_its_batch():
    """Parameters with a leading copy axis (several learning rates) against one batch per seed, as ``vmap`` hands
    them over (the batch's copy axis of size 1): every copy reads its seed's batch in place, with its exact result."""
    rng = np.random.default_rng(0)
    G, S, B, D = 3, 2, 50, 6
    P, Q = (0.1 * rng.normal(size=(G, S, 2, 1, D, D)).astype(np.float32) for _ in range(2))
    Sm, zq, y = (rng.normal(size=(S, B) + core).astype(np.float32) for core in ((D, D), (D,), ()))
    step = jax.value_and_grad(kernel.loss, (0, 1))
    out = jax.jit(jax.vmap(jax.vmap(step), in_axes=(0, 0, None, None, None)))(P, Q, Sm, zq, y)
    ref = [jax.jit(jax.vmap(step))(P[g], Q[g], Sm, zq, y) for g in range(G)]
    for got, want in zip(jax.tree.leaves(out), zip(*(jax.tree.leaves(r) for r in ref))):
        np.testing.assert_array_equal(got, np.stack(want))
    # the same copies as leading axes of a direct call, the batch with fewer of them (NumPy's broadcasting), y in
    # float64 cast to the batch's float32, and vmapped over the copies with the batch's axes left as they are
    direct = jax.jit(jax.value_and_grad(lambda P, Q: kernel.loss(P, Q, Sm, zq, y.astype(np.float64)).sum(), (0, 1)))
    for got, want in zip(jax.tree.leaves(direct(P, Q)), (out[0].sum(), *out[1])):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    mapped = jax.jit(jax.vmap(lambda P, Q: kernel.loss(P, Q, Sm, zq, y)))(P, Q)
    np.testing.assert_array_equal(mapped, out[0])


@needs_kernel(6)
def test_pure_jax_sampler_draws_the_kernels_prompts():
    """The same key gives the same prompts on every path: the jax.numpy Philox4x32-10 + Box–Muller twin against
    the C sampler, to float64 rounding, and a law check (each normal standard, ≈ 0 correlation)."""
    from icldyn.components.prompts import PromptsData, make_task, philox_normals, prompt_matrix, sample_prompts_philox

    task = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), make_task(PromptsData(covariance="official",
                                                                                     noise_std=0.3), 1))
    key = jax.random.PRNGKey(11)
    twin = jax.jit(lambda k: sample_prompts_philox(task, key=k, batch=200, n=20))(key)  # one program, not one an op
    ref = kernel.sample_moments(task, key, 200, 20)
    for a, b in zip(jax.jit(moments)(twin), ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    Z, yq = kernel.sample_moments(task, key, 200, 20, columns=True)  # the same prompts as prompt matrices
    np.testing.assert_allclose(np.asarray(Z), np.asarray(jax.jit(prompt_matrix)(twin)), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(yq), np.asarray(ref[2]), rtol=1e-12, atol=1e-12)
    g = np.asarray(jax.jit(lambda k: philox_normals(k, 4000, 6, jnp.float64))(jnp.array([3, 4], jnp.uint32)))
    assert abs(g.mean()) < 0.02 and abs(g.std() - 1) < 0.02 and abs(np.corrcoef(g.T)[0, 1:]).max() < 0.05


@needs_kernel(D_ + 1)
@pytest.mark.parametrize("activation", kernel.ACTIVATIONS)
def test_column_kernel_loss_and_gradient_equal_autodiff(prompts, activation):
    """The fused column kernel (any activation) against autodiff of the JAX column form, float64, 2 heads, 3 layers,
    130 prompts (not a multiple of the vector width), two seeds in one call through vmap."""
    import dataclasses

    cols = LinearTransformer(D_, 3, heads=2, parameterization="full", init_std=0.4, form="columns",
                             activation=activation)
    kern = dataclasses.replace(cols, form="kernel")
    params = cols.init(key=jax.random.PRNGKey(1), dtype=jnp.float64)
    x = cols.prepare(prompts)
    seeds = jax.tree.map(lambda a: jnp.stack([a, 0.5 * a]), params)
    loss_k, grad_k = jax.vmap(jax.value_and_grad(kern.loss), in_axes=(0, None))(seeds, x)
    for s, scale in enumerate((1.0, 0.5)):
        p = jax.tree.map(lambda a: scale * a, params)
        loss_c, grad_c = jax.value_and_grad(cols.loss)(p, x)
        np.testing.assert_allclose(loss_k[s], loss_c, rtol=1e-12)
        for k in grad_c:
            np.testing.assert_allclose(grad_k[k][s], grad_c[k], rtol=1e-10,
                                       atol=1e-12 * float(jnp.abs(grad_c[k]).max()))


def _overcommit() -> str:
    """Linux's overcommit mode ('0' heuristic and '2' strict refuse an allocation beyond RAM + swap; '1' grants any)."""
    path = Path("/proc/sys/vm/overcommit_memory")
    return path.read_text().strip() if path.exists() else "unknown"


@needs_kernel(D_ + 1)
@pytest.mark.skipif(_overcommit() not in ("0", "2"), reason="this OS may grant the allocation and then run out")
def test_a_kernel_refused_its_scratch_memory_says_so_in_one_line():
    """Prompts of 40 000 tokens ask the column kernel for two n × n attention blocks per thread (≥ 2 × 51 GB), more
    than RAM + swap here: the kernel frees what it took and returns code 2, raised as one line (before: the NULL
    from aligned_alloc was written to), XLA's error code before it (and JAX's note on its traceback after it)."""
    P = jnp.zeros((1, 1, D_ + 1, D_ + 1))
    with pytest.raises(RuntimeError) as err:
        kernel.attn_loss(P, P, jnp.zeros((1, D_ + 1, 40_000)), jnp.zeros(1), "softmax").block_until_ready()
    assert str(err.value).splitlines()[0] == "RESOURCE_EXHAUSTED: attention kernel failed: out of memory for its " \
                                             "scratch buffers"


def _reference_attention(P, Q, Z, activation):
    """The official code's attention(P, Q, Z, activation), literally, in NumPy: tokens are rows, Z is (b, n+1, D),
    scores Z Q Zᵀ with the query as the row (so its Q is our Qᵀ), σ over the last axis, then the mask, then 1/n."""
    n = Z.shape[1] - 1
    attn = np.einsum("bni,ij,bmj->bnm", Z, Q, Z)
    if activation == "relu":
        attn = np.maximum(attn, 0.0)
    elif activation == "softmax":
        attn = np.exp(attn - attn.max(-1, keepdims=True))
        attn /= attn.sum(-1, keepdims=True)
    mask = np.eye(n + 1)
    mask[n, n] = 0.0
    return np.einsum("bnm,ml,bli->bni", attn, mask, np.einsum("ij,bnj->bni", P, Z)) / n


@pytest.mark.parametrize("activation", ["linear", "relu", "softmax"])
def test_activations_follow_the_official_attention(prompts, activation):
    model = LinearTransformer(D_, 2, parameterization="full", init_std=0.4, form="columns", activation=activation)
    params = model.init(key=jax.random.PRNGKey(3), dtype=jnp.float64)
    P, Q = (np.asarray(a) for a in model.PQ(params))
    Z = np.swapaxes(np.asarray(model.prepare(prompts).Z), 1, 2)  # tokens as rows
    for ell in range(2):
        Z = Z + _reference_attention(P[ell, 0], Q[ell, 0].T, Z, activation)
    np.testing.assert_allclose(model.readout(params, model.prepare(prompts)), Z[:, -1, -1], rtol=1e-12, atol=1e-13)


def test_masked_softmax_leaves_the_query_out_of_the_normalisation():
    from icldyn.components.linear_attention import attention_weights

    s = jax.random.normal(jax.random.PRNGKey(4), (3, 6, 6), jnp.float64)
    w = attention_weights(s, "softmax_masked")
    np.testing.assert_allclose(w.sum(-2), 1.0, rtol=1e-14)
    assert float(jnp.abs(w[:, -1]).max()) == 0.0
    ref = attention_weights(s, "softmax")  # the official code's: the query's weight is dropped after normalising
    np.testing.assert_allclose(ref / ref.sum(-2, keepdims=True), w, rtol=1e-12)


def test_an_explicit_kernel_on_another_backend_is_one_line(monkeypatch):
    """The kernel is an XLA custom call of the CPU backend: asked for on another, refused in one line naming the field
    and the allowed values; ``auto`` takes the JAX form there."""
    from icldyn.components.linear_attention import LinearAttentionModel, resolve_forward
    from icldyn.config import ConfigError

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    with pytest.raises(ConfigError, match=r"^model.forward = 'kernel' cannot be honoured here: C kernel unavailable: "
                                          r"it runs on the CPU backend, this one is gpu; allowed: 'auto', 'moments'"):
        resolve_forward(LinearAttentionModel(forward="kernel"), 5)
    assert resolve_forward(LinearAttentionModel(forward="auto"), 5) == "moments"


def test_a_pure_jax_run_does_not_build_the_kernel_to_report_it(monkeypatch):
    """``summary.json``'s execution for an explicit JAX form and sampler: no kernel built only to record its status
    (a compiler call, or a failed one, for a run that never calls it); ``auto`` still asks for it."""
    from icldyn.components import linear_attention
    from icldyn.plugins import get

    asked = []
    off = kernel.Status(False, "disabled", "off", "", None, None)
    monkeypatch.setattr(kernel, "status", lambda D: asked.append(D) or off)
    monkeypatch.setattr(kernel, "available", lambda D: False)
    cfg = get("quickstart").config({"model": {"forward": "moments"}, "data": {"sampler": "jax"}})
    ex = linear_attention.execution(cfg)
    assert (ex["forward"], ex["sampler"], ex["kernel"], asked) == ("moments", "jax", None, [])
    assert ex["note"].endswith("C kernel not asked for")
    ex = linear_attention.execution(cfg.model_copy(update={"model": cfg.model.model_copy(update={"forward": "auto"})}))
    assert (ex["forward"], ex["kernel"]["origin"], set(asked)) == ("moments", "disabled", {cfg.data.d + 1})
