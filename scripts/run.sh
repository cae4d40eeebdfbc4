#!/usr/bin/env bash
# Quick start, main job: set up, build, and run the bundled tiny DeepSeek-V4 checkpoint on the
# CPU (logits of a prompt, fed token by token through the model state).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ids=$(/usr/bin/python3 -c "import json; print(','.join(map(str, json.load(open('tests/data/golden/tiny-c/fixture.json'))['input_ids'][:64])))")
./build/src/api/deepinfer logits --model tests/data/golden/tiny-c --input-ids "$ids" --chunk 1 \
  --out build/quickstart_logits.npy
