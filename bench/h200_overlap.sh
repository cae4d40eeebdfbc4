#!/usr/bin/env bash
# What CUDA graphs and zero-overhead scheduling buy on one H200. Decode steps (V4-Flash layer
# shapes, random weights, 9 layers, 4k synthetic context) queued behind each other as the engine
# does (--overlap), with DEEPINFER_CUDA_GRAPHS on and off, and the waiting loop for reference;
# then the engine end to end (`bench --mode serve`, all requests at t = 0) with
# DEEPINFER_ZERO_OVERHEAD_SCHEDULING and DEEPINFER_CUDA_GRAPHS on and off, on the bundled tiny
# model (host-bound steps) and on a random V4-Flash-shaped checkpoint of 4 layers and 8 experts.
# Usage: B=build-gpu/src/api/deepinfer RESULTS=/tmp/out bash bench/h200_overlap.sh
set -uo pipefail
B=${B:-build/src/api/deepinfer}
RESULTS=${RESULTS:-bench/results}
STEP_LIMIT=${STEP_LIMIT:-200}
mkdir -p "$RESULTS"
P=(--device cuda --peak-gbs 4300 --peak-tflops 790)
run() {
  local name=$1 envs=$2
  shift 2
  echo "== $name ($envs): $*"
  env $envs timeout "$STEP_LIMIT" "$B" bench "${P[@]}" "$@" --json-out "$RESULTS/h200_$name.json" 2>&1 |
    grep -vE "^  model|^peaks|^loaded|context fill"
  echo "== $name rc=${PIPESTATUS[0]}"
}
D=(--random-weights --preset v4-flash --num-layers 9 --mode decode --synthetic-context
  --context-length 4096 --decode-num-requests 1,8,64,128 --warmup-steps 5 --num-steps 30)
run overlap_graphs_decode DEEPINFER_CUDA_GRAPHS=1 "${D[@]}" --overlap
run overlap_eager_decode DEEPINFER_CUDA_GRAPHS=0 "${D[@]}" --overlap
run wait_eager_decode DEEPINFER_CUDA_GRAPHS=0 "${D[@]}"

S=(--mode serve --num-prompts 64 --input-len 128 --output-len 64)
CK=${CKPT_DIR:-/tmp/v4flash_4l_8e}
[[ -f $CK/config.json ]] || timeout 300 "$B" make-random --preset v4-flash --num-layers 4 \
  --num-experts 8 --out "$CK" >/dev/null 2>&1
for m in tiny v4flash4l; do
  M=models/deepseek-v4-tiny-en
  [[ $m == v4flash4l ]] && M=$CK
  for zg in "1 1" "1 0" "0 0"; do
    set -- $zg
    run "${m}_serve_zos$1_graphs$2" \
      "DEEPINFER_ZERO_OVERHEAD_SCHEDULING=$1 DEEPINFER_CUDA_GRAPHS=$2" --model "$M" "${S[@]}" |
      grep -E "^==|duration|Output token throughput|Mean TTFT|Mean TPOT|Mean ITL"
  done
done
