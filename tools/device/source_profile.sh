#!/usr/bin/env bash
# Where the warps of chosen kernels stall, after gpu_session.sh built build-gpu (configure it with
# CMAKE_EXTRA=-DCMAKE_CUDA_FLAGS=-lineinfo for source lines): ncu's full set with the source
# view on the logged steps of one bench case, then source_regions.py's split of each kernel's
# stall samples into before / in / after its hot loop. Writes $OUT/details.txt (ncu's sections)
# and $OUT/regions.txt. Usage: OUT=/tmp/sp KERNELS=regex:grouped_gemm CASE=decode:1 [LAYERS=2]
#   [COUNT=16] [CONTEXT=4096] [TOP=3] [BENCH_FLAGS=--mxfp4-experts] bash tools/device/source_profile.sh
set -uo pipefail
B=${B:-build-gpu/src/api/deepinfer}
OUT=${OUT:-/tmp/source_profile}
CASE=${CASE:-decode:1}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[[ -n "$NCU" ]] || { echo "no ncu on this machine"; exit 1; }
mode=${CASE%%:*} n=${CASE##*:}
if [[ $mode == decode ]]; then
  args=(--synthetic-context --context-length "${CONTEXT:-4096}" --decode-num-requests "$n")
else
  args=(--mode prefill --prefill-batch-size "$n")
fi
REP=$(mktemp -u /tmp/source_profile_XXXX)
"$NCU" --profile-from-start off --clock-control none --set full --import-source yes \
  -k "${KERNELS:-regex:.}" --launch-count "${COUNT:-16}" -o "$REP" \
  "$B" bench --device cuda --random-weights --preset v4-flash --num-layers "${LAYERS:-2}" \
  --warmup-steps 2 --num-steps 1 "${args[@]}" ${BENCH_FLAGS:-} >"$OUT/ncu_run.txt" 2>&1 ||
  { echo "ncu failed"; tail -5 "$OUT/ncu_run.txt"; exit 1; }
"$NCU" --import "$REP.ncu-rep" --page details --print-units base >"$OUT/details.txt" 2>&1
"$NCU" --import "$REP.ncu-rep" --page source --print-source sass --csv >"$REP.csv" 2>&1
python3 "$(dirname "$0")/source_regions.py" "$REP.csv" "${TOP:-3}" | tee "$OUT/regions.txt"
rm -f "$REP.ncu-rep" "$REP.csv"
