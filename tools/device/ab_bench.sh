#!/usr/bin/env bash
# Same-machine A/B of the benchmark numbers docs/perf.md tracks: the working tree's binary
# against one or more base commits' (machines differ by 1-3%, so all run in one call,
# interleaved). Pack the bases here first (tools/device/pack_base.sh REV [REV...], carry
# .basesrc), then on the GPU machine, from gpu_session.sh's BENCH_CMDS:
#   bash tools/device/ab_bench.sh [--runs N] [--no-64k] [--no-prefill] [--prefill-64k]
#                                 [--env NAME=VALUE]...
# Prints one line per run and variant (a base's short sha, "tree", or "tree:NAME=VALUE" for the
# tree's binary under that environment setting, one variant per --env; with --env the bases are
# optional): decode 4k (batch 1, 8, 64: ms per step), decode 64k (batch 1, 8), prefill 4096
# tokens (ms per step, % of bf16 peak), with --prefill-64k prefill 65,536 tokens (4 layers).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RUNS=3 LONG=1 PREFILL=1 PREFILL64=0
ENVS=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) RUNS=$2; shift 2 ;;
    --no-64k) LONG=0; shift ;;
    --no-prefill) PREFILL=0; shift ;;
    --prefill-64k) PREFILL64=1; shift ;;
    --env) [[ $2 == *=* ]] || { echo "--env takes NAME=VALUE" >&2; exit 2; }; ENVS+=("$2"); shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
NEW=${B:-build-gpu/src/api/deepinfer}
[[ -x "$NEW" ]] || { echo "no $NEW (run gpu_session.sh first)" >&2; exit 1; }
[[ -f .basesrc/order || ${#ENVS[@]} -gt 0 ]] ||
  { echo "no .basesrc/order (pack_base.sh, carry .basesrc) and no --env" >&2; exit 1; }
declare -A BIN=([tree]=$NEW) ENV_OF=([tree]=)
VARIANTS=()
if [[ -f .basesrc/order ]]; then
  while read -r name; do
    BIN[$name]=$(bash tools/device/build_base.sh "$name") || exit 1
    ENV_OF[$name]=
    VARIANTS+=("$name")
    echo "base $name = $(cat ".basesrc/$name.rev")"
  done <.basesrc/order
fi
VARIANTS+=(tree)
for e in "${ENVS[@]}"; do
  BIN[tree:$e]=$NEW
  ENV_OF[tree:$e]=$e
  VARIANTS+=("tree:$e")
done
P="--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790 --num-layers 9"
decode() {  # variant, context, batches: "batch ms" pairs
  env ${ENV_OF[$1]} "${BIN[$1]}" bench $P --mode decode --synthetic-context --context-length "$2" --decode-num-requests "$3" \
    --warmup-steps 5 --num-steps 40 --overlap 2>&1 | tr '\r' '\n' |
    grep -E '^decode/o +[0-9]' | awk '{printf "%s %s  ", $2, $6}'
}
prefill() {  # variant, tokens, layers: "ms %peak"
  env ${ENV_OF[$1]} "${BIN[$1]}" bench ${P/--num-layers 9/--num-layers $3} --mode prefill \
    --prefill-batch-size "$2" --warmup-steps 1 --num-steps 2 2>&1 |
    tr '\r' '\n' | grep -E '^prefill +[0-9]' | awk '{printf "%s %s", $6, $13}'
}
for ((i = 1; i <= RUNS; ++i)); do
  for v in "${VARIANTS[@]}"; do echo "run $i $v decode 4k: $(decode "$v" 4096 1,8,64)"; done
done
if ((LONG)); then
  for v in "${VARIANTS[@]}"; do echo "$v decode 64k: $(decode "$v" 65536 1,8)"; done
fi
if ((PREFILL)); then
  for v in "${VARIANTS[@]}"; do echo "$v prefill 4096: $(prefill "$v" 4096 9)"; done
fi
if ((PREFILL64)); then
  for v in "${VARIANTS[@]}"; do echo "$v prefill 65536: $(prefill "$v" 65536 4)"; done
fi
