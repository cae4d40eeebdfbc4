#!/usr/bin/env bash
# The CUDA backend's numerics switches on the GPU machine, after gpu_session.sh has built and
# tested build-gpu with the defaults (run it from BENCH_CMDS): the CUDA tests (op tests, golden
# fixtures) and the batch-invariance / graph tests under each other setting, then ab_bench.sh
# with each setting as one more variant (its arguments pass through; pack bases first, or there
# are none).
#   BENCH_CMDS="bash tools/device/switch_check.sh --runs 2 --prefill-64k"
# The op tests pin the operand switches themselves (ops_attention_test.cpp: every operand split;
# ops_attention_fp16qp_test.cpp: each fp16 variant), so every failure is one, and the line's rc
# says so. TEST_SETTINGS="A=0;B=0 C=0" runs the suites under those settings only (the A/B still
# takes every setting).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
# The defaults are fp16 Q / P in the attention and fp16 q / k in the indexer (docs/env.md);
# these are the settings that split them again, alone and all together.
SETTINGS=("DEEPINFER_CUDA_ATTENTION_FP16_QP=0"
          "DEEPINFER_CUDA_INDEXER_FP16_Q=0 DEEPINFER_CUDA_INDEXER_FP16_K=0"
          "DEEPINFER_CUDA_ATTENTION_FP16_QP=0 DEEPINFER_CUDA_INDEXER_FP16_Q=0 DEEPINFER_CUDA_INDEXER_FP16_K=0")
TESTED=("${SETTINGS[@]}")
[[ -n "${TEST_SETTINGS:-}" ]] && IFS=';' read -r -a TESTED <<<"$TEST_SETTINGS"
T=build-gpu/tests/cuda
for s in "${TESTED[@]}"; do
  for t in cuda_tests cuda_fill_tests; do
    echo "== $s $t"
    # $s unquoted: one NAME=VALUE word per variable.
    DEEPINFER_SOURCE_DIR=$ROOT timeout 300 env $s "$T/$t" --gtest_brief=1 2>&1 |
      grep -E '^\[cuda-golden\]|^\[  (PASSED|FAILED) |tests ran'
    echo "rc=${PIPESTATUS[0]}"
  done
done
envs=()
for s in "${SETTINGS[@]}"; do envs+=(--env "$s"); done
bash tools/device/ab_bench.sh "$@" "${envs[@]}"
