#!/usr/bin/env bash
# Everything issue 6 measures, in one call on the GPU machine (~5 minutes on an H200): the build
# and every GPU test (gpu_session.sh), the op micro-benchmark, GPU time per kernel of a batch-1
# decode step and a 4096-token prefill (kernel_profile.sh, 4 layers), then the full benchmark
# set (bench/h200_full.sh) and what graphs and zero-overhead scheduling buy (bench/h200_overlap.sh;
# PROFILE=0 skips the kernel profile). Everything lands in one tarball, $OUT/full_check.tgz (the device
# tool brings back at most 8 files), and the summary is printed last.
# Usage (device tool, carry .devdeps): bash tools/device/full_check.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FINAL=${OUT:-$ROOT/full_check_out}
WORK=$(mktemp -d)
mkdir -p "$FINAL" "$WORK/bench_json"
B=build-gpu/src/api/deepinfer
export EXTRA_TARGETS="cuda_op_bench"
PROFILE_CMD="CASES='decode:1 prefill:4096' OUT=$WORK B=$B bash tools/device/kernel_profile.sh"
[[ ${PROFILE:-1} == 0 ]] && PROFILE_CMD=true
export BENCH_CMDS="stdbuf -oL build-gpu/tests/cuda/cuda_op_bench > $WORK/op_bench.txt 2>&1;
  $PROFILE_CMD > /dev/null 2>&1;
  STEP_LIMIT=100 B=$B RESULTS=$WORK/bench_json bash bench/h200_full.sh;
  B=$B RESULTS=$WORK/bench_json bash bench/h200_overlap.sh > $WORK/overlap.txt 2>&1"
OUT=$WORK/session bash "$ROOT/tools/device/gpu_session.sh" > "$WORK/session.txt" 2>&1
tar czf "$FINAL/full_check.tgz" -C "$WORK" .
grep -vE "^row |cuda-golden" "$WORK/session/summary.txt"
grep -E "^decode|^prefill|rc=" "$WORK/session/bench.log"
grep -E "^== |TPOT|Output token" "$WORK/overlap.txt" 2>/dev/null | grep -vE "rc=0" | head -40
