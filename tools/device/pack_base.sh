#!/usr/bin/env bash
# Packs the sources of a base commit (default HEAD) into .basesrc/base.tgz (git-excluded; a few
# hundred KB: src, include, tools and the top-level CMake files) so that one device call can
# build it beside the working tree with build_base.sh and A/B the two binaries on one machine
# (machines differ by 1-3%). Carry .basesrc with the call. Usage: tools/device/pack_base.sh [REV]
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=${1:-HEAD}
mkdir -p .basesrc
git archive --format=tar "$rev" src include tools CMakeLists.txt CMakePresets.json |
  gzip >.basesrc/base.tgz
git rev-parse "$rev" >.basesrc/REV
grep -q '^.basesrc/' .git/info/exclude || echo '.basesrc/' >>.git/info/exclude
echo "packed $(cat .basesrc/REV) into .basesrc/base.tgz ($(du -h .basesrc/base.tgz | cut -f1))"
