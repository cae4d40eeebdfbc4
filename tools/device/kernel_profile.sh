#!/usr/bin/env bash
# GPU time per kernel of the logged bench steps (ncu, one metric: gpu__time_duration, clocks and
# caches left alone), after gpu_session.sh built build-gpu. The bench brackets its logged steps
# with cudaProfilerStart/Stop, so warm-up, weight generation and context fill are not profiled.
# Usage: OUT=/tmp/kp CASES="decode:1 decode:64 prefill:4096" [LAYERS=4] [BY_GRID=1] [TOP=30]
#   [SEQUENCE=1: also the first step's launches in order]
#   bash tools/device/kernel_profile.sh
set -uo pipefail
B=${B:-build-gpu/src/api/deepinfer}
OUT=${OUT:-/tmp/kernel_profile}
CSV=${CSV_DIR:-/tmp/kernel_profile_csv}
LAYERS=${LAYERS:-4}
STEPS=${STEPS:-2}
mkdir -p "$OUT" "$CSV"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -n "$NCU" ]] || { echo "no ncu on this machine"; exit 1; }
P=(bench --device cuda --random-weights --preset v4-flash --num-layers "$LAYERS" --peak-gbs 4300
  --peak-tflops 790 --warmup-steps 2 --num-steps "$STEPS")
for c in ${CASES:-decode:1}; do
  mode=${c%%:*} n=${c##*:}
  if [[ $mode == decode ]]; then
    args=(--synthetic-context --context-length "${CONTEXT:-4096}" --decode-num-requests "$n")
  else
    args=(--mode prefill --prefill-batch-size "$n")
  fi
  "$NCU" --profile-from-start off --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum --csv --page raw "$B" "${P[@]}" "${args[@]}" \
    >"$CSV/ncu_${mode}_$n.csv" 2>"$CSV/ncu_${mode}_$n.err"
  echo "== $mode $n ($LAYERS layers, per step over $STEPS steps; rc=$?)"
  grep -E "step|error|Error" "$CSV/ncu_${mode}_$n.err" | tail -3
  python3 "$(dirname "$0")/kernel_summary.py" "$CSV/ncu_${mode}_$n.csv" "$STEPS" "${TOP:-30}" ${BY_GRID:+--by-grid} ${SEQUENCE:+--sequence} |
    tee -a "$OUT/kernels.txt"
done
