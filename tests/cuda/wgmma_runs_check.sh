#!/usr/bin/env bash
# ptxas waits out every wgmma before issuing the next (a serialised kernel, ~3x slower) where an
# accumulator register is written after wgmma.fence or a branch splits a run of wgmmas (C7519), or
# where a wait it inserted sits on a branch it cannot prove warp-uniform (C7518), or where other
# instructions write registers an in-flight wgmma reads (C7515: e.g. A fragments in registers
# rewritten before their group completes), and says so only in an info line. Compiles each CUDA
# source that issues wgmma and fails on any of them.
# Usage: wgmma_runs_check.sh NVCC SOURCE_DIR ARCH (e.g. 90a)
set -uo pipefail
NVCC=$1 SRC=$2 ARCH=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for f in $(grep -l "wgmma_m64" "$SRC"/src/backend/cuda/*.cu); do
  log=$("$NVCC" -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr \
    --generate-code=arch=compute_$ARCH,code=sm_$ARCH -I"$SRC/src" -I"$SRC/include" \
    -Xptxas -v -c "$f" -o "$tmp/o.o" 2>&1) || { echo "$f: nvcc failed"; echo "$log"; status=1; continue; }
  n=$(grep -cE "C751[589]" <<<"$log")
  echo "$(basename "$f"): $n serialised wgmma sites"
  if ((n > 0)); then
    grep -E "C751[589]" <<<"$log" | head -3
    status=1
  fi
done
exit $status
