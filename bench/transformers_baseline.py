#!/usr/bin/env python3
"""transformers baseline for `deepinfer bench`: the same checkpoint, prompts and metrics.

Runs Hugging Face transformers' DeepseekV4ForCausalLM (eager attention, the only backend V4
supports there) on a GPU machine with PyTorch, on a checkpoint deepinfer loads (official,
transformers-saved or in-memory tensor names; bf16, FP8 with 128x128 block scales, MXFP4
experts), and prints the numbers `deepinfer bench` prints, so the two stand side by side:

  decode   N requests with L tokens of cache, then one token per request per step (greedy):
           step time, tokens/s, tokens/s per user, achieved GB/s and TFLOP/s against the same
           roofline (bytes and FLOPs from the config, as src/bench/roofline.cpp counts them,
           bf16 weights and state).
  prefill  T new tokens per step over S fresh sequences that hold L tokens of cache first.
  serve    Poisson arrivals through static batching (transformers has no continuous
           batching): whenever the model is idle, every request that has arrived (up to
           --max-batch) is prefilled together and decoded to --output-len; TTFT, TPOT, ITL,
           E2EL with vllm bench serve's definitions.

Prompts are the same token ids deepinfer draws: a SplitMix64 stream of --seed consumed in the
same order (src/bench/splitmix.h, runner.h, serve.cpp). Steps are timed with CUDA events after
warm-up (5 prefill / 50 decode steps, then 60 logged). --json-out writes deepinfer's JSON layout
(runs[].summary / runs[].steps, or serve), which bench/plot_pareto.py reads.

    python3 bench/transformers_baseline.py --model /data/v4-flash-2l --mode decode \\
        --decode-num-requests 1,4,16,64 --context-length 1024 --json-out hf-decode.json
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

import torch

# ---- the benchmarks' random stream (src/bench/splitmix.h) -----------------------------------

M64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = (seed * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) & M64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def token(self, vocab):
        return self.next() % vocab

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53

    def exponential(self, rate):
        return -math.log1p(-self.uniform()) / rate


def draw_fill(rng, vocab, num_seqs, context, fill_chunk):
    """Context tokens per sequence, drawn in BenchRunner::fill_context's order."""
    ids = [[] for _ in range(num_seqs)]
    if context <= 0:
        return ids
    budget = max(1, fill_chunk)
    chunk = min(context, budget)
    group = max(1, budget // chunk)
    for off in range(0, context, chunk):
        n = min(chunk, context - off)
        for g0 in range(0, num_seqs, group):
            for i in range(g0, min(num_seqs, g0 + group)):
                ids[i].extend(rng.token(vocab) for _ in range(n))
    return ids


# ---- checkpoint loading (the spellings src/io/weight_names.cpp accepts) ---------------------

TOP = {  # official / saved spelling (no "model.") -> in-memory name
    "embed.weight": "model.embed_tokens.weight", "embed_tokens.weight": "model.embed_tokens.weight",
    "head.weight": "lm_head.weight", "lm_head.weight": "lm_head.weight",
    "norm.weight": "model.norm.weight",
    "hc_head_fn": "model.hc_head.hc_fn", "hc_head.hc_fn": "model.hc_head.hc_fn",
    "hc_head_base": "model.hc_head.hc_base", "hc_head.hc_base": "model.hc_head.hc_base",
    "hc_head_scale": "model.hc_head.hc_scale", "hc_head.hc_scale": "model.hc_head.hc_scale",
}
LAYER = {  # after "layers.N.": official -> in-memory (without "model.layers.N.")
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "hc_attn_fn": "attn_hc.fn", "hc_attn_base": "attn_hc.base", "hc_attn_scale": "attn_hc.scale",
    "hc_ffn_fn": "ffn_hc.fn", "hc_ffn_base": "ffn_hc.base", "hc_ffn_scale": "ffn_hc.scale",
    "attn.wq_a.weight": "self_attn.q_a_proj.weight",
    "attn.q_norm.weight": "self_attn.q_a_norm.weight",
    "attn.wq_b.weight": "self_attn.q_b_proj.weight",
    "attn.wkv.weight": "self_attn.kv_proj.weight",
    "attn.norm.weight": "self_attn.kv_norm.weight",
    "attn.wo_a.weight": "self_attn.o_a_proj.weight",
    "attn.wo_b.weight": "self_attn.o_b_proj.weight",
    "attn.attn_sink": "self_attn.sinks",
    "attn.compressor.wkv.weight": "self_attn.compressor.kv_proj.weight",
    "attn.compressor.wgate.weight": "self_attn.compressor.gate_proj.weight",
    "attn.compressor.norm.weight": "self_attn.compressor.kv_norm.weight",
    "attn.compressor.ape": "self_attn.compressor.position_bias",
    "attn.indexer.wq_b.weight": "self_attn.compressor.indexer.q_b_proj.weight",
    "attn.indexer.weights_proj.weight": "self_attn.compressor.indexer.scorer.weights_proj.weight",
    "attn.indexer.compressor.wkv.weight": "self_attn.compressor.indexer.kv_proj.weight",
    "attn.indexer.compressor.wgate.weight": "self_attn.compressor.indexer.gate_proj.weight",
    "attn.indexer.compressor.norm.weight": "self_attn.compressor.indexer.kv_norm.weight",
    "attn.indexer.compressor.ape": "self_attn.compressor.indexer.position_bias",
    "ffn.gate.weight": "mlp.gate.weight",
    "ffn.gate.bias": "mlp.gate.e_score_correction_bias",
    "ffn.gate.tid2eid": "mlp.gate.tid2eid",
    "ffn.shared_experts.w1.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn.shared_experts.w2.weight": "mlp.shared_experts.down_proj.weight",
    "ffn.shared_experts.w3.weight": "mlp.shared_experts.up_proj.weight",
}

ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
             "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8,
             "BOOL": torch.bool, "F8_E4M3": torch.uint8, "F8_E8M0": torch.uint8}
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                     -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


