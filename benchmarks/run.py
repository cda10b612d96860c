"""icldyn benchmark suite: one command, side-by-side timings against faithful baselines.

    python benchmarks/run.py                 # full suite → benchmarks/results/<host>.json + markdown on stdout
    python benchmarks/run.py --quick         # smaller repeats (a smoke run)

Each thread count runs in its own process pinned to that many cores (os.sched_setaffinity), so
icldyn and the baseline always share the same cores; measurements alternate between the two.
See docs/performance.md for the figures and benchmarks/README.md for what each row means.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import results_dir

HERE = Path(__file__).resolve().parent
D, N = 5, 20


# ---------------------------------------------------------------- FLOP counts (per prompt, per step)


def flops_reference(L: int, n: int = N, d: int = D) -> int:
    """Column form as the reference computes it, fwd MACs ×2 FLOP, ×3 for forward + backward."""
    D1, N1 = d + 1, n + 1
    fwd = 2 * N1 * D1 * D1 + 2 * N1 * N1 * D1 + N1**3  # ZQ, (ZQ)Zᵀ, PZ, (Attn·A), ·key
    return 3 * 2 * L * fwd


def flops_kernel(L: int, d: int = D) -> int:
    """The fused kernel's multiply-adds ×2, counted from _lsa_kernel.c (one head, every entry trained):
    forward S Q, P (S Q), T z per layer, T S and the upper triangle of (T S) Tᵀ except in the last; backward
    z̄ zᵀ, Tᵀ z̄ and five D³ products per layer, 2 S̄ (T S), S̄ T and the upper triangle of Tᵀ (S̄ T) except in
    the last."""
    D1 = d + 1
    upper = D1 * D1 * (D1 + 1) // 2
    fwd = L * (2 * D1**3 + D1**2) + (L - 1) * (D1**3 + upper)
    bwd = L * (5 * D1**3 + 2 * D1**2) + (L - 1) * (2 * D1**3 + upper)
    return 2 * (fwd + bwd)


def flops_sampler(n: int = N, d: int = D) -> int:
    D1 = d + 1
    return 2 * ((n + 1) * (d * d + d) + n * D1 * (D1 + 1) // 2 + d * d)


# ---------------------------------------------------------------- worker (one thread count)


def _median_spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def worker(threads: int, quick: bool) -> dict:
    os.sched_setaffinity(0, set(range(threads)))
    import jax
    import jax.numpy as jnp
    import numpy as np
    import torch

    from icldyn.runtime import setup_jax

    setup_jax()
    torch.set_num_threads(threads)
    from benchmarks import reference_torch as ref
    from icldyn.components import lsa_kernel as kernel
    from icldyn.components.linear_attention import moments
    from icldyn.components.prompts import Prompts
    from icldyn.config import build
    from icldyn.papers.ahn import problem as ahn_problem
    from icldyn.papers.ahn.recipes import OFFICIAL_TRAIN
    from icldyn.train.loop import init_states, make_chunk
    from icldyn.train.optimizers import build_optimizer

    out: dict = {"threads": threads, "rows": []}

    def official_cfg(L, B, resample, seeds=1, dtype="float32"):
        return build({"experiment": "ahn-loss-vs-layers", "seeds": seeds,
                      "data": {"kind": "prompts", "d": D, "n": N, "covariance": "official", "resample_every": resample,
                                "test_size": 1000},
                      "model": {"kind": "linear_attention", "layers": L, "parameterization": "relaxed",
                                 "init_std": 1e-4},
                      "train": {**OFFICIAL_TRAIN, "schedule": "constant", "lr": 0.01, "batch": B, "threads": threads,
                                "dtype": dtype}})

    # -- equal work: same init, same prompts, float64, a few steps: loss curves and parameters agree
    if threads == 1:
        cfg = official_cfg(3, 256, 1, dtype="float64")
        setup = ahn_problem.build(cfg)
        opt = build_optimizer(cfg.train)
        params = jax.tree.map(lambda a: a[0], init_states(setup.problem, opt, setup.tasks, setup.keys).params)
        # the reference's row form reads z_Nᵀ Q z_M: its Q block is the transpose of eq. (3)'s, i.e. −Aᵀ
        to_ref = lambda p: np.stack([np.asarray(p["B"]), -np.swapaxes(np.asarray(p["A"]), -1, -2)], axis=2)  # noqa: E731
        allparam = torch.tensor(to_ref(params))
        tr = ref.Trainer(allparam, lr=0.01, clip=0.01)
        ostate = opt.init(params)

        @jax.jit
        def step(params, ostate, x):
            loss, g = jax.value_and_grad(setup.model.loss)(params, x)
            upd, ostate = opt.update(g, ostate, params)
            return jax.tree.map(jnp.add, params, upd), ostate, loss

        rng = np.random.default_rng(0)
        task = jax.tree.map(lambda a: np.asarray(a[0]), setup.tasks)
        curves = []
        for _ in range(5):
            X = rng.standard_normal((256, N + 1, D)) @ task.sigma_sqrt
            w = rng.standard_normal((256, D)) @ task.w_sqrt.T
            y = np.einsum("bnd,bd->bn", X, w)
            params, ostate, l_icl = step(params, ostate, moments(Prompts(jnp.asarray(X), jnp.asarray(y))))
            Z, yt = ref.prompt_tensor(torch.tensor(X), torch.tensor(y))
            curves.append((float(l_icl), tr.step(Z, yt)))
        final = to_ref(params)
        out["equal_work"] = {
            "steps": len(curves), "dtype": "float64", "losses": curves,
            "max_rel_loss_diff": max(abs(a - b) / abs(b) for a, b in curves),
            "max_rel_param_diff": float(np.abs(final - tr.allparam.detach().numpy()).max()
                                        / np.abs(final).max())}
        print(json.dumps(out["equal_work"]), file=sys.stderr, flush=True)

    # -- machine rates on these cores
    def rate(fn, flops, reps=5):
        fn()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        return flops * reps / (time.perf_counter() - t) / 1e9

    a = jnp.ones((2048, 2048), jnp.float32)
    mm = jax.jit(lambda x: x @ x)
    out["gflops_large_matmul"] = rate(lambda: mm(a).block_until_ready(), 2 * 2048**3)
    bs = jnp.ones((20_000, D + 1, D + 1), jnp.float32)
    bmm = jax.jit(lambda x: jnp.einsum("bij,bjk->bik", x, x))
    out["gflops_xla_batched_6x6"] = rate(lambda: bmm(bs).block_until_ready(), 2 * 20_000 * (D + 1) ** 3, 20)

    # -- training steps/s: icldyn (one compiled chunk of k steps) vs the torch loop, alternating
    grid = [(L, B) for L in (1, 3, 4) for B in (1000, 20_000)]
    repeats = 3 if quick else 5
    for L, B in grid:
        for resample in (1, 100):
            cfg = official_cfg(L, B, resample)
            setup = ahn_problem.build(cfg)
            opt = build_optimizer(cfg.train)
            k = 200 if B == 1000 else 100
            chunk = jax.jit(make_chunk(setup.problem, opt, k, resample))
            state = init_states(setup.problem, opt, setup.tasks, setup.keys)
            t0 = time.perf_counter()
            state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
            first = time.perf_counter() - t0

            task = jax.tree.map(lambda a: np.asarray(a[0], np.float32), setup.tasks)
            UD, UDinv = torch.tensor(task.sigma_sqrt), torch.tensor(np.linalg.inv(task.sigma_sqrt))
            tr = ref.Trainer(torch.randn(L, 1, 2, D, D) * 1e-4, lr=0.01, clip=0.01)
            kt = 10 if B == 1000 else 2
            data = ref.sample(B, N, UD, UDinv)

            def torch_steps():
                nonlocal data
                for i in range(kt):
                    if resample == 1 or i == 0:
                        data = ref.sample(B, N, UD, UDinv)
                    tr.step(*data)

            torch_steps()
            ours, theirs = [], []
            for _ in range(repeats):
                t = time.perf_counter()
                state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
                ours.append(k / (time.perf_counter() - t))
                t = time.perf_counter()
                torch_steps()
                theirs.append(kt / (time.perf_counter() - t))
            ratios = [o / t for o, t in zip(ours, theirs)]
            our_med = statistics.median(ours)
            out["rows"].append({
                "L": L, "batch": B, "resample_every": resample, "threads": threads,
                "icldyn_steps_per_s": _median_spread(ours), "torch_steps_per_s": _median_spread(theirs),
                "ratio": _median_spread(ratios), "compile_plus_first_chunk_s": first,
                "icldyn_gflops": our_med * B * (flops_kernel(L) + (flops_sampler() if resample == 1 else 0)) / 1e9,
                "torch_gflops": statistics.median(theirs) * B * flops_reference(L) / 1e9,
                "kernel_path": setup.model.form})
            print(json.dumps(out["rows"][-1]), file=sys.stderr, flush=True)

    # -- seeds in one program vs one seed, batch 1000, L = 3
    for seeds in (1, 5):
        cfg = official_cfg(3, 1000, 1, seeds=seeds)
        setup = ahn_problem.build(cfg)
        opt = build_optimizer(cfg.train)
        chunk = jax.jit(make_chunk(setup.problem, opt, 200, 1))
        state = init_states(setup.problem, opt, setup.tasks, setup.keys)
        state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
            times.append((time.perf_counter() - t) / 200)
        out[f"seconds_per_step_seeds{seeds}"] = _median_spread(times)
    out["seeds5_over_seeds1"] = out["seconds_per_step_seeds5"]["median"] / out["seconds_per_step_seeds1"]["median"]
    out["kernel_available"] = kernel.available(6)
    return out


def markdown(results: list[dict]) -> str:
    lines = ["| L | batch | data redrawn every | threads | icldyn steps/s | PyTorch steps/s "
             "| ratio (median [min, max]) | icldyn GFLOP/s | PyTorch GFLOP/s | compile + first chunk (s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for r in res["rows"]:
            q = r["ratio"]
            lines.append(f"| {r['L']} | {r['batch']} | {r['resample_every']} | {r['threads']} | "
                         f"{r['icldyn_steps_per_s']['median']:.1f} | {r['torch_steps_per_s']['median']:.2f} | "
                         f"**{q['median']:.0f}×** [{q['min']:.0f}, {q['max']:.0f}] | {r['icldyn_gflops']:.1f} | "
                         f"{r['torch_gflops']:.1f} | {r['compile_plus_first_chunk_s']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.quick)))
        return
    results = []
    for t in args.threads:
        cmd = [sys.executable, "-m", "benchmarks.run", "--worker", str(t)] + (["--quick"] if args.quick else [])
        proc = subprocess.run(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, text=True, check=True)
        results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    meta = {"host": platform.node(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "time": time.strftime("%Y-%m-%d %H:%M")}
    (results_dir(args.quick) / "latest.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(markdown(results))
    for res in results:
        print(f"\nthreads={res['threads']}: large matmul {res['gflops_large_matmul']:.1f} GFLOP/s, "
              f"XLA batched 6×6 {res['gflops_xla_batched_6x6']:.1f} GFLOP/s; 5 seeds / 1 seed per step = "
              f"{res['seeds5_over_seeds1']:.2f}")
        if "equal_work" in res:
            print(f"equal work: {res['equal_work']}")


if __name__ == "__main__":
    main()
