#!/usr/bin/env bash
# One call on the GPU machine: build everything the GPU needs, run the CUDA op/golden tests, the
# fill and device-sampler tests and the engine tests on the GPU, generate with the bundled model
# on the GPU, and benchmark (BENCH_CMDS, e.g. `B=build-gpu/src/api/deepinfer bash
# bench/h200_full.sh`). SKIP_TESTS=1 builds and benchmarks only; ARCHIVE=F packs every log into
# one tarball F at the end (the device tool brings back at most 8 files). CMAKE_EXTRA adds configure
# options (e.g. -DCMAKE_CUDA_FLAGS=-lineinfo for ncu source views).
# Logs go to $OUT. The GPU image lacks the PCRE2 / ICU development files the tokenizer links:
# carry .devdeps/devdeps.tar.xz (headers + shared libraries extracted from Debian 12 packages,
# made by tools/device/make_devdeps.sh) and it is unpacked into /tmp/devx.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/gpu_session_out}
mkdir -p "$OUT"
cd "$ROOT"
T0=$(date +%s)
say() { echo "== [$(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }

if ! pkg-config --exists libpcre2-8 icu-uc 2>/dev/null && [[ -f .devdeps/devdeps.tar.xz ]]; then
  mkdir -p /tmp/devx && tar xJf .devdeps/devdeps.tar.xz -C /tmp/devx
  sed -i -E "s|^prefix *= *.*|prefix=/tmp/devx/usr|" /tmp/devx/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}
  export LD_LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu:${LIBRARY_PATH:-}
  say "deps: PCRE2 / ICU from .devdeps"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$OUT/summary.txt"

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_PYTHON=$(command -v python3) ${CMAKE_EXTRA:-} >"$OUT/configure.log" 2>&1 ||
  { say "configure FAILED"; tail -30 "$OUT/configure.log"; exit 1; }
TEST_TARGETS="cuda_tests cuda_fill_tests sampling_cuda_tests engine_tests"
[[ -n "${SKIP_TESTS:-}" ]] && TEST_TARGETS=""
ninja -C build-gpu -j16 deepinfer $TEST_TARGETS ${EXTRA_TARGETS:-} >"$OUT/build.log" 2>&1 ||
  { say "build FAILED"; grep -E "error|FAILED" "$OUT/build.log" | head -30; exit 1; }
say "built"

if [[ -z "${SKIP_TESTS:-}" ]]; then
DEEPINFER_SOURCE_DIR=$ROOT timeout 240 build-gpu/tests/cuda/cuda_tests --gtest_brief=1 >"$OUT/cuda_tests.log" 2>&1
say "cuda_tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cuda_tests.log" | head -3 | tr '\n' ' ')"
grep '\[cuda-golden\]' "$OUT/cuda_tests.log" | sort -u | tee -a "$OUT/summary.txt"
for t in tests/cuda/cuda_fill_tests tests/sampling_cuda/sampling_cuda_tests; do
  name=$(basename "$t")
  timeout 120 "build-gpu/$t" --gtest_brief=1 >"$OUT/$name.log" 2>&1
  rc=$?
  say "$name rc=$rc $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/$name.log" | head -3 | tr '\n' ' ')"
done
DEEPINFER_TEST_DEVICE=cuda timeout 240 build-gpu/tests/engine/engine_tests --gtest_brief=1 >"$OUT/engine_tests_cuda.log" 2>&1
say "engine_tests on cuda rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/engine_tests_cuda.log" | head -3 | tr '\n' ' ')"
grep -E "Failure|Expected|Which" "$OUT/engine_tests_cuda.log" | head -20

build-gpu/src/api/deepinfer generate --device cuda --prompt "It was a cold night, and" \
  --temperature 0 --max-tokens 32 >"$OUT/generate_cuda.txt" 2>&1
build-gpu/src/api/deepinfer generate --device cpu --prompt "It was a cold night, and" \
  --temperature 0 --max-tokens 32 >"$OUT/generate_cpu.txt" 2>&1
say "generate cuda: $(head -c 300 "$OUT/generate_cuda.txt")"
say "generate cpu:  $(head -c 300 "$OUT/generate_cpu.txt")"
fi  # SKIP_TESTS

if [[ -n "${BENCH_CMDS:-}" ]]; then
  bash -c "$BENCH_CMDS" >"$OUT/bench.log" 2>&1
  say "bench rc=$?"
  tail -40 "$OUT/bench.log"
fi
say "done"
cat "$OUT/summary.txt"
if [[ -n "${ARCHIVE:-}" ]]; then tar czf "$ARCHIVE" -C "$OUT" .; fi
