#!/usr/bin/env bash
# A session's first GPU call in one go, for machines lent rarely: build (gpu_session.sh), the mHC
# op tests, then on an H200 issue 6's whole set (bench/h200_full.sh) in bf16 and with
# MXFP4-resident experts plus by-kernel traces of the 65,536- and 4096-token and batch-1 decode
# steps, on an H100 the small A/B set (small_ab.sh, bf16 and MXFP4), and last the whole
# cuda_tests. Each stage's line goes to $O/summary.txt as it ends; on the H100 it took 66 s with
# the build cached (an H200 ran both sets' benches in ~30 s), so it fits one call, and under
# detached.sh a slower machine's run goes on past the call:
#   OUT=$OUT bash tools/device/detached.sh 560 bash tools/device/first_call.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
O=${DETACHED_DIR:-${OUT:-/tmp/first_call}}
mkdir -p "$O/res"
source tools/device/call_steps.sh
build_engine
tail -3 "$O/gs/summary.txt" >>"$O/summary.txt"
t "build: $(tail -2 "$O/gs/summary.txt" | head -1)"
timeout 120 build-gpu/tests/cuda/cuda_tests --gtest_filter='Ops.Hc*' >"$O/hc.log" 2>&1
t "Ops.Hc* rc=$? $(passed "$O/hc.log")"
# the bench's header lines, left out of the summary
HEADERS='^  model|^peaks|^mode|^prefill:|^decode:|^routed'
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  STEP_LIMIT=90 B=$B RESULTS=$O/res bash bench/h200_full.sh >"$O/bench_bf16.log" 2>&1
  grep -vE "$HEADERS" "$O/bench_bf16.log" >>"$O/summary.txt"
  t "bf16 set done"
  STEP_LIMIT=90 FLAGS=--mxfp4-experts TAG=_mxfp4 B=$B RESULTS=$O/res bash bench/h200_full.sh \
    >"$O/bench_mxfp4.log" 2>&1
  grep -vE "$HEADERS" "$O/bench_mxfp4.log" >>"$O/summary.txt"
  t "mxfp4 set done"
  # A by-kernel trace of one bench run: name, window ms, time limit s, bench arguments.
  trace() {
    OUT=$O/$1 SUMMARY_ARGS="--window-ms $2 --by-kernel" timeout "$3" \
      bash tools/device/cuda_trace.sh $B bench $P "${@:4}" >"$O/$1.log" 2>&1
    rm -f "$O/$1/trace.csv"
  }
  trace t64 480 200 --num-layers 4 --mode prefill --prefill-batch-size 65536 --warmup-steps 1 \
    --num-steps 1
  t "trace done"
  # Where the steps the issue's unmet targets read go: 4096 tokens and decode batch 1, 9 layers.
  trace t4k 75 150 --num-layers 9 --mode prefill --prefill-batch-size 4096 --warmup-steps 1 \
    --num-steps 1
  trace tdec 2.45 150 --num-layers 9 --mode decode --synthetic-context --context-length 4096 \
    --decode-num-requests 1 --warmup-steps 5 --num-steps 20 --overlap
  t "4096 and batch-1 traces done"
else
  OUT=$O/ab timeout 300 bash tools/device/small_ab.sh "" --mxfp4-experts >"$O/small_ab.log" 2>&1
  grep -vE '^  model|^peaks' "$O/small_ab.log" >>"$O/summary.txt"
  t "small_ab done"
fi
timeout 240 build-gpu/tests/cuda/cuda_tests --gtest_brief=1 >"$O/cuda_tests.log" 2>&1
t "cuda_tests rc=$? $(passed "$O/cuda_tests.log")"
grep '\[cuda-golden\]' "$O/cuda_tests.log" | grep "rel L2" | sort -u | tee -a "$O/summary.txt"
grep -hE "Failure|FAILED" "$O"/*.log | head -20
t "DONE"
