"""Install anywhere, same numbers everywhere: a wheel built from the checkout runs the default job in a fresh
venv; no C compiler means the pure-JAX path, said in one line; the kernel and the pure-JAX path give the same
float64 numbers; the build retries portable flags; theory is float64 from a plain process."""

import json
import os
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from icldyn import runner
from icldyn.components import lsa_kernel as kernel
from icldyn.plugins import get

pytestmark = pytest.mark.e2e  # whole trainings, subprocesses or builds: not in the inner loop


ROOT = Path(__file__).resolve().parents[1]
HAS_CC = kernel.compiler() is not None
TINY = ["--set", "train.steps=20", "--set", "train.log_every=10", "--set", "train.batch=128",
        "--set", "data.test_size=500"]


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ICLDYN_NO_KERNEL", "CC")}
    env.update(extra)
    return env


def _wheel_venv(tmp_path_factory):
    """sdist then wheel built from the sdist (so the sdist must carry the kernel source), installed non-editable
    into a fresh venv; the dependencies come from this environment's site-packages through a .pth file."""
    tmp = tmp_path_factory.mktemp("wheel")
    dist = tmp / "dist"
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)], check=True,
                   capture_output=True, cwd=tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = venv / "bin" / "python"
    inner_site = subprocess.run([str(inner), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    Path(inner_site, "_icldyn_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    wheel = next(dist.glob("icldyn-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(inner), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True)
    return tmp, venv, dist


def test_wheel_and_sdist_ship_the_kernel_source_and_the_wheel_runs_the_default_job(tmp_path_factory):
    tmp, venv, dist = _wheel_venv(tmp_path_factory)
    with zipfile.ZipFile(next(dist.glob("icldyn-*.whl"))) as z:
        assert "icldyn/components/_lsa_kernel.c" in z.namelist()
    with tarfile.open(next(dist.glob("icldyn-*.tar.gz"))) as t:
        assert any(n.endswith("src/icldyn/components/_lsa_kernel.c") for n in t.getnames())
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import icldyn; print(icldyn.__file__)"],
                           check=True, capture_output=True, text=True, cwd=venv).stdout
    assert where.startswith(str(venv)), where  # the wheel's copy, not the checkout

    # `icldyn run` (the default job, shortened: its numbers and stability are checked on verify's run of the same
    # config, tests/test_verify_ahn.py) from the wheel, with a fresh kernel cache
    res = subprocess.run([str(venv / "bin" / "icldyn"), "run", "--json", "--out", str(tmp / "runs"),
                          "--set", "train.steps=600", "--set", "data.test_size=5000"], cwd=tmp,
                         capture_output=True, text=True, env=_env(ICLDYN_KERNEL_CACHE=str(tmp / "kernels")))
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["status"] == "finished" and summary["experiment"] == "quickstart"
    ex = summary["execution"]
    if HAS_CC:
        assert (ex["forward"], ex["sampler"], ex["kernel"]["origin"]) == ("kernel", "kernel", "built")
        assert Path(ex["kernel"]["library"]).parent == tmp / "kernels"
    else:
        assert (ex["forward"], ex["sampler"]) == ("moments", "jax")
    assert summary["points"][0]["test_loss"] < 1.15 * summary["points"][0]["optimal_loss"]  # 1.10 at 600 steps


def _step20(rows: list[dict]) -> np.ndarray:
    return np.array([r["value"] for r in sorted(rows, key=lambda r: (r["point"], r["seed"], r["metric"]))
                     if r["step"] == 20 and r["metric"] in ("train_loss", "test_loss")])


NO_CC_DRIVER = r"""
import json, sys
from typer.testing import CliRunner
from icldyn.cli import app

out, runs = [], sys.argv[1]
for args in ([["run", "--out", runs + "/refused", "--set", over] for over in ("model.forward=kernel",
                                                                             "data.sampler=kernel")]
             + [["run", "--json", "--out", runs + "/runs", *sys.argv[2:]]]):
    res = CliRunner().invoke(app, args)
    out.append({"code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr})
print(json.dumps(out))
"""


def test_no_compiler_runs_pure_jax_says_so_once_and_gives_the_kernels_numbers(tmp_path):
    """CC=/bin/false: the run completes on the pure-JAX path, says so in one line, and (float64) its train and test
    losses at step 20 equal those of the same config run with the C kernel, to 1e-8 relative. An explicit kernel is
    refused in one line. The refusals, then the run, are CLI calls in one fresh process (one start-up, not three)."""
    env = _env(CC="/bin/false", ICLDYN_KERNEL_CACHE=str(tmp_path / "kernels"))
    res = subprocess.run([sys.executable, "-c", NO_CC_DRIVER, str(tmp_path), *TINY, "--set", "train.dtype=float64",
                          "--set", "seeds=2"], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    *refusals, run = json.loads(res.stdout.strip().splitlines()[-1])
    for r in refusals:  # explicit and impossible: one line, exit 2, nothing written
        assert r["code"] == 2 and r["stderr"].count("\n") == 1 and "cannot be honoured" in r["stderr"], r
    assert not (tmp_path / "refused").exists()

    assert run["code"] == 0, run["stderr"][-3000:]
    lines = [ln for ln in run["stderr"].splitlines() if "C kernel unavailable" in ln]
    assert len(lines) == 1 and lines[0].endswith("using the pure-JAX path (slower)"), run["stderr"]
    summary = json.loads(run["stdout"])
    ex = summary["execution"]
    assert (ex["forward"], ex["sampler"], ex["kernel"]["origin"]) == ("moments", "jax", "unavailable")
    assert Path(ex["kernel"]["log"]).is_file() and "/bin/false" in Path(ex["kernel"]["log"]).read_text()
    pure = _step20(pq.read_table(tmp_path / "runs" / summary["run_id"] / "metrics.parquet").to_pylist())
    assert len(pure) == 8

    if HAS_CC:  # the same config with the kernel, in this process
        cfg = get("quickstart").config({"seeds": 2, "train": {"dtype": "float64", "steps": 20, "log_every": 10,
                                                              "batch": 128}, "data": {"test_size": 500}})
        rd, with_kernel = runner.execute(cfg, tmp_path / "kernel-runs")
        assert (with_kernel["execution"]["forward"], with_kernel["execution"]["sampler"]) == ("kernel", "kernel")
        fused = _step20(pq.read_table(rd.path / "metrics.parquet").to_pylist())
        assert abs(pure / fused - 1).max() < 1e-8, (pure, fused)


@pytest.mark.skipif(not HAS_CC, reason="no C compiler")
def test_build_falls_back_to_portable_flags_and_prunes_old_libraries(tmp_path):
    """A compiler without OpenMP or libmvec (as Apple clang) still gets the kernel; the log keeps every try."""
    cc = tmp_path / "cc"
    cc.write_text(f'#!/bin/sh\nfor a in "$@"; do case "$a" in -fopenmp|-lmvec) echo "unsupported option $a" >&2; '
                  f'exit 1;; esac; done\nexec {kernel.compiler()} "$@"\n')
    cc.chmod(0o755)
    cache = tmp_path / "kernels"
    cache.mkdir()
    stale = [cache / "lsa4_0123456789abcdef.so", cache / "lsa_0123456789abcdef.so"]
    for f in stale:
        f.write_bytes(b"old")
    code = ("from icldyn.components import lsa_kernel as kernel; import json; s = kernel.status(4); "
            "print(json.dumps(s.as_dict()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=_env(CC=str(cc), ICLDYN_KERNEL_CACHE=str(cache))).stdout
    st = json.loads(out)
    assert st["available"] and st["origin"] == "built" and st["reason"].startswith("native, not a faster"), st
    assert "unsupported option -fopenmp" in Path(st["log"]).read_text()
    assert not any(f.exists() for f in stale)
    again = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                      env=_env(CC=str(cc), ICLDYN_KERNEL_CACHE=str(cache))).stdout)
    assert again["origin"] == "cache" and again["library"] == st["library"]
    assert len(list(cache.glob("lsa4_*.so"))) == 1


THEORY_CHECK = r"""
import itertools, json
import numpy as np, jax
from icldyn.papers.goel import theory as goel
from icldyn.papers.huang import theory as huang
assert not jax.config.jax_enable_x64
rng = np.random.default_rng(0)
d, p = 3, 4
A, B, M = rng.normal(size=(p, d)), rng.normal(size=(d, d)), 0.05 * rng.normal(size=(p, d))
G = rng.normal(size=(d, d)); S = G @ G.T + np.eye(d); Om = np.diag([0.1, 0.2, 0.3, 0.4])
E = A @ S @ B.T - M
goel_ref = 0.5 * np.trace(E @ S @ E.T) + 0.5 * np.trace(Om)
goel_val = goel.population_loss(A, B, M, S, Om)
K, N = 3, 5
s = rng.normal(size=(K, K)); pk = np.array([0.5, 0.3, 0.2])
ref = 0.0
for k in range(K):  # every sequence of N tokens: L = Σ_k p_k E ½‖Σ_i Attn_i v_{f_i} − v_k‖²
    for seq in itertools.product(range(K), repeat=N):
        prob = np.prod(pk[list(seq)])
        a = np.exp(s[k, list(seq)]); a /= a.sum()
        e = np.bincount(seq, weights=a, minlength=K) - np.eye(K)[k]
        ref += pk[k] * prob * 0.5 * e @ e
huang_val = huang.population_loss(s, pk, N)
print(json.dumps({"goel": [float(goel_val), goel_ref, str(goel_val.dtype)],
                  "huang": [float(huang_val), ref, str(huang_val.dtype)]}))
"""


def test_theory_is_float64_from_a_plain_process():
    env = _env()
    env.pop("JAX_ENABLE_X64", None)
    out = json.loads(subprocess.run([sys.executable, "-c", THEORY_CHECK], capture_output=True, text=True, check=True,
                                    env=env).stdout)
    for name, (value, ref, dtype) in out.items():
        assert dtype == "float64", name
        assert abs(value - ref) <= 1e-12 * abs(ref), (name, value, ref)
