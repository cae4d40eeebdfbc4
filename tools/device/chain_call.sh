#!/usr/bin/env bash
# One GPU call for chain_floor_bench.cu: builds it with the toolkit's nvcc and runs it (6 layers,
# then 3 as a check that the per-layer numbers do not depend on the count), logs to $OUT.
#   OUT=$OUT bash tools/device/chain_call.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
O=${OUT:-/tmp/chain_call}
mkdir -p "$O"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$O/gpu.txt"
"$NVCC" -O3 -gencode arch=compute_90a,code=sm_90a -std=c++17 -I src \
  tools/device/chain_floor_bench.cu -o /tmp/cfb >"$O/build.log" 2>&1 || { cat "$O/build.log"; exit 1; }
timeout 180 /tmp/cfb 6 2>&1 | tee "$O/chain6.txt"
timeout 120 /tmp/cfb 3 2>&1 | tee "$O/chain3.txt"
