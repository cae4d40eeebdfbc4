#!/usr/bin/env bash
# On the GPU machine, after gpu_session.sh set up the dependencies (run it from BENCH_CMDS):
# builds the deepinfer binary of a commit pack_base.sh packed (NAME: its short sha; default the
# first packed, .basesrc/base.tgz) into ${BASE_DIR:-/tmp/base}[-NAME]/b, and prints its path.
# Logs go to $OUT (or /tmp). Usage:
#   BASE=$(bash tools/device/build_base.sh [NAME]) && $BASE bench ...
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NAME=${1:-}
if [[ -n "$NAME" ]]; then
  SRC=$ROOT/.basesrc/$NAME.tgz REVF=$ROOT/.basesrc/$NAME.rev DIR=${BASE_DIR:-/tmp/base}-$NAME
else
  SRC=$ROOT/.basesrc/base.tgz REVF=$ROOT/.basesrc/REV DIR=${BASE_DIR:-/tmp/base}
fi
LOG=${OUT:-/tmp}/base_build${NAME:+-$NAME}.log
[[ -f "$SRC" ]] || { echo "no $SRC (pack_base.sh, carry .basesrc)" >&2; exit 1; }
# A warm machine may hold another base's tree: the archive's old mtimes would leave its objects
# looking current to ninja, so a different revision starts from an empty directory.
if [[ "$(cat "$DIR/REV" 2>/dev/null)" != "$(cat "$REVF")" ]]; then rm -rf "$DIR"; fi
mkdir -p "$DIR" && tar xzf "$SRC" -C "$DIR" && cp "$REVF" "$DIR/REV"
{
  cmake -S "$DIR" -B "$DIR/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a -DDEEPINFER_BUILD_TESTS=OFF -DDEEPINFER_PYTHON="$(command -v python3)" &&
    ninja -C "$DIR/b" -j"$(nproc)" deepinfer
} >"$LOG" 2>&1 || { echo "base build FAILED (see $LOG)" >&2; tail -20 "$LOG" >&2; exit 1; }
echo "$DIR/b/src/api/deepinfer"
