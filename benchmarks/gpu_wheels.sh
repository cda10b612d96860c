#!/usr/bin/env bash
# Fetch, on this (networked) machine, the wheels icldyn needs that a lent GPU machine lacks, into .whl/ (ignored by
# git): that machine has no network, and its python3 (3.12, CUDA JAX, torch, transformers, optax, pandas, pyarrow,
# matplotlib, typer, rich …) has no pydantic, duckdb or tomli-w (typing_extensions comes along: pydantic needs ≥ 4.12). benchmarks/gpu.sh installs them from .whl/ there:
#     bash benchmarks/gpu_wheels.sh          # here, once
#     device run: bash benchmarks/gpu.sh     # there, with .whl carried
# Versions: this checkout's .venv's (what the suite tested), cp312 manylinux x86-64 builds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
version() { "$PY" -c "import importlib.metadata as m; print(m.version('$1'))"; }
mkdir -p .whl
for pkg in pydantic pydantic_core annotated-types typing-inspection typing_extensions duckdb tomli_w; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$pkg==$(version "$pkg")"
done
ls -l .whl
