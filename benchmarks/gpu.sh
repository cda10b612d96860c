#!/usr/bin/env bash
# The GPU suite on a CUDA machine, in under 5 minutes: installs icldyn with CUDA JAX, then runs
# benchmarks/gpu.py (JAX moment form; the C kernels are CPU-only).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv /tmp/icldyn-gpu && /tmp/icldyn-gpu/bin/pip install -q -e . "jax[cuda12]"
timeout 290 /tmp/icldyn-gpu/bin/python -m benchmarks.gpu
