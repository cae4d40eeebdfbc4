#!/usr/bin/env bash
# Runs a command on the GPU machine detached from the device call, so that work longer than one
# call (10 minutes) or than the time left in it goes on, and each call picks up where it stands.
# The first call starts CMD (setsid nohup) with DETACHED_DIR exported for its logs; every call,
# the first included, waits up to WAIT_S seconds for it to end, prints the tail of its output and
# packs DETACHED_DIR into $OUT/detached.tgz. Call again (while the machine is warm) to keep
# waiting; a fresh machine starts CMD again. Usage:
#   OUT=$OUT bash tools/device/detached.sh WAIT_S CMD...
# e.g. OUT=$OUT bash tools/device/detached.sh 540 env BENCH_CMDS='...' bash tools/device/gpu_session.sh
set -uo pipefail
WAIT_S=${1:?usage: detached.sh WAIT_S CMD...}
shift
export DETACHED_DIR=${DETACHED_DIR:-/tmp/detached}
OUT=${OUT:-$DETACHED_DIR.out}  # not inside the directory it packs
mkdir -p "$DETACHED_DIR" "$OUT"
if [[ ! -f $DETACHED_DIR/started ]]; then
  (($# > 0)) || { echo "detached.sh: no command to start" >&2; exit 2; }
  date -u +%FT%TZ >"$DETACHED_DIR/started"
  setsid nohup bash -c '"$@"; echo $? >"$DETACHED_DIR/rc"' detached "$@" \
    >"$DETACHED_DIR/output.log" 2>&1 </dev/null &
  echo "detached.sh: started $* (pid $!)"
fi
end=$(($(date +%s) + WAIT_S))
while [[ ! -f $DETACHED_DIR/rc ]] && (($(date +%s) < end)); do sleep 5; done
tail -40 "$DETACHED_DIR/output.log"
if [[ -f $DETACHED_DIR/rc ]]; then
  echo "detached.sh: ended, rc $(cat "$DETACHED_DIR/rc")"
else
  echo "detached.sh: still running (started $(cat "$DETACHED_DIR/started")); call again to wait on"
fi
tar czf "$OUT/detached.tgz" -C "$(dirname "$DETACHED_DIR")" "$(basename "$DETACHED_DIR")"
