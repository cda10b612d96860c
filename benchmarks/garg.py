"""Garg et al.'s training step: icldyn's GPT (one compiled chunk of k steps: sampling, forward, backward, Adam) against
the reference — their ``TransformerModel`` (a Hugging Face GPT2Model between two Linears) in PyTorch with their
``train_step`` (fresh prompts, forward, MSE at every position, backward, Adam) — side by side in one process.

Set-up of their last curriculum stage: d = 20, 41 points, batch 64, Adam lr 1e-4; sizes tiny (64/3/2) and small
(128/6/4). One core, one thread each (os.sched_setaffinity, torch.set_num_threads(1), XLA's single-thread flags).
Equal work is checked first, in float64: the same weights (the reference's state dict loaded by
``icldyn.components.gpt.from_state_dict``) and the same prompts give the same loss and gradients, and five Adam steps
the same parameters. Then the two alternate, 5 repeats each; median steps/s and the range, and GFLOP/s from the
analytic FLOP count against this core's 2048² float32 matmul rate.

Many seeds: icldyn's seeds (and seeds × learning rates) in one compiled chunk — looped inside the program on a CPU
(``Problem.seed_map = "map_slots"``, :func:`icldyn.components.gpt.seed_map`; ``--vmap`` times them vmapped instead) —
against the reference training the same number of models one after another, throughput in seed-steps/s, on one
thread and on two (a worker process per thread count, pinned to that many cores). Per-seed work is checked equal
first: the vmapped loss and gradients of five reference models' weights on five batches equal each reference model's
own (float64).

Run: python -m benchmarks.garg [--quick] [--vmap]   (writes benchmarks/results/garg.json; --quick: results/quick/;
--vmap: garg-vmap.json)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks import HERE, reference, results_dir

D, POINTS, BATCH, LR = 20, 41, 64, 1e-4


def flops_step(E: int, L: int, H: int, b: int = BATCH, T: int = 2 * POINTS, d: int = D) -> int:
    """Forward + backward (3× the forward's matmul FLOPs): read-in, per block QKV, attention scores and mix, output
    projection, the 4E MLP, and the read-out."""
    per_block = 2 * T * (3 * E * E + E * E + 8 * E * E) + 2 * 2 * T * T * E
    forward = b * (2 * T * d * E + L * per_block + 2 * POINTS * E)
    return 3 * forward


def _median_spread(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def worker(threads: int, quick: bool, vmap: bool = False) -> dict:
    """One thread: matmul peak, equal work, one seed's steps/s at tiny and small, then many seeds; two threads: the
    matmul peak and many seeds."""
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:threads]))
    if threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
                                   " intra_op_parallelism_threads=1").strip()
    import jax
    import jax.numpy as jnp
    import optax

    from icldyn.runtime import setup_jax

    setup_jax()
    torch, Reference = reference()  # Garg et al.'s TransformerModel, defined once (the parity test)
    torch.set_num_threads(threads)
    from icldyn.components import gpt
    from icldyn.components.prompts import Prompts
    from icldyn.papers.garg.problem import Batch, build
    from icldyn.plugins import get
    from icldyn.recipe import flat_params
    from icldyn.train.loop import init_states, make_chunk
    from icldyn.train.optimizers import build_optimizer

    def cfg_of(size: str, dtype: str = "float32"):
        return get("garg-linear").config({"data": {"d": D, "n": POINTS - 1, "dims_start": None, "points_start": None,
                                                   "test_size": 64},
                                          "model": {"size": size},
                                          "train": {"batch": BATCH, "lr": LR, "dtype": dtype}})

    out: dict = {"machine": os.uname().nodename, "threads": threads, "rows": [], "seeds": []}
    a = jnp.ones((2048, 2048), jnp.float32)
    mm = jax.jit(lambda x: x @ x)
    mm(a).block_until_ready()
    t = time.perf_counter()
    for _ in range(3):
        mm(a).block_until_ready()
    out["gflops_large_matmul"] = 3 * 2 * 2048**3 / (time.perf_counter() - t) / 1e9

    for size in ("tiny", "small") if threads == 1 else ():
        E, L, H = gpt.SIZES[size]
        # -- equal work (float64): same weights, same prompts -> same loss, gradients, and 5 Adam steps
        torch.manual_seed(0)
        ref = Reference(D, POINTS, E, L, H).double()
        cfg = cfg_of(size, "float64")
        s = build(cfg)
        params = gpt.from_state_dict(ref.state_dict(), jnp.float64)
        xs = torch.randn(BATCH, POINTS, D, dtype=torch.float64)
        w = torch.randn(BATCH, D, 1, dtype=torch.float64)
        ys = (xs @ w)[:, :, 0]
        batch = Batch(Prompts(jnp.asarray(xs.numpy()), jnp.asarray(ys.numpy())), jnp.asarray(POINTS, jnp.int32))
        loss_j, grads_j = jax.value_and_grad(s.problem.loss)(params, batch)
        loss_t = (ref(xs, ys) - ys).square().mean()
        ref.zero_grad()
        loss_t.backward()
        grads_t = gpt.from_state_dict({k: p.grad for k, p in ref.named_parameters()}, jnp.float64)
        fj, ft = flat_params(grads_j), flat_params(grads_t)
        grad_rel = max(float(jnp.max(jnp.abs(fj[k] - ft[k])) / (jnp.max(jnp.abs(ft[k])) + 1e-300)) for k in fj)
        opt_j = build_optimizer(cfg.train)
        opt_t = torch.optim.Adam(ref.parameters(), lr=LR)
        state_j, p_j = opt_j.init(params), params
        for _ in range(5):
            g = jax.grad(s.problem.loss)(p_j, batch)
            upd, state_j = opt_j.update(g, state_j, p_j)
            p_j = optax.apply_updates(p_j, upd)
            opt_t.zero_grad()
            (ref(xs, ys) - ys).square().mean().backward()
            opt_t.step()
        fp, fr = flat_params(p_j), flat_params(gpt.from_state_dict(ref.state_dict(), jnp.float64))
        param_rel = max(float(jnp.max(jnp.abs(fp[k] - fr[k])) / jnp.max(jnp.abs(fr[k]))) for k in fp)
        equal = {"loss": [float(loss_j), loss_t.item()], "max_rel_grad_diff": grad_rel,
                 "max_rel_param_diff_after_5_adam_steps": param_rel}
        print(size, "equal work:", json.dumps(equal), file=sys.stderr, flush=True)
        assert abs(float(loss_j) - loss_t.item()) <= 1e-10 * abs(loss_t.item()) and grad_rel <= 1e-8, equal

        # -- steps/s, float32, alternating
        cfg = cfg_of(size)
        s = build(cfg)
        opt = build_optimizer(cfg.train)
        k = 10 if quick else (40 if size == "tiny" else 10)
        chunk = jax.jit(make_chunk(s.problem, opt, k, 1))
        state = init_states(s.problem, opt, s.tasks, s.keys)
        t0 = time.perf_counter()
        state, _ = jax.block_until_ready(chunk(state, s.tasks, s.tests))
        first = time.perf_counter() - t0
        ref32 = Reference(D, POINTS, E, L, H)
        opt32 = torch.optim.Adam(ref32.parameters(), lr=LR)

        def torch_steps():
            for _ in range(k):
                xs = torch.randn(BATCH, POINTS, D)
                ys = (xs @ torch.randn(BATCH, D, 1))[:, :, 0]
                opt32.zero_grad()
                loss = (ref32(xs, ys) - ys).square().mean()
                loss.backward()
                opt32.step()

        torch_steps()
        ours, theirs = [], []
        for _ in range(3 if quick else 5):
            t = time.perf_counter()
            state, _ = jax.block_until_ready(chunk(state, s.tasks, s.tests))
            ours.append(k / (time.perf_counter() - t))
            t = time.perf_counter()
            torch_steps()
            theirs.append(k / (time.perf_counter() - t))
        ratios = [a / b for a, b in zip(ours, theirs)]
        flops = flops_step(E, L, H)
        row = {"size": size, "n_embd": E, "layers": L, "heads": H, "equal_work": equal,
               "icldyn_steps_s": _median_spread(ours), "pytorch_steps_s": _median_spread(theirs),
               "ratio": _median_spread(ratios), "icldyn_gflops": flops * statistics.median(ours) / 1e9,
               "pytorch_gflops": flops * statistics.median(theirs) / 1e9, "compile_and_first_chunk_s": first}
        out["rows"].append(row)
        print(f"{size}: icldyn {row['icldyn_steps_s']['median']:.2f} steps/s, PyTorch "
              f"{row['pytorch_steps_s']['median']:.2f} steps/s, ratio {row['ratio']['median']:.2f} "
              f"({row['ratio']['min']:.2f}–{row['ratio']['max']:.2f}); GFLOP/s {row['icldyn_gflops']:.1f} vs "
              f"{row['pytorch_gflops']:.1f} (matmul peak {out['gflops_large_matmul']:.1f})", file=sys.stderr,
              flush=True)

    # -- many seeds: one program (seeds looped inside it, or vmapped) against the reference's models one after another
    def ref_steps(models, opts, k):
        for _ in range(k):
            for m, o in zip(models, opts):
                xs = torch.randn(BATCH, POINTS, D)
                ys = (xs @ torch.randn(BATCH, D, 1))[:, :, 0]
                o.zero_grad()
                (m(xs, ys) - ys).square().mean().backward()
                o.step()

    for size in ("tiny",) if quick else ("tiny", "small"):
        E, L, H = gpt.SIZES[size]
        if threads == 1:  # per-seed work: the vmapped loss and gradients = each reference model's own (float64)
            torch.manual_seed(1)
            refs = [Reference(D, POINTS, E, L, H).double() for _ in range(5)]
            stack = lambda ts: jax.tree.map(lambda *a: jnp.stack(a), *ts)  # noqa: E731
            P = stack([gpt.from_state_dict(r.state_dict(), jnp.float64) for r in refs])
            xs = torch.randn(5, BATCH, POINTS, D, dtype=torch.float64)
            ys = (xs @ torch.randn(5, BATCH, D, 1, dtype=torch.float64))[..., 0]
            s = build(cfg_of(size, "float64"))
            B = Batch(Prompts(jnp.asarray(xs.numpy()), jnp.asarray(ys.numpy())),
                      jnp.full((5,), POINTS, jnp.int32))
            loss_j, grads_j = jax.vmap(jax.value_and_grad(s.problem.loss))(P, B)
            worst = 0.0
            for i, r in enumerate(refs):
                lt = (r(xs[i], ys[i]) - ys[i]).square().mean()
                r.zero_grad()
                lt.backward()
                gt = flat_params(gpt.from_state_dict({n: q.grad for n, q in r.named_parameters()}, jnp.float64))
                gj = flat_params(jax.tree.map(lambda a, i=i: a[i], grads_j))
                lv = float(lt.detach())
                worst = max(worst, abs(float(loss_j[i]) - lv) / lv,
                            *(float(jnp.max(jnp.abs(gj[n] - gt[n])) / (jnp.max(jnp.abs(gt[n])) + 1e-300)) for n in gj))
            print(size, f"per-seed work, 5 seeds vmapped vs 5 reference models: max rel diff {worst:.1e}",
                  file=sys.stderr, flush=True)
            assert worst <= 1e-8, worst
        grids = [(5, None)] if quick else [(5, None), (5, [LR, 3 * LR, 1e-3])]
        for n_seeds, lrs in grids:
            cfg = cfg_of(size).model_copy(update={"seeds": n_seeds})
            s = build(cfg)
            opt = build_optimizer(cfg.train)
            copies = 1 if lrs is None else len(lrs)
            k = 10 if size == "tiny" else 4
            problem = s.problem._replace(seed_map="vmap") if vmap else s.problem
            chunk = jax.jit(make_chunk(problem, opt, k, 1, copies))
            state = init_states(problem, opt, s.tasks, s.keys, lrs=lrs)
            state, _ = jax.block_until_ready(chunk(state, s.tasks, s.tests))
            slots = n_seeds * copies
            models = [Reference(D, POINTS, E, L, H) for _ in range(slots)]
            opts = [torch.optim.Adam(m.parameters(), lr=lr) for m, lr in
                    zip(models, [LR] * slots if lrs is None else [lr for lr in lrs for _ in range(n_seeds)])]
            ref_steps(models, opts, 1)
            ours, theirs = [], []
            for _ in range(3):
                t = time.perf_counter()
                state, _ = jax.block_until_ready(chunk(state, s.tasks, s.tests))
                ours.append(slots * k / (time.perf_counter() - t))
                t = time.perf_counter()
                ref_steps(models, opts, k)
                theirs.append(slots * k / (time.perf_counter() - t))
            ratios = [a / b for a, b in zip(ours, theirs)]
            flops = flops_step(E, L, H)
            row = {"size": size, "seeds": n_seeds, "lrs": lrs, "slots": slots, "seed_map": problem.seed_map,
                   "icldyn_seed_steps_s": _median_spread(ours), "pytorch_seed_steps_s": _median_spread(theirs),
                   "ratio": _median_spread(ratios), "icldyn_gflops": flops * statistics.median(ours) / 1e9,
                   "pytorch_gflops": flops * statistics.median(theirs) / 1e9}
            out["seeds"].append(row)
            what = f"{n_seeds} seeds" + ("" if lrs is None else f" × {len(lrs)} learning rates")
            print(f"{size}, {what}, {threads} thread(s): icldyn {row['icldyn_seed_steps_s']['median']:.2f} "
                  f"seed-steps/s (one program, {problem.seed_map}), PyTorch "
                  f"{row['pytorch_seed_steps_s']['median']:.2f} (one after "
                  f"another), throughput ratio {row['ratio']['median']:.2f} ({row['ratio']['min']:.2f}–"
                  f"{row['ratio']['max']:.2f}); GFLOP/s {row['icldyn_gflops']:.1f} vs {row['pytorch_gflops']:.1f} "
                  f"(matmul peak {out['gflops_large_matmul']:.1f})", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--vmap", action="store_true", help="many seeds vmapped (the accelerator's mapping) instead")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.quick, args.vmap)))
        return
    res = {}
    for t in (1, 2):  # a process per thread count (XLA fixes its thread pool when it starts); progress on stderr
        cmd = [sys.executable, "-m", "benchmarks.garg", "--worker", str(t)] + (["--quick"] if args.quick else []) + (
            ["--vmap"] if args.vmap else [])
        proc = subprocess.run(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, text=True, check=True)
        res[t] = json.loads(proc.stdout.strip().splitlines()[-1])
    out = res[1] | {"seeds_two_threads": {"gflops_large_matmul": res[2]["gflops_large_matmul"],
                                          "rows": res[2]["seeds"]}}
    (results_dir(args.quick) / ("garg-vmap.json" if args.vmap else "garg.json")).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
