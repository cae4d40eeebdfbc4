#!/usr/bin/env bash
# Chosen ncu metrics per launch of the kernels matching KERNEL (a regex) in the logged bench
# steps, as a table (ncu_table.py): e.g. how close each product gets to DRAM peak and what
# limits its occupancy. After gpu_session.sh built build-gpu. Usage:
#   OUT=/tmp/nm [KERNEL=grouped_gemm] [METRICS=a,b,c] [GROUP=1] [LAYERS=3] [N=1] [CONTEXT=4096] \
#     [TOKENS=4096] bash tools/device/ncu_metrics.sh
# BENCH_FLAGS adds bench flags (e.g. --mxfp4-experts).
# TOKENS profiles a prefill step of that many prompt tokens instead of a decode step of N
# sequences at CONTEXT (e.g. KERNEL=attention_wgmma TOKENS=16384 LAYERS=2).
# Writes $OUT/ncu_metrics.csv (raw) and $OUT/ncu_metrics.txt (the table). Clocks and caches are
# left alone (as the bench runs), so read the ratios, not the microseconds.
set -uo pipefail
B=${B:-build-gpu/src/api/deepinfer}
OUT=${OUT:-/tmp/ncu_metrics}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -n "$NCU" ]] || { echo "no ncu on this machine"; exit 1; }
if [[ -n "${TOKENS:-}" ]]; then
  STEP=(--mode prefill --prefill-batch-size "$TOKENS")
  WARMUP=${WARMUP:-1}
else
  STEP=(--synthetic-context --context-length "${CONTEXT:-4096}" --decode-num-requests "${N:-1}")
fi
M=${METRICS:-gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__waves_per_multiprocessor,launch__occupancy_limit_shared_mem,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active}
"$NCU" --profile-from-start off --clock-control none --cache-control none \
  --kernel-name "regex:${KERNEL:-grouped_gemm}" --metrics "$M" --csv --page raw \
  "$B" bench --device cuda --random-weights --preset v4-flash --num-layers "${LAYERS:-3}" \
  --peak-gbs 4300 --peak-tflops 790 --warmup-steps "${WARMUP:-2}" --num-steps 1 "${STEP[@]}" ${BENCH_FLAGS:-} \
  >"$OUT/ncu_metrics.csv" 2>"$OUT/ncu_metrics.err"
rc=$?
python3 "$(dirname "$0")/ncu_table.py" "$OUT/ncu_metrics.csv" --metrics "$M" ${GROUP:+--group} |
  tee "$OUT/ncu_metrics.txt"
exit $rc
