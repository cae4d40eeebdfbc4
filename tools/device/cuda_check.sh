#!/usr/bin/env bash
# One call on a GPU machine: environment check, configure + build of the CUDA tests (Release,
# Ninja, only cuda_tests / cuda_op_bench and their dependencies), the tests, the op
# micro-benchmark, and a short summary table printed last. Logs go to $OUT (default
# ./cuda_check_out).
#
#   tools/device/cuda_check.sh [--prebuilt DIR] [--no-build] [--jobs N]
#
# --prebuilt DIR: DIR/pb.tar.xz holds cuda_tests (+ cuda_op_bench) built elsewhere with the shared
#   libraries they need besides cuBLAS; it runs first (while the local build goes on), so results
#   come back even when this machine lacks a build dependency.
# A test run that dies (a sticky CUDA error ends the process) is followed by each failed test
# alone with DEEPINFER_CUDA_SYNC=1, which names the op at fault.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/cuda_check_out}
PREBUILT="" BUILD=1 JOBS=16
while [[ $# -gt 0 ]]; do
  case $1 in
    --prebuilt) PREBUILT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
SUMMARY=()
note() { SUMMARY+=("$1"); echo "== $1"; }
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }

# ---- environment ---------------------------------------------------------------------------
{
  set -x
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  which nvcc cmake ninja g++ pkg-config python3
  nvcc --version
  cmake --version
  g++ --version
  cat /etc/os-release
  dpkg -l | grep -E 'openblas|nlohmann|libfmt|cli11|pcre2|gtest|pkg-?conf'
  set +x
} >"$OUT/env.log" 2>&1
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
note "tools: cmake $(cmake --version 2>/dev/null | head -1 | awk '{print $3}'), nvcc $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*'), ninja $(ninja --version 2>/dev/null), g++ $(g++ -dumpversion 2>/dev/null)"

# cuBLAS for binaries built elsewhere: the toolkit's, else the one PyTorch's wheels carry.
CUBLAS_DIR=$(dirname "$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets /usr/lib /opt \
  -name 'libcublasLt.so.13*' -print -quit 2>/dev/null)" 2>/dev/null)
echo "cuBLAS dir: $CUBLAS_DIR" >>"$OUT/env.log"