class Checkpoint:
    """Every tensor of a checkpoint directory by on-disk name (index + shards, or one file)."""

    def __init__(self, path):
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.isfile(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        self.entries = {}
        for name in files:
            fp = os.path.join(path, name)
            with open(fp, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            for k, v in header.items():
                if k != "__metadata__":
                    self.entries[k] = (fp, 8 + n, v)

    def raw(self, name):
        fp, base, e = self.entries[name]
        b, end = e["data_offsets"]
        with open(fp, "rb") as f:
            f.seek(base + b)
            buf = bytearray(f.read(end - b))
        t = torch.frombuffer(buf, dtype=ST_DTYPES[e["dtype"]]) if buf else torch.empty(0)
        return t.reshape(e["shape"]), e["dtype"]

    def read(self, name, scale_name=None):
        """The tensor as float32 (integers stay integer), dequantised when it has a scale."""
        t, dt = self.raw(name)
        if scale_name is None:
            if dt == "F8_E4M3":
                return t.view(torch.float8_e4m3fn).float()
            return t if not t.is_floating_point() else t.float()
        s, sdt = self.raw(scale_name)
        if dt == "F8_E4M3":  # 128x128 block scales
            w = t.view(torch.float8_e4m3fn).float()
            s = e8m0(s) if sdt == "F8_E8M0" else s.float()
            rows, cols = w.shape[-2:]
            s = s.repeat_interleave(128, -2)[..., :rows, :].repeat_interleave(128, -1)[..., :cols]
            return w * s
        # packed e2m1 pairs (low nibble = even column), e8m0 scale per 32
        b = t.view(torch.uint8)
        vals = torch.stack([E2M1[(b & 0xF).long()], E2M1[(b >> 4).long()]], dim=-1)
        w = vals.reshape(*b.shape[:-1], b.shape[-1] * 2)
        return w * e8m0(s).repeat_interleave(32, -1)[..., :w.shape[-1]]


def e8m0(s):
    return torch.exp2(s.view(torch.uint8).float() - 127)


def target_name(disk):
    """(in-memory name, expert index or None, w index or None) of an on-disk weight name."""
    s = disk[6:] if disk.startswith("model.") else disk
    if s in TOP:
        return TOP[s], None, None
    if s.startswith("layers."):
        layer, rest = s[7:].split(".", 1)
        if rest in LAYER:
            return f"model.layers.{layer}.{LAYER[rest]}", None, None
        if rest.startswith("ffn.experts."):
            e, w, _ = rest[12:].split(".")
            return f"model.layers.{layer}.mlp.experts", int(e), int(w[1])
    return "model." + s, None, None  # transformers' in-memory spelling already


def load_model(path, device, keep_fp32=True):
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
    config = DeepseekV4Config.from_pretrained(path)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device(device):
        model = DeepseekV4ForCausalLM(config)
    torch.set_default_dtype(torch.float32)
    strict = getattr(model, "_keep_in_fp32_modules_strict", None) or []
    if keep_fp32:  # what from_pretrained does with _keep_in_fp32_modules_strict
        for name, p in list(model.named_parameters()) + list(model.named_buffers()):
            if p.is_floating_point() and any(k in name.split(".") for k in strict):
                p.data = p.data.float()
    targets = dict(model.named_parameters())
    targets.update(dict(model.named_buffers()))
    ck = Checkpoint(path)
    names = set(ck.entries)
    scales = {}
    for n in names:  # companions: official "X.scale" next to "X.weight", or "X.weight_scale_inv"
        if n.endswith(".scale") and n[:-6] + ".weight" in names:
            scales[n[:-6] + ".weight"] = n
        elif n.endswith("_scale_inv") and n[:-10] in names:
            scales[n[:-10]] = n
    loaded = set()
    with torch.no_grad():
        for n in sorted(names - set(scales.values())):
            tgt, expert, w = target_name(n)
            value = ck.read(n, scales.get(n))
            if expert is None:
                if tgt not in targets:
                    print(f"note: skipping checkpoint tensor {n} (no parameter {tgt})",
                          file=sys.stderr)
                    continue
                targets[tgt].copy_(value.reshape(targets[tgt].shape))
                loaded.add(tgt)
                continue
            inter = config.moe_intermediate_size
            if w == 2:
                targets[tgt + ".down_proj"][expert].copy_(value)
                loaded.add(tgt + ".down_proj")
            else:
                rows = slice(0, inter) if w == 1 else slice(inter, 2 * inter)
                targets[tgt + ".gate_up_proj"][expert, rows].copy_(value)
                loaded.add(tgt + ".gate_up_proj")
    missing = [n for n, _ in model.named_parameters() if n not in loaded]
    if config.tie_word_embeddings:
        missing = [n for n in missing if n != "lm_head.weight"]
    if missing:
        sys.exit(f"checkpoint {path} lacks {len(missing)} parameters, e.g. {missing[:5]}")
    return model.eval(), config


# ---- roofline (the formulas of src/bench/roofline.cpp) --------------------------------------

def step_cost(c, seqs, wb=2.0, pb=4.0, sb=2.0):
    """(bytes, flops, weight_bytes) of one step; seqs = [(context, new tokens)]."""
    T = sum(s for _, s in seqs)
    R = len(seqs)
    D, V, hd, H = c.hidden_size, c.vocab_size, c.head_dim, c.num_attention_heads
    q, I, E = c.q_lora_rank, c.moe_intermediate_size, c.n_routed_experts
    k, hc = c.num_experts_per_tok, c.hc_mult
    mix = (2 + hc) * hc
    nh, di, W, topk = c.index_n_heads, c.index_head_dim, c.sliding_window, c.index_topk
    G, ol = c.o_groups, c.o_lora_rank
    rates = c.compress_rates
    attn = q * D + H * hd * q + hd * D + G * ol * (H * hd // G) + D * G * ol
    idx = nh * di * q + nh * D + 2 * (2 * di) * D
    wbytes = T * D * wb + V * D * wb + D * pb + (hc * hc * D + hc + 1) * pb
    flops = 2 * R * V * D + 2 * T * hc * hc * D + 2 * T * hc * D
    touched = E * (1 - (1 - k / E) ** T) if T > 0 else 0
    sread = swrite = 0.0
    for l, t in enumerate(c.layer_types):
        csa = t == "compressed_sparse_attention"
        comp = t != "sliding_attention"
        m = rates[t] if comp else 0
        width = (2 * hd if csa else hd) if comp else 0
        wbytes += 2 * (mix * hc * D + mix + 3) * pb + (2 * D + q + hd) * pb
        flops += 2 * (2 * T * mix * hc * D + 2 * T * hc * D + 2 * T * hc * (hc + 1) * D)
        wbytes += attn * wb + H * pb
        flops += 2 * T * attn
        if comp:
            wbytes += 2 * width * D * wb + (m * width + hd) * pb
            flops += 2 * T * 2 * width * D
        if csa:
            wbytes += idx * wb + (m * 2 * di + di) * pb
            flops += 2 * T * idx
        wbytes += E * D * wb + (T * k * 4 if c.mlp_layer_types[l] == "hash_moe" else E * pb)
        flops += 2 * T * E * D
        wbytes += 3 * I * D * wb + touched * 3 * I * D * wb
        flops += 2 * T * 3 * I * D + 2 * T * k * 3 * I * D
        for ctx, S in seqs:
            selected = 0
            for j in range(S):
                p = ctx + j
                vis = (p + 1) // m if comp else 0
                kept = min(topk, vis) if csa else vis
                flops += 4 * H * hd * (min(W, p + 1) + kept)
                if csa:
                    flops += 2 * nh * di * vis
                    selected += kept
            sread += min(W - 1, ctx) * hd
            swrite += S * hd
            if not comp:
                continue
            e0, e1 = ctx // m, (ctx + S) // m
            rows = S * width * 2 + (S * 2 * di * 2 if csa else 0)
            swrite += rows + (e1 - e0) * (hd + (di if csa else 0))
            sread += rows + (min(e1, selected) * hd + e1 * di if csa else e1 * hd)
    return wbytes + (sread + swrite) * sb, flops, wbytes


# ---- runners ----------------------------------------------------------------------------------

def timed_forward(model, ids, cache):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    end.record()
    end.synchronize()
    return out, start.elapsed_time(end) / 1e3


def fill(model, cache, ids, chunk, device):
    """Feeds [N, L] context ids in chunks; returns the cache."""
    L = len(ids[0]) if ids else 0
    t = torch.tensor(ids, device=device)
    for off in range(0, L, chunk):
        out = model(input_ids=t[:, off:off + chunk], past_key_values=cache, use_cache=True,
                    logits_to_keep=1)
        cache = out.past_key_values
    return cache


def record(index, secs, tokens, num_seqs, ctx, cost, peaks):
    b, f, wb = cost
    roof = max(b / peaks[0], f / peaks[1])
    tps = tokens / secs
    return {"step": index, "time_s": secs, "tokens": tokens, "num_seqs": num_seqs,
            "context": ctx, "tokens_per_s": tps, "tokens_per_s_per_user": tps / num_seqs,
            "weight_bytes": wb, "bytes": b, "flops": f, "achieved_gbs": b / secs / 1e9,
            "achieved_tflops": f / secs / 1e12, "roofline_s": roof,
            "roofline_fraction": roof / secs,
            "bound": "memory" if b / peaks[0] >= f / peaks[1] else "compute"}


def summarize(mode, steps, num_seqs, extra):
    secs = sum(s["time_s"] for s in steps)
    tokens = sum(s["tokens"] for s in steps)
    n = len(steps)
    times = sorted(s["time_s"] for s in steps)
    s = {"steps": n, "median_step_s": statistics.median(times), "mean_step_s": secs / n,
         "min_step_s": times[0], "tokens_per_step": tokens / n, "tokens_per_s": tokens / secs,
         "tokens_per_s_per_user": tokens / secs / num_seqs,
         "mean_bytes_per_step": sum(x["bytes"] for x in steps) / n,
         "mean_flops_per_step": sum(x["flops"] for x in steps) / n,
         "achieved_gbs": sum(x["bytes"] for x in steps) / secs / 1e9,
         "achieved_tflops": sum(x["flops"] for x in steps) / secs / 1e12,
         "roofline_step_s": sum(x["roofline_s"] for x in steps) / n,
         "roofline_fraction": sum(x["roofline_s"] for x in steps) / secs,
         "bound": steps[n // 2]["bound"], "context_first": steps[0]["context"],
         "context_last": steps[-1]["context"]}
    return dict(mode=mode, num_seqs=num_seqs, summary=s, steps=steps, **extra)


def run_decode(model, c, a, n, peaks, device):
    rng = SplitMix64(a.seed)
    ids = draw_fill(rng, c.vocab_size, n, a.context_length, a.fill_chunk)
    first = [rng.token(c.vocab_size) for _ in range(n)]
    warm = a.warmup_steps if a.warmup_steps >= 0 else 50
    total = a.output_len if a.output_len > 0 else warm + a.num_steps
    with torch.no_grad():
        cache = fill(model, None, ids, max(1, a.fill_chunk // n), device) if a.context_length else None
        nxt = torch.tensor(first, device=device)[:, None]
        steps = []
        for s in range(total):
            ctx = a.context_length + s
            out, secs = timed_forward(model, nxt, cache)
            cache = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1)[:, None]
            if s >= warm:
                cost = step_cost(c, [(ctx, 1)] * n)
                steps.append(record(s - warm, secs, n, n, ctx, cost, peaks))
    return summarize("decode", steps, n, {"context_length": a.context_length, "warmup_steps": warm,
                                          "tokens_per_seq": 1})


def run_prefill(model, c, a, peaks, device):
    T, S = a.prefill_batch_size, a.prefill_seqs
    if T % S:
        sys.exit("--prefill-batch-size must be a multiple of --prefill-seqs here (no padding)")
    rng = SplitMix64(a.seed)
    warm = a.warmup_steps if a.warmup_steps >= 0 else 5
    steps = []
    with torch.no_grad():
        for s in range(warm + a.num_steps):
            ctx_ids = draw_fill(rng, c.vocab_size, S, a.context_length, a.fill_chunk)
            new = [[rng.token(c.vocab_size) for _ in range(T // S)] for _ in range(S)]
            cache = fill(model, None, ctx_ids, max(1, a.fill_chunk // S), device) \
                if a.context_length else None
            _, secs = timed_forward(model, torch.tensor(new, device=device), cache)
            if s >= warm:
                cost = step_cost(c, [(a.context_length, T // S)] * S)
                steps.append(record(s - warm, secs, T, S, a.context_length, cost, peaks))
    return summarize("prefill", steps, S, {"context_length": a.context_length,
                                           "warmup_steps": warm, "tokens_per_seq": T // S,
                                           "prefill_tokens": T})


def pct(v, q):
    if not v:
        return 0.0
    v = sorted(v)
    pos = q / 100 * (len(v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (pos - lo) * (v[hi] - v[lo])


def run_serve(model, c, a, device):
    rng = SplitMix64(a.seed)
    rate = float(a.request_rate)
    out_len = a.output_len if a.output_len > 0 else 32
    arrivals, prompts, t = [], [], 0.0
    for i in range(a.num_prompts):
        if not math.isinf(rate) and i > 0:
            t += rng.exponential(rate)
        arrivals.append(t)
        prompts.append([rng.token(c.vocab_size) for _ in range(a.input_len)])
    times = [[] for _ in prompts]
    t0 = time.perf_counter()
    now = lambda: time.perf_counter() - t0  # noqa: E731
    nxt, peak = 0, 0
    with torch.no_grad():
        while nxt < len(prompts):
            if arrivals[nxt] > now():
                time.sleep(arrivals[nxt] - now())
            batch = [i for i in range(nxt, len(prompts)) if arrivals[i] <= now()][:a.max_batch]
            nxt = batch[-1] + 1
            peak = max(peak, len(batch))
            ids = torch.tensor([prompts[i] for i in batch], device=device)
            cache = None
            for _ in range(out_len):
                out = model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
                ids = out.logits[:, -1].argmax(-1)[:, None]
                torch.cuda.synchronize()
                stamp = now()
                for i in batch:
                    times[i].append(stamp)
    ttft = [ts[0] - arr for ts, arr in zip(times, arrivals)]
    e2el = [ts[-1] - arr for ts, arr in zip(times, arrivals)]
    tpot = [(e - f) / (len(ts) - 1) for ts, e, f in zip(times, e2el, ttft) if len(ts) > 1]
    itl = [b - a_ for ts in times for a_, b in zip(ts, ts[1:])]
    dur = max(ts[-1] for ts in times)
    dist = lambda v: {"mean": statistics.fmean(v) * 1e3 if v else 0.0,  # noqa: E731
                      "median": pct(v, 50) * 1e3, "p90": pct(v, 90) * 1e3, "p99": pct(v, 99) * 1e3}
    n_out = sum(len(ts) for ts in times)
    buckets = {}
    for ts in times:
        for x in ts:
            buckets[int(x)] = buckets.get(int(x), 0) + 1
    return {"num_prompts": a.num_prompts, "request_rate": "inf" if math.isinf(rate) else rate,
            "input_len": a.input_len, "output_len": out_len, "completed": len(prompts),
            "failed": 0, "duration_s": dur, "total_input_tokens": a.input_len * len(prompts),
            "total_output_tokens": n_out, "request_throughput": len(prompts) / dur,
            "output_throughput": n_out / dur, "peak_output_throughput": max(buckets.values()),
            "peak_concurrent_requests": peak,
            "total_token_throughput": (n_out + a.input_len * len(prompts)) / dur,
            "ttft_ms": dist(ttft), "tpot_ms": dist(tpot), "itl_ms": dist(itl), "e2el_ms": dist(e2el)}


def print_serve(j):
    print(f"{' Serving Benchmark Result (transformers, static batching) ':=^60}")
    for key, label in [("completed", "Successful requests:"), ("duration_s", "Benchmark duration (s):"),
                       ("total_input_tokens", "Total input tokens:"),
                       ("total_output_tokens", "Total generated tokens:"),
                       ("request_throughput", "Request throughput (req/s):"),
                       ("output_throughput", "Output token throughput (tok/s):"),
                       ("peak_output_throughput", "Peak output token throughput (tok/s):"),
                       ("peak_concurrent_requests", "Peak concurrent requests:"),
                       ("total_token_throughput", "Total Token throughput (tok/s):")]:
        v = j[key]
        print(f"{label:<48}{v:>12.2f}" if isinstance(v, float) else f"{label:<48}{v:>12}")
    for key, title, ab in [("ttft_ms", "Time to First Token", "TTFT"),
                           ("tpot_ms", "Time per Output Token (excl. 1st token)", "TPOT"),
                           ("itl_ms", "Inter-token Latency", "ITL"),
                           ("e2el_ms", "End-to-end Latency", "E2EL")]:
        print(f"{' ' + title + ' ':-^60}")
        for s in ("mean", "median", "p99"):
            print(f"{(s.capitalize() if s != 'p99' else 'P99') + ' ' + ab + ' (ms):':<48}"
                  f"{j[key][s]:>12.2f}")
    print("=" * 60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", choices=["prefill", "decode", "serve"], default="decode")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--prefill-batch-size", type=int, default=2048)
    ap.add_argument("--prefill-seqs", type=int, default=1)
    ap.add_argument("--decode-num-requests", default="1")
    ap.add_argument("--context-length", type=int, default=0)
    ap.add_argument("--output-len", type=int, default=0)
    ap.add_argument("--warmup-steps", type=int, default=-1)
    ap.add_argument("--num-steps", type=int, default=60)
    ap.add_argument("--fill-chunk", type=int, default=2048)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--request-rate", default="inf")
    ap.add_argument("--max-batch", type=int, default=256, help="serve: static batch limit")
    ap.add_argument("--peak-gbs", type=float, default=4300.0, help="H200 HBM, measured")
    ap.add_argument("--peak-tflops", type=float, default=790.0, help="H200 bf16, measured")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("this baseline times with CUDA events and needs a GPU")
    t0 = time.time()
    model, c = load_model(a.model, a.device)
    print(f"loaded {a.model} in {time.time() - t0:.1f} s (transformers, bf16, eager)",
          file=sys.stderr)
    doc = {"tool": "transformers DeepseekV4ForCausalLM", "mode": a.mode, "model": a.model,
           "device": torch.cuda.get_device_name(), "seed": a.seed}
    peaks = (a.peak_gbs * 1e9, a.peak_tflops * 1e12)
    # The reference keeps its norms in fp32 (_keep_in_fp32_modules_strict), whose fp32 outputs
    # then meet bf16 linears: bf16 autocast is how transformers runs V4 in bf16.
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    autocast.__enter__()
    if a.mode == "serve":
        doc["serve"] = run_serve(model, c, a, a.device)
        print_serve(doc["serve"])
    else:
        doc["machine"] = {"peak_gbs": a.peak_gbs, "peak_tflops": a.peak_tflops}
        if a.mode == "decode":
            runs = [run_decode(model, c, a, int(n), peaks, a.device)
                    for n in a.decode_num_requests.split(",")]
        else:
            runs = [run_prefill(model, c, a, peaks, a.device)]
        doc["runs"] = runs
        print(f"{'mode':<8} {'seqs':>6} {'tok/step':>8} {'context':>8} {'ctx':>5} {'step ms':>10} "
              f"{'tok/s':>10} {'tok/s/user':>11} {'GB/s':>8} {'TFLOP/s':>9} {'roof ms':>10} "
              f"{'%roof':>7} {'bound':>8}")
        for r in runs:
            s = r["summary"]
            print(f"{r['mode']:<8} {r['num_seqs']:>6} {s['tokens_per_step']:>8.0f} "
                  f"{s['context_first']:>8.0f} {'real' if r['context_length'] else '-':>5} "
                  f"{1e3 * s['median_step_s']:>10.3f} "
                  f"{s['tokens_per_s']:>10.1f} {s['tokens_per_s_per_user']:>11.2f} "
                  f"{s['achieved_gbs']:>8.2f} {s['achieved_tflops']:>9.4f} "
                  f"{1e3 * s['roofline_step_s']:>10.3f} {100 * s['roofline_fraction']:>6.1f}% "
                  f"{s['bound']:>8}")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"wrote {a.json_out}", file=sys.stderr)


if __name__ == "__main__":
    main()
