#!/usr/bin/env bash
# Packs the sources of base commits (default HEAD) into .basesrc (git-excluded; a few hundred KB
# each: src, include, tools and the top-level CMake files) so that one device call can build them
# beside the working tree (build_base.sh) and A/B the binaries on one machine (machines differ by
# 1-3%). Carry .basesrc with the call. Usage: tools/device/pack_base.sh [REV...]
# The first REV is also .basesrc/base.tgz (build_base.sh with no argument); every REV is
# .basesrc/<short sha>.tgz, listed in order in .basesrc/order (ab_bench.sh runs them all).
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -gt 0 ]] || set -- HEAD
rm -rf .basesrc && mkdir -p .basesrc
for rev in "$@"; do
  full=$(git rev-parse "$rev")
  short=${full:0:7}
  git archive --format=tar "$full" src include tools CMakeLists.txt CMakePresets.json |
    gzip >".basesrc/$short.tgz"
  echo "$full" >".basesrc/$short.rev"
  echo "$short" >>.basesrc/order
  echo "packed $full ($rev) into .basesrc/$short.tgz ($(du -h ".basesrc/$short.tgz" | cut -f1))"
done
first=$(head -1 .basesrc/order)
cp ".basesrc/$first.tgz" .basesrc/base.tgz
cp ".basesrc/$first.rev" .basesrc/REV
grep -q '^.basesrc/' .git/info/exclude || echo '.basesrc/' >>.git/info/exclude
