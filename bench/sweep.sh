#!/usr/bin/env bash
# Decode sweep: `deepinfer bench --mode decode` over request counts, one JSON per context length,
# then the throughput-vs-per-user-speed Pareto PNG of all of them.
#
#   MODEL=models/deepseek-v4-tiny-en REQUESTS=1,2,4,8,16 CONTEXTS="256 2048" bench/sweep.sh
#
# Environment (defaults in brackets):
#   BIN       the deepinfer binary [build/src/api/deepinfer]
#   MODEL     checkpoint directory [models/deepseek-v4-tiny-en]
#   REQUESTS  comma list of concurrent requests [1,2,4,8,16,32]
#   CONTEXTS  space-separated context lengths, one JSON and one series each [1024]
#   WARMUP    untimed decode steps per run [50]
#   STEPS     logged decode steps per run [60]
#   OUTDIR    where JSON and PNG go [bench/results]
#   TAG       file name prefix [sweep-<model dir name>]
# Extra arguments go to `deepinfer bench` (e.g. --peak-gbs 4300 --peak-tflops 790).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/src/api/deepinfer}
MODEL=${MODEL:-models/deepseek-v4-tiny-en}
REQUESTS=${REQUESTS:-1,2,4,8,16,32}
CONTEXTS=${CONTEXTS:-1024}
WARMUP=${WARMUP:-50}
STEPS=${STEPS:-60}
OUTDIR=${OUTDIR:-bench/results}
TAG=${TAG:-sweep-$(basename "$MODEL")}
PYTHON=${PYTHON:-python3}

[ -x "$BIN" ] || { echo "sweep.sh: $BIN not built (set BIN=...)" >&2; exit 1; }
mkdir -p "$OUTDIR"
jsons=()
for ctx in $CONTEXTS; do
  out="$OUTDIR/$TAG-ctx$ctx.json"
  echo "== $MODEL: decode, requests $REQUESTS, context $ctx -> $out" >&2
  "$BIN" bench --model "$MODEL" --mode decode --decode-num-requests "$REQUESTS" \
    --context-length "$ctx" --warmup-steps "$WARMUP" --num-steps "$STEPS" --json-out "$out" "$@"
  jsons+=("$out")
done
"$PYTHON" bench/plot_pareto.py "${jsons[@]}" --out "$OUTDIR/$TAG.png"
