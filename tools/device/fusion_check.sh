#!/usr/bin/env bash
# One GPU call for the decode fusions that are off by default until checked and timed
# (DEEPINFER_CUDA_HC_ONE_LAUNCH: an mHC site in one cluster kernel; DEEPINFER_CUDA_PRODUCT_PROLOGUES:
# wq_b / the indexer's query product norm their rows, the shared w2 forms its SwiGLU): build, the
# ops' bitwise tests (each switch both ways), a decode A/B of the four settings, every CUDA
# suite with both switches on (golden fixtures, graphs, batch invariance), and a CUPTI trace of
# a batch-1 step with both on (the most telling first, for a call cut short). 9 layers on an
# H200, 4 (hca, hca, hca, csa) on an 80 GB card. With FULL_SET=1 on an H200, then issue 6's
# headline set with both on (bench/h200_full.sh, JSON under $O/results): the detached run goes on
# past the call (detached.sh again to wait on it).
# Usage, on the GPU machine: OUT=$OUT bash tools/device/detached.sh 540 bash tools/device/fusion_check.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
O=${DETACHED_DIR:-${OUT:-/tmp/fusion_check}}
mkdir -p "$O"
T0=$(date +%s)
t() { echo "t=$(($(date +%s) - T0))s $*" | tee -a "$O/summary.txt"; }
passed() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tr '\n' ' '; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$O/summary.txt"
SKIP_TESTS=1 EXTRA_TARGETS="cuda_tests cuda_fill_tests" OUT=$O/gs bash tools/device/gpu_session.sh \
  >/dev/null 2>&1
tail -3 "$O/gs/summary.txt" >>"$O/summary.txt"
t "build"
[[ -d /tmp/devx ]] && export LD_LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export DEEPINFER_SOURCE_DIR=$ROOT
ON=(DEEPINFER_CUDA_HC_ONE_LAUNCH=1 DEEPINFER_CUDA_PRODUCT_PROLOGUES=1)
timeout 150 build-gpu/tests/cuda/cuda_tests \
  --gtest_filter='Ops.Hc*:Ops.RmsNormMatmul*:Ops.SwigluMatmul*:Ops.ProductPrologues*' \
  >"$O/ops.log" 2>&1
t "ops rc=$? $(passed "$O/ops.log")"
grep -E 'Failure|Expected|Which is|allowed|one launch' "$O/ops.log" | head -20 >>"$O/summary.txt"
B=build-gpu/src/api/deepinfer
P="--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790"
L=9 LT="" W=2.45
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  L=4 LT="--layer-types hca,hca,hca,csa" W=1.6
fi
dec() {  # settings...: one decode line, batch 1 and 8
  env "$@" timeout 120 $B bench $P --num-layers $L $LT --mode decode --synthetic-context \
    --context-length 4096 --decode-num-requests 1,8 --warmup-steps 5 --num-steps 40 --overlap \
    2>&1 | tr '\r' '\n' | grep -E '^decode/o +[0-9]|rror' | tr '\n' ';'
}
for rep in 1 2; do
  for cfg in "X=0" "${ON[*]}" "${ON[0]}" "${ON[1]}"; do
    echo "[$cfg] $(dec $cfg)" | tee -a "$O/summary.txt"
  done
done
t "A/B"
env "${ON[@]}" timeout 300 build-gpu/tests/cuda/cuda_tests --gtest_brief=1 >"$O/cuda_tests.log" 2>&1
t "cuda_tests (both on) rc=$? $(passed "$O/cuda_tests.log")"
grep '\[cuda-golden\]' "$O/cuda_tests.log" | grep "rel L2" | sort -u | tee -a "$O/summary.txt"
grep -E '^\[  FAILED' "$O/cuda_tests.log" | head >>"$O/summary.txt"
env "${ON[@]}" timeout 240 build-gpu/tests/cuda/cuda_fill_tests --gtest_brief=1 >"$O/fill.log" 2>&1
t "cuda_fill_tests (both on) rc=$? $(passed "$O/fill.log")"
grep -E '^\[  FAILED' "$O/fill.log" | head >>"$O/summary.txt"
env "${ON[@]}" OUT=$O/tdec SUMMARY_ARGS="--window-ms $W --by-kernel" timeout 150 \
  bash tools/device/cuda_trace.sh $B bench $P --num-layers $L $LT --mode decode \
  --synthetic-context --context-length 4096 --decode-num-requests 1 --warmup-steps 5 \
  --num-steps 20 --overlap >"$O/tdec.log" 2>&1
t "trace rc=$?"
[[ -f $O/tdec/trace.csv ]] && gzip -f "$O/tdec/trace.csv"
if [[ -n ${FULL_SET:-} && $L == 9 ]]; then
  env "${ON[@]}" CASES=headline STEP_LIMIT=90 B=$B RESULTS=$O/results bash bench/h200_full.sh \
    >"$O/full_set.log" 2>&1
  t "headline set (both on) rc=$? $(grep -cE '^== .* rc=0' "$O/full_set.log") cases ran"
fi
t DONE
