#!/usr/bin/env bash
# Where a decode step's time goes on the GPU machine (after gpu_session.sh built build-gpu):
# per-op host time with the device drained after every op (DEEPINFER_CUDA_SYNC=1, so an op's
# time is its GPU time plus one launch), per-op issue time without it, and an nsys kernel summary
# when nsys is installed. V4-Flash shapes, random weights, 4k synthetic context.
# Usage: OUT=/tmp/prof BATCHES="1 64" [PREFILL=4096] bash tools/device/profile_decode.sh
# (BATCHES=" " profiles no decode step; run it after gpu_session.sh, which sets up the libraries)
set -uo pipefail
B=${B:-build-gpu/src/api/deepinfer}
OUT=${OUT:-/tmp/profile_decode}
LAYERS=${LAYERS:-9}
mkdir -p "$OUT"
P=(bench --device cuda --random-weights --preset v4-flash --num-layers "$LAYERS" --synthetic-context
  --context-length 4096 --warmup-steps 2 --num-steps 5)
for n in ${BATCHES:-1}; do
  DEEPINFER_CPU_TIMER=1 DEEPINFER_CUDA_SYNC=1 DEEPINFER_DISABLE_SYNC_GUARD=1 \
    "$B" "${P[@]}" --decode-num-requests "$n" >"$OUT/ops_synced_b$n.txt" 2>&1
  echo "== batch $n, synced after every op (rc=$?)"
  grep -E "cpu section|^[a-z_ :]+ +[0-9]+ " "$OUT/ops_synced_b$n.txt" | sort -k3 -n -r | head -30
  DEEPINFER_CPU_TIMER=1 "$B" "${P[@]}" --decode-num-requests "$n" >"$OUT/ops_issue_b$n.txt" 2>&1
  echo "== batch $n, issue only (rc=$?)"
  grep -E "cpu section|^[a-z_ :]+ +[0-9]+ |^decode " "$OUT/ops_issue_b$n.txt" | sort -k3 -n -r | head -30
done
if [[ -n "${PREFILL:-}" ]]; then  # prefill of PREFILL tokens, synced after every op
  DEEPINFER_CPU_TIMER=1 DEEPINFER_CUDA_SYNC=1 DEEPINFER_DISABLE_SYNC_GUARD=1 \
    "$B" bench --device cuda --random-weights --preset v4-flash --num-layers "$LAYERS" \
    --mode prefill --prefill-batch-size "$PREFILL" --warmup-steps 1 --num-steps 2 \
    >"$OUT/ops_synced_prefill.txt" 2>&1
  echo "== prefill $PREFILL tokens, synced after every op (rc=$?)"
  grep -E "cpu section|^[a-z_ :]+ +[0-9]+ " "$OUT/ops_synced_prefill.txt" | sort -k3 -n -r | head -30
fi
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [[ -n "$NSYS" ]]; then
  "$NSYS" profile -t cuda -o "$OUT/decode_b1" --force-overwrite true "$B" "${P[@]}" \
    --decode-num-requests 1 >"$OUT/nsys_run.txt" 2>&1
  "$NSYS" stats -r cuda_gpu_kern_sum -f csv "$OUT/decode_b1.nsys-rep" >"$OUT/kern_sum.csv" 2>&1
  echo "== nsys kernel summary (batch 1, all steps)"
  head -25 "$OUT/kern_sum.csv" | cut -c1-220
  rm -f "$OUT"/*.nsys-rep "$OUT"/*.sqlite
else
  echo "== no nsys on this machine"
fi
