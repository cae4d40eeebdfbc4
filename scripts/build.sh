#!/usr/bin/env bash
# Configures and builds deepinfer (Release, Ninja) into build/. CUDA sources are compiled whenever
# nvcc is found (no GPU needed to build).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
cmake --preset release -DDEEPINFER_PYTHON=/usr/bin/python3 >/dev/null
cmake --build build -j "$(nproc)"
