"""Huang et al.: the exact population engine against Monte-Carlo GD on the full model, per step, side by side.

Both are the trainer's compiled chunk of k GD steps (no metrics inside), warm, alternating, 5 repeats,
median. Exact engine: one deterministic trajectory (the K×K scores; counts enumerated when there are at
most 200 000 count vectors, else 20 000 Monte-Carlo count vectors). Monte-Carlo GD: the d×d Q of the full
model, fresh prompts every step, 4 seeds (the huang-balanced recipe's error estimate) at two batch sizes.
Run: python -m benchmarks.huang
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import jax

from icldyn.runtime import setup_jax

HERE = Path(__file__).resolve().parent


def main() -> None:
    setup_jax()
    from icldyn.config import with_overrides
    from icldyn.papers.huang.problem import build
    from icldyn.plugins import get
    from icldyn.train.loop import init_states, make_chunk
    from icldyn.train.optimizers import build_optimizer

    base = get("huang-balanced").config(None)
    cases = []
    for K, N in ((4, 64), (8, 512)):
        variants = {"exact engine": {"train.oracle": "population", "seeds": 1}}
        for b in (1024, 4096):
            variants[f"MC GD, 4 seeds × {b} prompts"] = {"train.oracle": "sampled", "seeds": 4, "train.batch": b}
        timers = {}
        for name, over in variants.items():
            cfg = with_overrides(base, {"data.features": K, "data.d": K, "data.n": N, **over})
            setup = build(cfg)
            opt = build_optimizer(cfg.train)
            length = 20
            chunk = jax.jit(make_chunk(setup.problem, opt, length, 1))
            state = init_states(setup.problem, opt, setup.tasks, setup.keys)
            jax.block_until_ready(chunk(state, setup.tasks, None))
            timers[name] = (chunk, state, setup.tasks, length, setup.exact)
        times = {name: [] for name in timers}
        for _ in range(5):
            for name, (chunk, state, tasks, length, _) in timers.items():
                t0 = time.perf_counter()
                jax.block_until_ready(chunk(state, tasks, None))
                times[name].append((time.perf_counter() - t0) / length)
        ms = {name: 1e3 * statistics.median(v) for name, v in times.items()}
        cases.append({"K": K, "N": N, "exact_counts": timers["exact engine"][4], "ms_per_step": ms,
                      "ratios": {name: ms[name] / ms["exact engine"] for name in ms if name != "exact engine"}})
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "huang.json").write_text(json.dumps(cases, indent=2))
    print("| K | N | counts | exact engine ms/step | MC GD ms/step (4 × 1024) | ratio "
          "| MC GD ms/step (4 × 4096) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for c in cases:
        m, r = c["ms_per_step"], c["ratios"]
        a, b = "MC GD, 4 seeds × 1024 prompts", "MC GD, 4 seeds × 4096 prompts"
        print(f"| {c['K']} | {c['N']} | {'exact' if c['exact_counts'] else 'MC 20 000'} | {m['exact engine']:.2f} | "
              f"{m[a]:.1f} | **{r[a]:.0f}×** | {m[b]:.1f} | **{r[b]:.0f}×** |")


if __name__ == "__main__":
    main()
