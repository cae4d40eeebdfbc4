#!/usr/bin/env bash
# The CUDA backend's experimental numerics switches on the GPU machine, after gpu_session.sh has
# built and tested build-gpu (run it from BENCH_CMDS): the CUDA tests (op tests, golden fixtures)
# and the batch-invariance / graph tests under each setting, then ab_bench.sh with each setting
# as one more variant (its arguments pass through; pack the bases first, or there are none).
#   BENCH_CMDS="bash tools/device/switch_check.sh --runs 2 --prefill-64k"
# Under a setting, the tests that hold the default kernels to the CPU at fp32-sized tolerances
# (kTolAttention, kTolF32) are left out: they fail by design there (docs/perf.md, session of
# 2026-12-05); the AttnFp16Qp tests hold the switched kernels to theirs. Any other failure is
# one, and the line's rc says so.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
ATTENTION_TIGHT="Attn.AttentionMatchesCpu:Attn.PrefillSizedCallsMatchSmallerCalls:Attn.AttentionBatchMatchesEachSegmentAlone:Attn.DecodeUnitsFoldAlikeInEveryPlan"
INDEXER_TIGHT="Attn.IndexerScoresBatchMatchesCpu:Attn.IndexerScoresMatchCpu"
# Each switch alone, then the indexer's two together (one plain fp16 MMA).
SETTINGS=("DEEPINFER_CUDA_ATTENTION_FP16_QP=1" "DEEPINFER_CUDA_INDEXER_FP16_Q=1"
          "DEEPINFER_CUDA_INDEXER_FP16_K=1"
          "DEEPINFER_CUDA_INDEXER_FP16_Q=1 DEEPINFER_CUDA_INDEXER_FP16_K=1")
T=build-gpu/tests/cuda
for s in "${SETTINGS[@]}"; do
  skip=()
  [[ $s == *ATTENTION* ]] && skip+=("$ATTENTION_TIGHT")
  [[ $s == *INDEXER* ]] && skip+=("$INDEXER_TIGHT")
  exclude=$(IFS=:; echo "${skip[*]}")
  for t in cuda_tests cuda_fill_tests; do
    filter=()
    [[ $t == cuda_tests ]] && filter=(--gtest_filter="-$exclude")
    echo "== $s $t ${filter[*]}"
    # $s unquoted: one NAME=VALUE word per variable.
    DEEPINFER_SOURCE_DIR=$ROOT timeout 300 env $s "$T/$t" --gtest_brief=1 "${filter[@]}" 2>&1 |
      grep -E '^\[cuda-golden\]|^\[  (PASSED|FAILED) |tests ran'
    echo "rc=${PIPESTATUS[0]}"
  done
done
envs=()
for s in "${SETTINGS[@]}"; do envs+=(--env "$s"); done
bash tools/device/ab_bench.sh "$@" "${envs[@]}"
