"""The GPU path proven by one script (``bash benchmarks/gpu.sh``, under 8 minutes on one GPU): everything it measures
goes into ``$OUT/gpu.json`` and ``$OUT/gpu.md``.

Rows, in order: ``icldyn doctor`` (backend, devices); one quick recipe in float64 on the CPU (always; a GPU run's
numbers are held against these). On a GPU, further: the same recipe on the GPU and the largest relative difference
of its final held-out losses; the README's default job (``icldyn run``); the kernel-free linear and softmax
attention training steps/s at paper size (Ahn et al.'s L = 3, d = 5, n = 20, batch 20 000) against the 2-core CPU
figure of ``benchmarks/results/latest.json``; the ``standard`` GPT (256/12/8, d = 20, 41 points, batch 64) beside
Garg et al.'s PyTorch model on the same GPU (when torch sees it), and the paper-size ``garg-linear`` run (500 000
steps) estimated from it. Without a GPU it says so and exits 0 after the CPU rows.

    bash benchmarks/gpu.sh          # OUT=dir to choose where (default benchmarks/results/gpu)
    bash benchmarks/gpu.sh --set train.steps=200   # the quick recipe's rows with overrides (a shorter check)

Arguments (``--set KEY=VALUE``, as ``icldyn run``'s) go to both runs of the quick recipe, CPU and GPU, and are
recorded in ``gpu.json`` (``overrides``) and ``gpu.md``; the row names stay the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["quickstart", "--quick", "--set", "train.dtype=float64", "--set", "seeds=2"]


def icldyn(args: list[str], env: dict | None = None, timeout: float = 240) -> tuple[dict, float]:
    """``icldyn ARGS --json`` in a fresh process → (its JSON, wall seconds)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", "from icldyn.cli import main; main()", *args, "--json"], cwd=ROOT,
                          env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, text=True, timeout=timeout,
                          check=True)
    return json.loads(proc.stdout), time.perf_counter() - t


def final_losses(summary: dict) -> list[float]:
    return [s["final"]["test_loss"] for p in summary["points"] for s in p["seeds"]]


def chunk_steps(setup, cfg, k: int, repeats: int) -> float:
    """Training steps/s of a plug-in's set-up (``problem``, ``tasks``, ``tests``, ``keys``): one compiled chunk of k
    steps, timed over ``repeats`` after its first (compiling) call."""
    import jax

    from icldyn.train.loop import init_states, make_chunk
    from icldyn.train.optimizers import build_optimizer

    opt = build_optimizer(cfg.train)
    chunk = jax.jit(make_chunk(setup.problem, opt, k, 1))
    state = init_states(setup.problem, opt, setup.tasks, setup.keys)
    state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
    t = time.perf_counter()
    for _ in range(repeats):
        state, _ = jax.block_until_ready(chunk(state, setup.tasks, setup.tests))
    return k * repeats / (time.perf_counter() - t)


def attention_steps(activation: str, repeats: int = 3, k: int = 100) -> float:
    """Training steps/s of the kernel-free attention (moment form for linear, column form otherwise) at paper size."""
    from icldyn.config import build
    from icldyn.papers.ahn import problem as ahn_problem
    from icldyn.papers.ahn.recipes import OFFICIAL_TRAIN

    cfg = build({"experiment": "ahn-loss-vs-layers",
                 "data": {"kind": "prompts", "covariance": "official", "test_size": 1000, "sampler": "jax"},
                 "model": {"kind": "linear_attention", "layers": 3, "parameterization": "relaxed", "init_std": 1e-4,
                           "activation": activation, **({"forward": "moments"} if activation == "linear" else {})},
                 "train": {**OFFICIAL_TRAIN, "schedule": "constant", "lr": 0.01, "batch": 20_000}})
    return chunk_steps(ahn_problem.build(cfg), cfg, k, repeats)