# pkg-config modules the top-level configure requires but the CUDA targets never link (the
# tokenizer's PCRE2 and ICU; seen missing: libpcre2-dev) get configure-only stub .pc files, so
# that cuda_tests can be configured and built on an image without those -dev packages.
STUBS=/tmp/cuda_check_pc
for mod in libpcre2-8 icu-uc; do
  if ! pkg-config --exists "$mod" 2>/dev/null; then
    mkdir -p "$STUBS"
    lib=${mod#lib} && [[ $mod == icu-uc ]] && lib=icuuc
    printf 'Name: %s\nDescription: configure-only stub (cuda_check.sh)\nVersion: 0\nLibs: -l%s\nCflags:\n' \
      "$mod" "$lib" >"$STUBS/$mod.pc"
    note "deps: $mod missing here; configure-only stub (not linked by the CUDA targets)"
  fi
done
[[ -d $STUBS ]] && export PKG_CONFIG_PATH="$STUBS:${PKG_CONFIG_PATH:-}"

# ---- tests ---------------------------------------------------------------------------------
# run_tests LABEL BINARY: brief run; on failure each failed test alone, synchronising per op.
run_tests() {
  local label=$1 bin=$2 log="$OUT/tests_$1.log"
  DEEPINFER_SOURCE_DIR=$ROOT timeout 200 "$bin" --gtest_brief=1 >"$log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(grep -o '\[  PASSED  \] [0-9]*' "$log" | grep -o '[0-9]*$')
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log")
  skipped=$(grep -o '\[  SKIPPED \] [0-9]*' "$log" | grep -o '[0-9]*$')
  note "$label tests: rc $rc, passed ${passed:-0}, failed $failed, skipped ${skipped:-0} ($(elapsed)s)"
  grep '\[cuda-golden\]' "$log" | sort -u >"$OUT/golden_$label.txt"
  # Plain failures (rc 1) speak for themselves; a crash or a CUDA error may hide the op at fault.
  if [[ $rc -ne 0 ]] && { [[ $rc -ne 1 ]] || grep -q 'CUDA error' "$log"; }; then
    local tests
    tests=$(grep -o '^\[  FAILED  \] [A-Za-z0-9_/.]*' "$log" | awk '{print $3}' | sort -u)
    [[ -z "$tests" ]] && tests=$("$bin" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}')
    for t in $tests; do
      [[ $(elapsed) -gt 300 ]] && break
      DEEPINFER_CUDA_SYNC=1 DEEPINFER_SOURCE_DIR=$ROOT timeout 120 "$bin" --gtest_filter="$t" \
        >"$OUT/isolated.log.tmp" 2>&1
      local r=$?
      { echo "### $t (rc $r)"; grep -vE '^\[ *(RUN|OK) *\]' "$OUT/isolated.log.tmp" | head -40; } \
        >>"$OUT/isolated_$label.log"
      note "  $label alone: $t rc $r"
    done
    rm -f "$OUT/isolated.log.tmp"
  fi
}

# More checks of the op tests (they take seconds): fresh seeds in a shuffled order, then
# compute-sanitizer's memcheck (out-of-bounds / misaligned accesses) and racecheck (shared-memory
# races), each bounded in time.
OPS_FILTER='Ops.*:Attn.*:Moe.*'
check_more() {
  local bin=$1 cs
  DEEPINFER_SOURCE_DIR=$ROOT timeout 90 "$bin" --gtest_brief=1 --gtest_filter="$OPS_FILTER" \
    --gtest_repeat="${CUDA_CHECK_REPEAT:-3}" --gtest_shuffle >"$OUT/repeat.log" 2>&1
  note "op tests x${CUDA_CHECK_REPEAT:-3} (fresh seeds, shuffled): rc $? $(grep -c '^\[  FAILED  \] [A-Za-z]' "$OUT/repeat.log") failures"
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $cs ]] || { note "compute-sanitizer not found"; return; }
  # racecheck: the kernels that share data through shared memory (attention side, hc, router).
  local filter
  for tool in memcheck racecheck; do
    filter=$OPS_FILTER
    [[ $tool == racecheck ]] && filter='Attn.*:Moe.RouteMatchesCpu:Ops.HcPrePostHeadMatchCpu:Ops.RmsNorm*'
    timeout 120 "$cs" --tool "$tool" --error-exitcode 3 "$bin" --gtest_brief=1 \
      --gtest_filter="$filter" >"$OUT/sanitizer_$tool.log" 2>&1
    note "compute-sanitizer $tool: rc $? $(grep -ho 'ERROR SUMMARY: [0-9]* error[s]*\|RACECHECK SUMMARY: [0-9]* hazard[s]*[^.]*' "$OUT/sanitizer_$tool.log" | tail -1) ($(elapsed)s)"
  done
}

