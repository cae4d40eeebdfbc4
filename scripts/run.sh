#!/usr/bin/env bash
# Quick start, main job: set up, build, and generate text on the CPU with the bundled DeepSeek-V4
# model (models/deepseek-v4-tiny-en, 21M parameters trained on the Brown corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/src/api/deepinfer generate --prompt "It was a cold night, and" --max-tokens 48 \
  --temperature 0.8 --top-p 0.95 --seed 42 "$@"
