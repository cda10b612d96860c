"""Goel et al.: Algorithm 1 against the best-tuned Adam, in iterations and seconds to excess loss 1e-8.

Iterations come from the goel-convergence quick recipe (exact population gradients, 2 seeds, the
slowest seed counts, "reached" = stays below 1e-8 to the end of the run). Seconds per iteration are
timed on one compiled chunk of k steps per method (warm, no metrics inside), alternating the methods,
5 repeats, median; seconds to target = iterations × seconds per iteration. Also times one step of the
sampled-gradient oracle (n = 200, 16 prompts). Run: python -m benchmarks.goel [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks import results_dir

import jax

from icldyn.runtime import setup_jax

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args()
    setup_jax()
    import tempfile

    from icldyn.config import with_overrides
    from icldyn.papers.goel.problem import build
    from icldyn.plugins import get
    from icldyn.runner import execute
    from icldyn.train.loop import init_states, make_chunk

    cfg = get("goel-convergence").config(None, quick=True)
    with tempfile.TemporaryDirectory() as store:
        _, summary = execute(cfg, store)
    shown = {p["point"]: p for p in summary["points"] if p.get("tuned_best", True)}
    alg = next(p for p in shown.values() if p["method"] == "algorithm 1")
    adam = shown[summary["adam_best"]]
    gd = next(p for p in shown.values() if p["method"] == "GD")

    def overrides(p):
        from icldyn.papers.goel.recipes import CONVERGENCE_METHODS
        m = next(m for m in CONVERGENCE_METHODS if m.name == p["method"])
        return {**m.overrides, "train.lr": p["lr"]}

    k, reps = 1000, 3 if args.quick else 5
    timers = {}
    for name, p in (("algorithm 1", alg), ("Adam (best)", adam), ("GD", gd),
                    ("sampled oracle step (n=200, 16 prompts)",
                     {"method": "algorithm 1, sampled", "lr": cfg.train.lr})):
        pcfg = with_overrides(cfg, {**overrides(p), "seeds": 1})
        setup = build(pcfg)
        length = k if pcfg.train.oracle == "population" else 50
        chunk = jax.jit(make_chunk(setup.problem, setup.opt, length, 1))
        state = init_states(setup.problem, setup.opt, setup.tasks, setup.keys)
        t0 = time.perf_counter()
        jax.block_until_ready(chunk(state, setup.tasks, None))
        timers[name] = (chunk, state, setup.tasks, length, time.perf_counter() - t0)
    times = {name: [] for name in timers}
    for _ in range(reps):  # alternate the methods
        for name, (chunk, state, tasks, length, _) in timers.items():
            t0 = time.perf_counter()
            jax.block_until_ready(chunk(state, tasks, None))
            times[name].append((time.perf_counter() - t0) / length)
    rows = []
    for name, p in (("algorithm 1", alg), ("Adam (best)", adam), ("GD", gd)):
        per = statistics.median(times[name])
        its = p["steps_to_target"]
        rows.append({"method": name, "point": p["point"], "iterations": its, "s_per_iteration": per,
                     "seconds_to_target": None if its is None else its * per,
                     "compile_s": timers[name][4]})
    sampled = statistics.median(times["sampled oracle step (n=200, 16 prompts)"])
    out = {"rows": rows, "sampled_step_s": sampled, "speedup_iterations": summary["speedup"],
           "speedup_lower_bound": summary["speedup_lower_bound"]}
    (results_dir(args.quick) / "goel.json").write_text(json.dumps(out, indent=2))
    print("| method | tuned point | iterations to stay < 1e-8 | µs / iteration | ms to target | compile (s) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        secs = "—" if r["seconds_to_target"] is None else f"{1e3 * r['seconds_to_target']:.1f}"
        print(f"| {r['method']} | {r['point']} | {r['iterations']} | {1e6 * r['s_per_iteration']:.1f} | {secs} | "
              f"{r['compile_s']:.1f} |")
    print(f"\nsampled-gradient step (n = 200, 16 prompts, float64): {1e3 * sampled:.2f} ms")
    a, b = rows[0], rows[1]
    if a["seconds_to_target"] and b["seconds_to_target"]:
        print(f"Algorithm 1 / best Adam: {b['iterations'] / a['iterations']:.1f}× fewer iterations, "
              f"{b['seconds_to_target'] / a['seconds_to_target']:.1f}× less time")


if __name__ == "__main__":
    main()
