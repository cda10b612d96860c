#!/usr/bin/env bash
# The GPU path proven by one script, in under 8 minutes on one GPU (benchmarks/gpu.py says what it measures):
# writes gpu.json and gpu.md under $OUT (default benchmarks/results/gpu). Arguments (--set KEY=VALUE) go to the
# quick recipe's runs (benchmarks/gpu.py).
#
# On a machine with an NVIDIA GPU it uses that machine's python3 (CUDA JAX and torch already there; a lent GPU
# machine has no network, and nothing is built): icldyn runs from src/ with its entry points registered in
# /tmp/icldyn-site, the dependencies the machine lacks installed there from the wheels in .whl/
# (benchmarks/gpu_wheels.sh fetches them on a networked machine; carry .whl along). ICLDYN_PYTHON names another
# interpreter that has icldyn. Without a GPU it runs the CPU rows with this checkout's .venv, says that
# no GPU was found, and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${ICLDYN_PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    PY=python3
    SITE=/tmp/icldyn-site
    mkdir -p "$SITE"
    for whl in .whl/*.whl; do  # a wheel is a zip of its files: unpacked, no pip needed
      [ -e "$whl" ] && "$PY" -m zipfile -e "$whl" "$SITE"
    done
    "$PY" - "$SITE" <<'PY'  # icldyn's dist-info (its version and entry points) from pyproject.toml
import pathlib, sys, tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
info = pathlib.Path(sys.argv[1]) / f"icldyn-{project['version']}.dist-info"
info.mkdir(parents=True, exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: icldyn\nVersion: {project['version']}\n")
groups = {"console_scripts": project.get("scripts", {}), **project.get("entry-points", {})}
(info / "entry_points.txt").write_text("".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                                               for g, eps in groups.items()))
PY
    export PYTHONPATH="$SITE:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
    "$PY" -c "import pydantic, duckdb, tomli_w, jax; print('JAX', jax.__version__, jax.devices())" || {
      echo "icldyn's dependencies are missing on this machine: run benchmarks/gpu_wheels.sh where there is a network and carry .whl" >&2
      exit 2
    }
  else
    PY=.venv/bin/python
  fi
fi
timeout 470 "$PY" -m benchmarks.gpu "$@"
