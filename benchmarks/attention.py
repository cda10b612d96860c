"""Softmax and ReLU attention (``model.activation``) against the official training loop, side by side.

    python -m benchmarks.attention            # ≈ 3 min: results/attention.json + markdown on stdout
    python -m benchmarks.attention --quick    # fewer repeats

One process pinned to one core, one thread each (os.sched_setaffinity, torch.set_num_threads(1), XLA's
single-threaded CPU client). For each activation:

1. **equal work**: the same parameters (relaxed, L = 3, random blocks of scale 0.3) and the same 512 prompts in
   float64 give icldyn's fused column kernel and the reference (`reference_torch.attention` with ``torch.relu`` /
   ``torch.softmax`` over the keys, autograd) the same loss and gradient; the largest relative differences are
   recorded (float64 rounding is ≈ 1e-15).
2. **training steps/s** at the official size (L = 3, d = 5, n = 20, batch 20 000, fresh prompts every step,
   per-block clipping 0.01, AdamW(0.99, 0.9)), float32: icldyn's compiled chunk of k steps (Philox prompts,
   kernel forward + backward, clipping, AdamW) alternating with the PyTorch loop (fresh ``torch.randn`` prompts,
   forward, backward, clipping, AdamW); the median and spread of each and of their ratio over the repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks import results_dir

HERE = Path(__file__).resolve().parent
L, D, N, BATCH = 3, 5, 20, 20_000


def flops_kernel(activation: str, layers: int = L, d: int = D, n: int = N) -> int:
    """The column kernel's multiply-adds ×2 per prompt and step, counted from _lsa_kernel.c (one head): a full layer
    forms u_j = Qz_j, the scores of R keys (R = n + 1 for the official softmax, whose normalisation reads the query's
    own score, else n), v_i = Pz_i and the output (4 products); its backward recomputes v, forms dv and dw, dP, Pᵀdv,
    the two score products and dQ, Qᵀdu. The last layer forms the query column only."""
    D1, N1 = d + 1, n + 1
    R = N1 if activation == "softmax" else n
    full = D1 * D1 * (N1 + n) + R * N1 * D1 + n * N1 * D1  # forward
    full += 3 * D1 * D1 * n + 2 * n * N1 * D1 + 2 * R * N1 * D1 + 2 * D1 * D1 * N1  # backward
    last = D1 * D1 * (1 + n) + R * D1 + n * D1 + 3 * D1 * D1 * n + 2 * n * D1 + 2 * R * D1 + 2 * D1 * D1
    return 2 * ((layers - 1) * full + last)


def _median_spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                               " intra_op_parallelism_threads=1").strip()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    from icldyn.runtime import setup_jax

    setup_jax()
    torch.set_num_threads(1)
    from benchmarks import reference_torch as ref
    from icldyn.components import lsa_kernel as kernel
    from icldyn.components.prompts import Prompts
    from icldyn.config import build
    from icldyn.papers.ahn import problem as ahn_problem
    from icldyn.papers.ahn.recipes import OFFICIAL_TRAIN
    from icldyn.train.loop import init_states, make_chunk
    from icldyn.train.optimizers import build_optimizer

    def cfg_of(activation: str, batch: int, dtype: str = "float32"):
        return build({"experiment": "ahn-loss-vs-layers", "seeds": 1,
                      "data": {"kind": "prompts", "d": D, "n": N, "covariance": "official", "resample_every": 1,
                               "test_size": 1000},
                      "model": {"kind": "linear_attention", "layers": L, "parameterization": "relaxed",
                                 "init_std": 1e-4,
                                "activation": activation},
                      "train": {**OFFICIAL_TRAIN, "schedule": "constant", "lr": 0.01, "batch": batch, "threads": 1,
                                "dtype": dtype}})

    # the reference's row form reads z_Nᵀ Q z_M: its Q block is the transpose of eq. (3)'s, i.e. −Aᵀ
    to_ref = lambda p: np.stack([np.asarray(p["B"]), -np.swapaxes(np.asarray(p["A"]), -1, -2)], axis=2)  # noqa: E731
    repeats = 3 if args.quick else 7
    out: dict = {"setting": {"L": L, "d": D, "n": N, "batch": BATCH, "threads": 1, "dtype": "float32"},
                 "kernel": kernel.status(D + 1).as_dict(), "rows": []}
    for activation in ("relu", "softmax"):
        # -- equal work, float64
        setup = ahn_problem.build(cfg_of(activation, 512, "float64"))
        rng = np.random.default_rng(0)
        params = {k: jnp.asarray(0.3 * rng.standard_normal((L, 1, D, D))) for k in ("A", "B")}
        task = jax.tree.map(lambda a: np.asarray(a[0]), setup.tasks)
        X = rng.standard_normal((512, N + 1, D)) @ task.sigma_sqrt
        y = np.einsum("bnd,bd->bn", X, rng.standard_normal((512, D)) @ task.w_sqrt.T)
        ours, g = jax.value_and_grad(setup.model.loss)(params, setup.model.prepare(Prompts(jnp.asarray(X),
                                                                                           jnp.asarray(y))))
        allparam = torch.tensor(to_ref(params), requires_grad=True)
        theirs = ref.loss_fn(allparam, *ref.prompt_tensor(torch.tensor(X), torch.tensor(y)),
                             ref.ACTIVATIONS[activation])
        theirs.backward()
        g_ref, g_ours = allparam.grad.numpy(), to_ref(g)
        equal = {"dtype": "float64", "prompts": 512, "loss_icldyn": float(ours), "loss_reference": float(theirs),
                 "rel_loss_diff": abs(float(ours) - float(theirs)) / abs(float(theirs)),
                 "rel_grad_diff": float(np.abs(g_ours - g_ref).max() / np.abs(g_ref).max()),
                 "forward": setup.model.form}
        print(json.dumps({activation: equal}), file=sys.stderr, flush=True)

        # -- training steps/s, float32
        cfg = cfg_of(activation, BATCH)
        setup = ahn_problem.build(cfg)
        opt = build_optimizer(cfg.train)
        k = 10
        chunk = jax.jit(make_chunk(setup.problem, opt, k, 1))
        state = init_states(setup.problem, opt, setup.tasks, setup.keys)
        t0 = time.perf_counter()
        state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
        first = time.perf_counter() - t0
        task = jax.tree.map(lambda a: np.asarray(a[0], np.float32), setup.tasks)
        UD, UDinv = torch.tensor(task.sigma_sqrt), torch.tensor(np.linalg.inv(task.sigma_sqrt))
        tr = ref.Trainer(torch.randn(L, 1, 2, D, D) * 1e-4, lr=0.01, clip=0.01, activation=activation)

        def torch_step():
            return tr.step(*ref.sample(BATCH, N, UD, UDinv))

        torch_step()
        ours_s, theirs_s = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
            ours_s.append(k / (time.perf_counter() - t))
            t = time.perf_counter()
            torch_step()
            theirs_s.append(1 / (time.perf_counter() - t))
        row = {"activation": activation, "equal_work": equal, "icldyn_steps_per_s": _median_spread(ours_s),
               "reference_steps_per_s": _median_spread(theirs_s),
               "ratio": _median_spread([o / t for o, t in zip(ours_s, theirs_s)]),
               "compile_plus_first_chunk_s": first, "forward": setup.model.form,
               "kernel_flops_per_prompt": flops_kernel(activation),
               "icldyn_gflops": statistics.median(ours_s) * BATCH * flops_kernel(activation) / 1e9}
        out["rows"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    (results_dir(args.quick) / "attention.json").write_text(json.dumps(out, indent=1) + "\n")
    print("| activation | icldyn steps/s | reference steps/s | ratio (median, range) | equal work: loss, gradient "
          "| kernel GFLOP/s (whole step) |")
    print("|---|---|---|---|---|---|")
    for r in out["rows"]:
        o, t, q, e = r["icldyn_steps_per_s"], r["reference_steps_per_s"], r["ratio"], r["equal_work"]
        print(f"| {r['activation']} | {o['median']:.1f} ({o['min']:.1f}–{o['max']:.1f}) | {t['median']:.2f} "
              f"({t['min']:.2f}–{t['max']:.2f}) | {q['median']:.1f}× ({q['min']:.1f}–{q['max']:.1f}) | "
              f"{e['rel_loss_diff']:.1e}, {e['rel_grad_diff']:.1e} | {r['icldyn_gflops']:.1f} |")


if __name__ == "__main__":
    main()