if [[ -n "$PREBUILT" ]]; then
  PB=/tmp/cuda_prebuilt
  rm -rf "$PB" && mkdir -p "$PB" && tar -xJf "$PREBUILT/pb.tar.xz" -C "$PB"
  export LD_LIBRARY_PATH="$PB:${CUBLAS_DIR}:${LD_LIBRARY_PATH:-}"
  if ldd "$PB/cuda_tests" >"$OUT/ldd_prebuilt.log" 2>&1 && ! grep -q 'not found' "$OUT/ldd_prebuilt.log"; then
    BUILD_DIR=$ROOT/build-cuda-dev
    if [[ $BUILD -eq 1 ]]; then  # the build goes on meanwhile (CPU) while the GPU runs tests
      (
        timeout 90 cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
          >"$OUT/configure.log" 2>&1 && echo configured >"$OUT/.configured" &&
          timeout 300 ninja -C "$BUILD_DIR" -j"$JOBS" cuda_tests cuda_op_bench >"$OUT/build.log" 2>&1 &&
          echo built >"$OUT/.built"
      ) &
      BUILD_PID=$!
    fi
    run_tests prebuilt "$PB/cuda_tests"
    [[ -x "$PB/cuda_op_bench" ]] && timeout 120 "$PB/cuda_op_bench" >"$OUT/bench_prebuilt.log" 2>&1
    check_more "$PB/cuda_tests"
  else
    note "prebuilt: unresolved libraries (see ldd_prebuilt.log)"
  fi
fi

# ---- build here ------------------------------------------------------------------------------
BUILD_DIR=$ROOT/build-cuda-dev
if [[ $BUILD -eq 1 ]]; then
  if [[ -n "${BUILD_PID:-}" ]]; then
    wait "$BUILD_PID"
  else
    timeout 90 cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
      >"$OUT/configure.log" 2>&1 && echo configured >"$OUT/.configured" &&
      timeout 300 ninja -C "$BUILD_DIR" -j"$JOBS" cuda_tests cuda_op_bench >"$OUT/build.log" 2>&1 &&
      echo built >"$OUT/.built"
  fi
  if [[ ! -f "$OUT/.configured" ]]; then
    note "configure failed: $(grep -hE 'Could NOT find|not found|Error' "$OUT/configure.log" | head -3 | tr '\n' ' ')"
  elif [[ ! -f "$OUT/.built" ]]; then
    note "build failed: $(grep -hE 'error|FAILED' "$OUT/build.log" | head -3 | tr '\n' ' ')"
  else
    note "build: ok ($(elapsed)s)"
    # Keep the whole call inside one device command's limit: the built copy's tests go last.
    if [[ $(elapsed) -gt ${CUDA_CHECK_BUDGET_S:-360} ]]; then
      note "built tests skipped: $(elapsed)s spent (CUDA_CHECK_BUDGET_S)"
    else
      run_tests built "$BUILD_DIR/tests/cuda/cuda_tests"
      [[ -n "$PREBUILT" ]] || timeout 120 "$BUILD_DIR/tests/cuda/cuda_op_bench" >"$OUT/bench_built.log" 2>&1
    fi
  fi
  rm -f "$OUT/.configured" "$OUT/.built"
fi

# ---- summary (last, so that it ends the output) -----------------------------------------------
echo
echo "==================== cuda_check summary ($(elapsed)s) ===================="
for s in "${SUMMARY[@]}"; do echo "$s"; done
for f in "$OUT"/golden_*.txt; do [[ -s $f ]] && { echo "-- $(basename "$f" .txt)"; cat "$f"; }; done
for f in "$OUT"/bench_*.log; do [[ -s $f ]] && { echo "-- $(basename "$f" .log)"; cat "$f"; }; done
for f in "$OUT"/tests_*.log; do
  [[ -s $f ]] && grep -E '^\[  FAILED  \]|Failure|Expected|Which is|error' "$f" | head -30 |
    sed "s|^|$(basename "$f" .log): |"
done

# At most a few files come back from a device call: one archive of every log, plus the summary.
{
  for s in "${SUMMARY[@]}"; do echo "$s"; done
  cat "$OUT"/golden_*.txt "$OUT"/bench_*.log 2>/dev/null
} >"$OUT/summary.txt"
# (The archive is written outside $OUT first: tar must not read the file it is writing.)
(cd "$OUT" && tar -czf /tmp/cuda_check_logs.tar.gz --exclude=summary.txt . &&
  find . -maxdepth 1 -type f ! -name summary.txt -delete &&
  mv /tmp/cuda_check_logs.tar.gz all_logs.tar.gz)
