#!/usr/bin/env bash
# Issue 6's benchmark set on one H200: V4-Flash layer shapes (hidden 4096, 64 heads of 512, 256
# experts top-6, moe_intermediate 2048, the preset's CSA/HCA schedule) with weights generated on
# the device (--random-weights) and the context set directly (--synthetic-context). 9 layers fit
# with batch <= 128 at 64k context (fp32 state); batch 256 runs with 7 (4k and 64k). JSON goes
# to $RESULTS. FLAGS adds bench flags to every case and TAG names its JSON files apart (e.g.
# FLAGS=--mxfp4-experts TAG=_mxfp4: the routed experts as a V4 checkpoint holds them).
# CASES=headline runs only the cases the targets read (decode at 4k context, prefill 4096
# and 65,536 tokens), for calls short of device time; CASES=rest the others.
# Usage: B=build-gpu/src/api/deepinfer RESULTS=/tmp/out [FLAGS=...] [TAG=...] [CASES=headline] \
#          bash bench/h200_full.sh
set -uo pipefail
B=${B:-build/src/api/deepinfer}
RESULTS=${RESULTS:-bench/results}
STEP_LIMIT=${STEP_LIMIT:-200}  # seconds per command
mkdir -p "$RESULTS"
P=(--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790 ${FLAGS:-})
HEADLINE=" 9l_ctx4k_decode 9l_prefill4k 4l_prefill64k "
run() {
  local name=$1
  shift
  [[ ${CASES:-all} == headline && $HEADLINE != *" $name "* ]] && return
  [[ ${CASES:-all} == rest && $HEADLINE == *" $name "* ]] && return
  echo "== $name: $*"
  timeout "$STEP_LIMIT" "$B" bench "${P[@]}" "$@" --json-out "$RESULTS/h200_v4flash_$name${TAG:-}.json" 2>&1 |
    grep -vE "^  model|^peaks"
  echo "== $name rc=${PIPESTATUS[0]}"
}
# Decode steps queued behind each other as the engine runs them (--overlap: zero-overhead
# scheduling, each step one CUDA graph).
run 9l_ctx4k_decode --num-layers 9 --mode decode --synthetic-context --context-length 4096 \
  --decode-num-requests 1,8,64,128 --warmup-steps 3 --num-steps 20 --overlap
run 9l_ctx64k_decode --num-layers 9 --mode decode --synthetic-context --context-length 65536 \
  --decode-num-requests 1,8,64,128 --warmup-steps 3 --num-steps 20 --overlap
run 7l_decode256 --num-layers 7 --mode decode --synthetic-context --context-length 4096 \
  --decode-num-requests 256 --warmup-steps 2 --num-steps 10 --overlap
# Batch 256 at 64k context: 109 MiB of state per sequence at 7 layers (2 CSA), ~115 GiB in all.
run 7l_ctx64k_decode256 --num-layers 7 --mode decode --synthetic-context --context-length 65536 \
  --decode-num-requests 256 --warmup-steps 2 --num-steps 10 --overlap
run 9l_prefill4k --num-layers 9 --mode prefill --prefill-batch-size 4096 --warmup-steps 1 \
  --num-steps 3
run 9l_prefill4k_ctx60k --num-layers 9 --mode prefill --prefill-batch-size 4096 \
  --synthetic-context --context-length 61440 --warmup-steps 1 --num-steps 2
# 65,536 prompt tokens in one step: 4 layers leave room for that step's activations (~60 GiB).
run 4l_prefill64k --num-layers 4 --mode prefill --prefill-batch-size 65536 --warmup-steps 1 \
  --num-steps 1
