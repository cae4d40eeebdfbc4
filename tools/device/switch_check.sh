#!/usr/bin/env bash
# The CUDA backend's experimental numerics switches on the GPU machine, after gpu_session.sh has
# built and tested build-gpu (run it from BENCH_CMDS): the CUDA tests (op tests, golden fixtures)
# and the batch-invariance / graph tests under each switch, then ab_bench.sh with each switch as
# one more variant (its arguments pass through; pack the bases first, or there are none).
#   BENCH_CMDS="bash tools/device/switch_check.sh --runs 2 --prefill-64k"
# Under a switch, the tests that hold the default kernels to the CPU at fp32-sized tolerances
# (kTolAttention, kTolF32) are left out: they fail by design there (docs/perf.md, session of
# 2026-12-05); the AttnFp16Qp tests hold the switched kernels to theirs. Any other failure is
# one, and the line's rc says so.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
declare -A EXPECTED_TO_DIFFER=(
  [DEEPINFER_CUDA_ATTENTION_FP16_QP]="Attn.AttentionMatchesCpu:Attn.PrefillSizedCallsMatchSmallerCalls:Attn.AttentionBatchMatchesEachSegmentAlone:Attn.DecodeUnitsFoldAlikeInEveryPlan"
  [DEEPINFER_CUDA_INDEXER_FP16_Q]="Attn.IndexerScoresBatchMatchesCpu:Attn.IndexerScoresMatchCpu"
)
SWITCHES=(DEEPINFER_CUDA_ATTENTION_FP16_QP DEEPINFER_CUDA_INDEXER_FP16_Q)
T=build-gpu/tests/cuda
for s in "${SWITCHES[@]}"; do
  for t in cuda_tests cuda_fill_tests; do
    filter=()
    [[ $t == cuda_tests ]] && filter=(--gtest_filter="-${EXPECTED_TO_DIFFER[$s]}")
    echo "== $s=1 $t ${filter[*]}"
    DEEPINFER_SOURCE_DIR=$ROOT timeout 300 env "$s=1" "$T/$t" --gtest_brief=1 "${filter[@]}" 2>&1 |
      grep -E '^\[cuda-golden\]|^\[  (PASSED|FAILED) |tests ran'
    echo "rc=${PIPESTATUS[0]}"
  done
done
envs=()
for s in "${SWITCHES[@]}"; do envs+=(--env "$s=1"); done
bash tools/device/ab_bench.sh "$@" "${envs[@]}"
