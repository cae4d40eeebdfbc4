#!/usr/bin/env bash
# A same-machine A/B of environment settings that fits an 80 GB card (the H100 the device tool
# may lend instead of an H200, where bench/h200_full.sh's 9-layer cases do not fit): for each
# setting (one argument each, "" for the defaults, "A=0 B=1" for several), prefill 4096 tokens
# over 4 layers (hca, hca, hca, csa), prefill 65,536 tokens over 2 layers (hca, csa) and decode
# 4k context at batch 1 / 8 / 64 over 4 layers, ms a step; with TRACE=1 also a CUPTI trace of the
# 65,536-token step per setting, its kernels summed ($OUT/trace-N.txt). After gpu_session.sh
# built build-gpu. A setting's words starting with -- are bench flags (e.g. --mxfp4-experts).
# Usage: bash tools/device/small_ab.sh "" "DEEPINFER_CUDA_ATTENTION_ONEPASS=0" --mxfp4-experts
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
B=${B:-build-gpu/src/api/deepinfer}
OUT=${OUT:-/tmp/small_ab}
mkdir -p "$OUT"
[[ -d /tmp/devx ]] && export LD_LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
P="--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790"
step() {  # setting, bench arguments: the bench's result line
  local vars=() flags=()
  for w in $1; do if [[ $w == --* ]]; then flags+=("$w"); else vars+=("$w"); fi; done
  env "${vars[@]}" "$B" bench $P "${flags[@]}" "${@:2}" 2>&1 | tr '\r' '\n' |
    grep -E '^(prefill|decode/o) +[0-9]|rror' | tr '\n' ';'
}
i=0
for s in "$@"; do
  echo "== [${s:-defaults}]"
  echo "prefill 4096 x4: $(step "$s" --num-layers 4 --layer-types hca,hca,hca,csa --mode prefill \
    --prefill-batch-size 4096 --warmup-steps 1 --num-steps 3)"
  echo "prefill 65536 x2: $(step "$s" --num-layers 2 --layer-types hca,csa --mode prefill \
    --prefill-batch-size 65536 --warmup-steps 1 --num-steps 2)"
  echo "decode 4k x4: $(step "$s" --num-layers 4 --layer-types hca,hca,hca,csa --mode decode \
    --synthetic-context --context-length 4096 --decode-num-requests 1,8,64 --warmup-steps 5 \
    --num-steps 40 --overlap)"
  if [[ -n "${TRACE:-}" ]]; then
    env $s OUT="$OUT/trace-$i" SUMMARY_ARGS="--window-ms 600 --by-kernel" \
      bash tools/device/cuda_trace.sh "$B" bench $P --num-layers 2 --layer-types hca,csa \
      --mode prefill --prefill-batch-size 65536 --warmup-steps 0 --num-steps 1 >/dev/null 2>&1
    sed -n '/by share/,$p' "$OUT/trace-$i/trace_summary.txt" | head -16 | tee "$OUT/trace-$i.txt"
    rm -rf "$OUT/trace-$i"
  fi
  i=$((i + 1))
done
