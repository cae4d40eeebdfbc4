"""Helpers shared by train_model.py and evaluate.py (torch + tokenizers)."""
import json
import math
import os

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

BOS_ID, EOS_ID, PAD_ID = 0, 1, 2

# Perplexity protocol (the engine's `perplexity` command must do the same to compare):
# the text file is tokenized as ONE string with no special tokens; the ids are cut into
# consecutive chunks of CTX-1 tokens; each chunk is scored as its own sequence
# [BOS] + chunk, every chunk token predicted once (the last chunk may be shorter).
# NLL is summed over all tokens of the file; ppl = exp(sum / count).
PPL_CTX = 512


def load_tokenizer(path):
    tok = Tokenizer.from_file(path)
    assert tok.token_to_id("<｜begin▁of▁sentence｜>") == BOS_ID
    assert tok.token_to_id("<｜end▁of▁sentence｜>") == EOS_ID
    return tok


def encode(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in f.read().split("\n\n") if d.strip()]


def chunks_for_ppl(ids, ctx=PPL_CTX):
    step = ctx - 1
    return [ids[i : i + step] for i in range(0, len(ids), step)]


@torch.no_grad()
def windowed_nll(model, ids, device, ctx=PPL_CTX, batch=16, autocast_dtype=None):
    """Sum of -log p over every token of `ids`, by the protocol above. Returns (nll, count)."""
    chunks = chunks_for_ppl(ids, ctx)
    full = [c for c in chunks if len(c) == ctx - 1]
    rest = [c for c in chunks if len(c) != ctx - 1]
    groups = [full[i : i + batch] for i in range(0, len(full), batch)] + [[c] for c in rest]
    total, count = 0.0, 0
    for g in groups:
        x = torch.tensor([[BOS_ID] + c for c in g], device=device)
        with torch.autocast("cuda", dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(input_ids=x, use_cache=False).logits
        lp = F.log_softmax(logits[:, :-1].float(), dim=-1)
        nll = -lp.gather(-1, x[:, 1:, None]).squeeze(-1)
        total += float(nll.double().sum())
        count += nll.numel()
    return total, count


def top_p_filter(logits, top_p):
    if top_p >= 1.0:
        return logits
    sorted_logits, idx = torch.sort(logits, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    cum = torch.cumsum(probs, dim=-1)
    drop = cum - probs > top_p  # keep the smallest prefix whose mass reaches top_p
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(0, idx, sorted_logits)


@torch.no_grad()
def generate(model, prompt_ids, n, device, greedy=True, temperature=1.0, top_p=1.0, generator=None,
             stop_at_eos=False, use_cache=True):
    """Our own decode loop over the reference cache (model.generate is not needed).

    Returns (tokens, top2_margins). With use_cache=False every step recomputes the whole
    sequence (a consistency check for the cached path)."""
    toks, margins = [], []
    seq = list(prompt_ids)
    out = model(input_ids=torch.tensor([seq], device=device), use_cache=use_cache)
    cache = out.past_key_values if use_cache else None
    logits = out.logits[0, -1].float()
    for _ in range(n):
        top2 = logits.topk(2)
        margins.append(float(top2.values[0] - top2.values[1]))
        if greedy:
            nxt = int(top2.indices[0])
        else:
            probs = torch.softmax(top_p_filter(logits / temperature, top_p), dim=-1)
            nxt = int(torch.multinomial(probs, 1, generator=generator))
        toks.append(nxt)
        seq.append(nxt)
        if stop_at_eos and nxt == EOS_ID:
            break
        if use_cache:
            out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
        else:
            out = model(input_ids=torch.tensor([seq], device=device), use_cache=False)
        logits = out.logits[0, -1].float()
    return toks, margins


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)


def ppl(nll, count):
    return math.exp(nll / count)


def file_mb(path):
    return os.path.getsize(path) / 1e6
