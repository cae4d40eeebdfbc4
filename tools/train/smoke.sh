#!/usr/bin/env bash
# A quick end-to-end check of the pipeline (about two minutes on an H200): corpus, tokenizer,
# 40 training steps, evaluation and model card, into $SMOKE_DIR (default /tmp/deepinfer-smoke).
# Prints the measured seconds per training step and the faster experts implementation.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SMOKE_DIR=${SMOKE_DIR:-/tmp/deepinfer-smoke}
WORK=${WORK:-$SMOKE_DIR/work}
export PYTHONUNBUFFERED=1
cd "$HERE"
python3 -c "import torch, transformers, tokenizers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'cuda', torch.cuda.get_device_name(0))"
python3 prepare_corpus.py --out "$WORK/corpus"
python3 train_tokenizer.py --train "$WORK/corpus/train.txt" --out "$WORK/tokenizer" --vocab 8192
python3 train_model.py --corpus "$WORK/corpus" --tokenizer "$WORK/tokenizer" --out "$SMOKE_DIR/model" \
  --steps 40 --warmup 10 --eval-every 20 --experts-impl auto "$@"
python3 evaluate.py --model "$SMOKE_DIR/model" --corpus "$WORK/corpus" --name smoke
python3 - "$SMOKE_DIR/model/train_log.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
last = t["log"]["train"][-1]
print(f"SMOKE_SEC_PER_STEP={last[3] / last[0]:.4f}")
print(f"SMOKE_EXPERTS_IMPL={t['experts_impl']}")
PY
