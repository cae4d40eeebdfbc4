#!/usr/bin/env bash
# One GPU call: chain_floor_bench (chain_call.sh), then expert_l2_prefetch.patch applied to the
# machine's copy of the tree, the engine built, its MoE tests, and the
# DEEPINFER_CUDA_EXPERT_L2_PREFETCH A/B at decode 4k batch 1 / 8 (two rounds, interleaved; 9
# layers on an H200, 4 on an H100; VALUES picks the settings), the golden fixtures with it on,
# and by-kernel traces of a batch-1 step without and with it. Each stage's line goes to
# $O/summary.txt as it ends:
#   VALUES="0 100 150" OUT=$OUT bash tools/device/detached.sh 420 bash tools/device/l2_call.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
O=${DETACHED_DIR:-${OUT:-/tmp/l2_call}}
mkdir -p "$O"
source tools/device/call_steps.sh
OUT=$O/chain bash tools/device/chain_call.sh >"$O/chain.log" 2>&1
cat "$O/chain.log" >>"$O/summary.txt"
t "chain bench done"
git apply tools/device/expert_l2_prefetch.patch || { t "the patch does not apply"; exit 1; }
build_engine
t "build: $(tail -2 "$O/gs/summary.txt" | head -1)"
timeout 120 build-gpu/tests/cuda/cuda_tests --gtest_filter='Moe.*' >"$O/moe.log" 2>&1
t "Moe.* rc=$? $(passed "$O/moe.log")"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  L=(--num-layers 9)
else
  L=(--num-layers 4 --layer-types hca,hca,hca,csa)
fi
for round in 1 2; do
  for v in ${VALUES:-0 50 100 150 250}; do
    r=$(DEEPINFER_CUDA_EXPERT_L2_PREFETCH=$v timeout 90 $B bench $P "${L[@]}" --mode decode \
      --synthetic-context --context-length 4096 --decode-num-requests 1,8 --warmup-steps 5 \
      --num-steps 40 --overlap 2>&1 | tr '\r' '\n' | grep -E '^decode/o +[0-9]|rror' | tr '\n' ';')
    t "round $round prefetch $v: $r"
  done
done
DEEPINFER_CUDA_EXPERT_L2_PREFETCH=150 timeout 200 build-gpu/tests/cuda/cuda_tests \
  --gtest_filter='*CudaGolden*:Moe.*' >"$O/golden_on.log" 2>&1
t "golden + Moe with 150: rc=$? $(passed "$O/golden_on.log")"
grep '\[cuda-golden\]' "$O/golden_on.log" | grep "rel L2" | sort -u | tee -a "$O/summary.txt"
for v in 0 150; do
  DEEPINFER_CUDA_EXPERT_L2_PREFETCH=$v OUT=$O/trace$v SUMMARY_ARGS="--window-ms 2.5 --by-kernel" \
    timeout 150 bash tools/device/cuda_trace.sh $B bench $P "${L[@]}" --mode decode \
    --synthetic-context --context-length 4096 --decode-num-requests 1 --warmup-steps 5 \
    --num-steps 20 --overlap >"$O/trace$v.log" 2>&1
  rm -f "$O/trace$v/trace.csv"
  t "trace $v: $(grep -iE 'grouped_gemm' "$O/trace$v/trace_summary.txt" | head -6 | tr -s ' ' | tr '\n' ';')"
done
