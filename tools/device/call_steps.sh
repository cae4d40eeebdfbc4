# Sourced by the one-call scripts (first_call.sh, l2_call.sh) after they set $O, their output
# folder: stage lines with elapsed time into $O/summary.txt, a gtest log's result lines, the
# engine's GPU build (gpu_session.sh, tests built but not run), then the run environment, and the
# bench binary with the random-weight V4-Flash arguments.
T0=$(date +%s)
t() { echo "t=$(($(date +%s) - T0))s $*" | tee -a "$O/summary.txt"; }
passed() { grep -E '^\[  (PASSED|FAILED) ' "$1" | tr '\n' ' '; }
build_engine() {
  SKIP_TESTS=1 EXTRA_TARGETS="cuda_tests" OUT=$O/gs bash tools/device/gpu_session.sh >/dev/null 2>&1
  [[ -d /tmp/devx ]] && export LD_LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  export DEEPINFER_SOURCE_DIR=$ROOT
}
B=build-gpu/src/api/deepinfer
P="--device cuda --random-weights --preset v4-flash --peak-gbs 4300 --peak-tflops 790"
