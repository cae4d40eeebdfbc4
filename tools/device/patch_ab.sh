#!/usr/bin/env bash
# A same-GPU A/B of a change that is not on main (a patch, e.g. `git diff main BRANCH`, carried to
# the GPU machine): builds the tree, keeps its binary, applies the patch, builds again, runs the
# MoE tests and the whole cuda_tests on the patched build, then tools/device/small_ab.sh with each
# binary (the base binary on BASE_SETTINGS, the patched one on SETTINGS, each a list of
# small_ab.sh settings). Logs in $OUT.
# Usage: PATCH=.scratch/pending.patch BASE_SETTINGS="--mxfp4-experts" \
#          SETTINGS='"" --mxfp4-experts' OUT=$OUT bash tools/device/patch_ab.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/patch_ab}
mkdir -p "$OUT"
if [[ -f .devdeps/devdeps.tar.xz ]]; then
  mkdir -p /tmp/devx && tar xJf .devdeps/devdeps.tar.xz -C /tmp/devx
  sed -i -E "s|^prefix *= *.*|prefix=/tmp/devx/usr|" /tmp/devx/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu/pkgconfig
  export LD_LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu LIBRARY_PATH=/tmp/devx/usr/lib/x86_64-linux-gnu
fi
nvidia-smi --query-gpu=name --format=csv,noheader
T0=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_PYTHON=$(command -v python3) >"$OUT/configure.log" 2>&1 ||
  { tail -20 "$OUT/configure.log"; exit 1; }
ninja -C build-gpu -j16 deepinfer >"$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -30; exit 1; }
cp build-gpu/src/api/deepinfer /tmp/deepinfer_base
git apply "$PATCH" || { echo "patch does not apply"; exit 1; }
ninja -C build-gpu -j16 deepinfer cuda_tests >>"$OUT/build.log" 2>&1 ||
  { grep -E "error" -A3 "$OUT/build.log" | head -30; exit 1; }
echo "built both in $(($(date +%s) - T0)) s"
DEEPINFER_SOURCE_DIR=$ROOT timeout 120 build-gpu/tests/cuda/cuda_tests --gtest_filter='Moe.*' 2>&1 |
  grep -E "Failure|Expected|Which|differ|^\[  (PASSED|FAILED)" | head -20
DEEPINFER_SOURCE_DIR=$ROOT timeout 240 build-gpu/tests/cuda/cuda_tests --gtest_brief=1 >"$OUT/cuda_tests.log" 2>&1
echo "cuda_tests (patched) rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED" "$OUT/cuda_tests.log" | head -10
echo "=== base binary"
eval "B=/tmp/deepinfer_base OUT=$OUT bash tools/device/small_ab.sh ${BASE_SETTINGS:-\"\"}"
echo "=== patched binary"
eval "OUT=$OUT bash tools/device/small_ab.sh ${SETTINGS:-\"\"}"
echo "all done at $(($(date +%s) - T0)) s"
