#!/usr/bin/env bash
# A device timeline without nsys: builds the CUPTI tracer (cuda_trace.cpp) and runs a command
# under it (CUDA_INJECTION64_PATH), then summarises the trace (trace_summary.py). Usage:
#   OUT=/tmp/trace [SUMMARY_ARGS="--window-ms 10 --last 200" or "--window-ms 3 --by-kernel"] \
#     bash tools/device/cuda_trace.sh CMD...
# e.g. bash tools/device/cuda_trace.sh build-gpu/src/api/deepinfer bench --device cuda ...
# Writes $OUT/trace.csv and $OUT/trace_summary.txt. CUPTI adds a little time per launch, so read
# the timeline for order, overlap and gaps, and take step times from the bench without it.
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/cuda_trace}
mkdir -p "$OUT"
CUDA=${CUDA_HOME:-/usr/local/cuda}
find_dir() {  # the first of the directories holding $1
  local f=$1
  shift
  for d in "$@"; do [[ -e $d/$f ]] && { echo "$d"; return; }; done
}
INC=$(find_dir cupti.h "$CUDA/extras/CUPTI/include" "$CUDA/include" "$CUDA/targets/x86_64-linux/include")
LIBDIR=$(find_dir libcupti.so "$CUDA/extras/CUPTI/lib64" "$CUDA/lib64" "$CUDA/lib" "$CUDA/targets/x86_64-linux/lib")
[[ -n "$INC" && -n "$LIBDIR" ]] || { echo "cuda_trace: no CUPTI under $CUDA" >&2; exit 1; }
LIB=$OUT/libdeepinfer_trace.so
g++ -O2 -shared -fPIC -o "$LIB" "$DIR/cuda_trace.cpp" -I"$INC" -I"$CUDA/include" -L"$LIBDIR" \
  -lcupti -Wl,-rpath,"$LIBDIR" || { echo "cuda_trace: build failed" >&2; exit 1; }
DEEPINFER_TRACE_OUT=$OUT/trace.csv CUDA_INJECTION64_PATH=$LIB "$@"
rc=$?
rm -f "$LIB"
[[ -s $OUT/trace.csv ]] || { echo "cuda_trace: no trace written (rc $rc)" >&2; exit 1; }
python3 "$DIR/trace_summary.py" "$OUT/trace.csv" ${SUMMARY_ARGS:-} >"$OUT/trace_summary.txt"
exit $rc
