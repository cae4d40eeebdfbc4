#!/usr/bin/env bash
# Quick start, tests: set up, build, run every test (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