def gpt_steps(repeats: int = 3, k: int = 20) -> dict:
    """The ``standard`` GPT's training steps/s in icldyn and, where torch sees the GPU, in Garg et al.'s model."""
    from icldyn.papers.garg.problem import build
    from icldyn.plugins import get

    cfg = get("garg-linear").config({"data": {"d": 20, "n": 40, "dims_start": None, "points_start": None,
                                              "test_size": 64}, "model": {"size": "standard"},
                                     "train": {"batch": 64, "lr": 1e-4}})
    out = {"icldyn_steps_s": chunk_steps(build(cfg), cfg, k, repeats)}
    out["garg_linear_500k_steps_h"] = 500_000 / out["icldyn_steps_s"] / 3600
    try:
        from benchmarks import reference

        torch, Reference = reference()
    except ImportError as err:
        out["reference"] = f"not run: {err}"
        return out
    if not torch.cuda.is_available():
        out["reference"] = "not run: torch sees no GPU (a CPU build)"
        return out
    dev = torch.device("cuda")
    ref = Reference(20, 41, 256, 12, 8).to(dev)
    adam = torch.optim.Adam(ref.parameters(), lr=1e-4)

    def steps(n):
        for _ in range(n):
            xs = torch.randn(64, 41, 20, device=dev)
            ys = (xs @ torch.randn(64, 20, 1, device=dev))[:, :, 0]
            adam.zero_grad()
            (ref(xs, ys) - ys).square().mean().backward()
            adam.step()
        torch.cuda.synchronize()

    steps(5)
    t = time.perf_counter()
    steps(k * repeats)
    out["pytorch_steps_s"] = k * repeats / (time.perf_counter() - t)
    out["ratio"] = out["icldyn_steps_s"] / out["pytorch_steps_s"]
    return out


def markdown(res: dict) -> str:
    lines = [f"# benchmarks/gpu.sh — {res['time']}", "", f"Backend {res['backend']}, devices {res['devices']}.", ""]
    if res.get("overrides"):
        lines += ["The quick recipe's rows ran with " + ", ".join(f"`{o}`" for o in res["overrides"]) + ".", ""]
    if res.get("note"):
        lines += [res["note"], ""]
    lines += ["| row | value |", "|---|---|"]
    lines += [f"| {k} | {v if not isinstance(v, float) else f'{v:.4g}'} |" for k, v in res["rows"].items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    extra = sys.argv[1:]
    flags, values = extra[::2], extra[1::2]
    if len(flags) != len(values) or set(flags) - {"--set"} or not all("=" in v for v in values):
        sys.exit(f"error: arguments are --set KEY=VALUE pairs (icldyn run's); got {' '.join(extra)}")
    out = Path(os.environ.get("OUT") or ROOT / "benchmarks" / "results" / "gpu")
    out.mkdir(parents=True, exist_ok=True)
    doctor, _ = icldyn(["doctor"])
    backend = doctor["jax"]["backend"]
    res: dict = {"time": time.strftime("%Y-%m-%d %H:%M"), "backend": backend, "devices": doctor["jax"]["devices"],
                 "doctor": doctor, "overrides": values, "rows": {}}
    rows = res["rows"]
    quick = [*QUICK, *extra]
    cpu, wall = icldyn(["run", *quick, "--out", str(out / "runs")], env={"JAX_PLATFORMS": "cpu"})
    rows["quickstart --quick float64, CPU: final test_loss"] = ", ".join(f"{v:.10g}" for v in final_losses(cpu))
    rows["quickstart --quick float64, CPU: wall s"] = wall
    if backend != "gpu":
        res["note"] = "No GPU found (JAX backend: " + backend + "): the CPU rows only."
        print(res["note"], flush=True)
    else:
        gpu, wall = icldyn(["run", *quick, "--out", str(out / "runs")])
        a, b = final_losses(cpu), final_losses(gpu)
        rows["quickstart --quick float64, GPU: wall s"] = wall
        rows["quickstart --quick float64: max rel diff GPU vs CPU"] = max(abs(x - y) / abs(x) for x, y in zip(a, b))
        _, rows["README default job (icldyn run), wall s"] = icldyn(["run", "--out", str(out / "runs")], timeout=300)
        sys.path.insert(0, str(ROOT))
        from icldyn.runtime import setup_jax

        setup_jax()
        cpu2 = {}
        latest = ROOT / "benchmarks" / "results" / "latest.json"
        if latest.is_file():
            for r in json.loads(latest.read_text())["results"]:
                if r["threads"] == 2:
                    cpu2 = {(x["L"], x["batch"], x["resample_every"]): x["icldyn_steps_per_s"]["median"]
                            for x in r["rows"]}
        for act in ("linear", "softmax"):
            sps = attention_steps(act)
            rows[f"{act} attention L=3 batch 20000, steps/s"] = sps
            if act == "linear" and (3, 20_000, 1) in cpu2:
                rows["linear attention: GPU / 2-core CPU (C kernel)"] = sps / cpu2[(3, 20_000, 1)]
        for k, v in gpt_steps().items():
            rows[f"standard GPT: {k}"] = v
    print(json.dumps(rows, indent=1), flush=True)
    (out / "gpu.json").write_text(json.dumps(res, indent=1))
    (out / "gpu.md").write_text(markdown(res))


if __name__ == "__main__":
    main()
