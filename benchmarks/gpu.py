"""GPU figures (under 5 minutes on one CUDA device): icldyn's training steps/s with the JAX moment
form and threefry sampling (the C kernels are CPU-only), for the same grid as the CPU suite, plus
one seed vs five seeds vmapped. Prints a markdown table; writes benchmarks/results/gpu.json.

    bash benchmarks/gpu.sh
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax

from icldyn.config import build
from icldyn.papers.ahn import problem as ahn_problem
from icldyn.papers.ahn.recipes import OFFICIAL_TRAIN
from icldyn.runtime import setup_jax
from icldyn.train.loop import init_states, make_chunk
from icldyn.train.optimizers import build_optimizer


def steps_per_s(L: int, B: int, seeds: int, resample: int, k: int = 200, repeats: int = 3) -> tuple[float, float]:
    cfg = build({"experiment": "ahn-loss-vs-layers", "seeds": seeds,
                 "data": {"kind": "prompts", "covariance": "official", "resample_every": resample, "test_size": 1000,
                           "sampler": "jax"},
                 "model": {"kind": "linear_attention", "layers": L, "parameterization": "relaxed", "init_std": 1e-4,
                            "forward": "moments"},
                 "train": {**OFFICIAL_TRAIN, "schedule": "constant", "lr": 0.01, "batch": B}})
    setup = ahn_problem.build(cfg)
    opt = build_optimizer(cfg.train)
    chunk = jax.jit(make_chunk(setup.problem, opt, k, resample))
    state = init_states(setup.problem, opt, setup.tasks, setup.keys)
    t = time.perf_counter()
    state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(repeats):
        state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
    return k * repeats / (time.perf_counter() - t), first


def main() -> None:
    setup_jax()
    rows = []
    for L in (1, 3, 4):
        for B in (1000, 20_000):
            for resample in (1, 100):
                sps, first = steps_per_s(L, B, 1, resample)
                rows.append({"L": L, "batch": B, "resample_every": resample, "steps_per_s": sps, "compile_s": first})
                print(json.dumps(rows[-1]), flush=True)
    one, _ = steps_per_s(3, 1000, 1, 1)
    five, _ = steps_per_s(3, 1000, 5, 1)
    out = {"device": str(jax.devices()[0]), "rows": rows, "seeds5_over_seeds1": one / five}
    Path(__file__).with_name("results").mkdir(exist_ok=True)
    Path(__file__).with_name("results").joinpath("gpu.json").write_text(json.dumps(out, indent=2))
    print("| L | batch | redrawn every | steps/s | compile + first chunk (s) |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['L']} | {r['batch']} | {r['resample_every']} | {r['steps_per_s']:.0f} | {r['compile_s']:.1f} |")
    print(f"5 seeds vmapped / 1 seed, per step (L=3, batch 1000): {out['seeds5_over_seeds1']:.2f}")


if __name__ == "__main__":
    main()
