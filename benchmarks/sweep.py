"""A 16-point learning-rate sweep (one job: one compiled program with a learning-rate axis) against one
point of the same sweep and against the same 16 points run one by one (``--no-group``: the sweep before
grouping), each a fresh ``icldyn sweep`` process as a user runs it, alternating, warm compilation cache
(one untimed round first). Writes ``benchmarks/results/sweep.json``.

    python -m benchmarks.sweep [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POINT = ["--set", "grid.model.layers=[3]", "--set", "seeds=2", "--set", "train.steps=1000"]  # L = 3, batch 1000
LRS = "0.001,0.0013,0.0016,0.0021,0.0027,0.0034,0.0044,0.0056,0.0072,0.0091,0.012,0.015,0.019,0.024,0.031,0.04"


def timed(lrs: str, out: str, *extra: str) -> float:
    cmd = [sys.executable, "-c", "from icldyn.cli import main; main()", "sweep", "quickstart", *POINT,
           "--grid", f"train.lr={lrs}", "--out", out, *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    single, grid, ungrouped = [], [], []
    with tempfile.TemporaryDirectory() as out:
        timed("0.01", out), timed(LRS, out)  # warm the compilation cache and the kernel build
        for r in range(args.repeats):
            single.append(timed("0.01", out))
            grid.append(timed(LRS, out))
            if r == 0:  # the slow baseline once
                ungrouped.append(timed(LRS, out, "--no-group"))
    ratios = [g / s for g, s in zip(grid, single)]
    res = {"point": " ".join(POINT), "lrs": LRS, "single_s": single, "grid16_s": grid,
           "grid16_one_by_one_s": ungrouped, "ratio_median": statistics.median(ratios),
           "ratio_range": [min(ratios), max(ratios)]}
    Path(__file__).with_name("results").joinpath("sweep.json").write_text(json.dumps(res, indent=2))
    print(f"one point {statistics.median(single):.1f} s, 16 learning rates {statistics.median(grid):.1f} s: "
          f"{res['ratio_median']:.2f}× [{min(ratios):.2f}, {max(ratios):.2f}]; the 16 one by one "
          f"(--no-group): {ungrouped[0]:.1f} s")


if __name__ == "__main__":
    main()
