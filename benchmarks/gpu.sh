#!/usr/bin/env bash
# The GPU path proven by one script, in under 8 minutes on one GPU (benchmarks/gpu.py says what it measures):
# writes gpu.json and gpu.md under $OUT (default benchmarks/results/gpu). On a CUDA machine it installs icldyn with
# CUDA JAX into /tmp/icldyn-gpu (unless ICLDYN_PYTHON names an interpreter that has it); without a GPU it runs the
# CPU rows with this checkout's .venv, says that no GPU was found, and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${ICLDYN_PYTHON:-}"
if [ -z "$PY" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    python3 -m venv /tmp/icldyn-gpu && /tmp/icldyn-gpu/bin/pip install -q -e ".[test]" "jax[cuda12]"
    PY=/tmp/icldyn-gpu/bin/python
  else
    PY=.venv/bin/python
  fi
fi
timeout 470 "$PY" -m benchmarks.gpu
