#!/usr/bin/env bash
# On the GPU machine, after gpu_session.sh set up the dependencies (run it from BENCH_CMDS):
# builds the deepinfer binary of the sources pack_base.sh packed, into ${BASE_DIR:-/tmp/base}/b,
# and prints its path. Logs go to $OUT (or /tmp). Usage:
#   BASE=$(bash tools/device/build_base.sh) && $BASE bench ...
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DIR=${BASE_DIR:-/tmp/base}
LOG=${OUT:-/tmp}/base_build.log
[[ -f "$ROOT/.basesrc/base.tgz" ]] || { echo "no .basesrc/base.tgz (pack_base.sh, carry it)" >&2; exit 1; }
# A warm machine may hold another base's tree: the archive's old mtimes would leave its objects
# looking current to ninja, so a different revision starts from an empty directory.
if [[ "$(cat "$DIR/REV" 2>/dev/null)" != "$(cat "$ROOT/.basesrc/REV")" ]]; then rm -rf "$DIR"; fi
mkdir -p "$DIR" && tar xzf "$ROOT/.basesrc/base.tgz" -C "$DIR" && cp "$ROOT/.basesrc/REV" "$DIR/REV"
{
  cmake -S "$DIR" -B "$DIR/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_PYTHON="$(command -v python3)" &&
    ninja -C "$DIR/b" -j"$(nproc)" deepinfer
} >"$LOG" 2>&1 || { echo "base build FAILED (see $LOG)" >&2; tail -20 "$LOG" >&2; exit 1; }
echo "$DIR/b/src/api/deepinfer"
