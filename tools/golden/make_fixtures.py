#!/usr/bin/env python3
"""Builds tiny random DeepSeek-V4 checkpoints and reference logits with transformers.

Runs on a machine whose python3 has torch + transformers (deepseek_v4). Each fixture directory gets:
  config.json, model.safetensors       (bf16, written by save_pretrained, config possibly rewritten
                                         to legacy keys / default schedules, then reloaded to check)
  fixture.json                          input ids, greedy continuation, reference stats
  logits_prefill.npy                    fp32 [S, vocab], whole prompt in one forward
  logits_decode.npy                     fp32 [S, vocab], token by token through the reference cache
Reference math is fp32 (on the CPU) from the bf16 weights.

usage: make_fixtures.py OUT_DIR
"""
import json
import math
import os
import sys

import numpy as np
import torch
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

torch.backends.cuda.matmul.allow_tf32 = False

BASE = dict(
    vocab_size=512,
    hidden_size=64,
    moe_intermediate_size=32,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=32,
    q_lora_rank=32,
    o_groups=2,
    o_lora_rank=16,
    n_routed_experts=8,
    num_experts_per_tok=2,
    n_shared_experts=1,
    routed_scaling_factor=1.5,
    swiglu_limit=4.0,
    sliding_window=16,
    index_n_heads=8,
    index_head_dim=16,
    index_topk=6,
    rms_norm_eps=1e-6,
    hc_eps=1e-6,
    bos_token_id=0,
    eos_token_id=1,
    max_position_embeddings=4096,
    num_nextn_predict_layers=0,
)

FIXTURES = {
    # every layer type, explicit schedules, hc 4, sqrtsoftplus, HCA rate 16 (5 windows in 80 tokens)
    "tiny-a": dict(
        config=dict(
            num_hidden_layers=4,
            layer_types=[
                "sliding_attention",
                "compressed_sparse_attention",
                "heavily_compressed_attention",
                "compressed_sparse_attention",
            ],
            mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
            hc_mult=4,
            hc_sinkhorn_iters=20,
            scoring_func="sqrtsoftplus",
            partial_rotary_factor=0.5,
            rope_theta=10000.0,
            compress_rope_theta=160000.0,
        ),
        legacy=None,
        seq_len=80,
        seed=1,
    ),
    # hc 2, sigmoid routing, config.json rewritten to the legacy keys
    "tiny-b": dict(
        config=dict(
            num_hidden_layers=4,
            layer_types=[
                "compressed_sparse_attention",
                "heavily_compressed_attention",
                "sliding_attention",
                "compressed_sparse_attention",
            ],
            mlp_layer_types=["hash_moe", "moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
            hc_mult=2,
            hc_sinkhorn_iters=3,
            scoring_func="sigmoid",
            partial_rotary_factor=0.25,
            rope_theta=10000.0,
            compress_rope_theta=40000.0,
            sliding_window=12,
            index_topk=5,
        ),
        legacy=dict(
            compress_ratios=[4, 128, 0, 4],
            compress_rate_csa=4,
            compress_rate_hca=8,
            num_hash_layers=1,
            qk_rope_head_dim=8,
        ),
        seq_len=72,
        seed=2,
    ),
    # the largest: default schedules (no layer_types in config.json), default rates 4/128,
    # YaRN on the compress rope, 520 tokens = 4 closed HCA windows
    "tiny-c": dict(
        config=dict(
            num_hidden_layers=4,
            hidden_size=128,
            num_attention_heads=8,
            head_dim=64,
            q_lora_rank=64,
            o_groups=4,
            o_lora_rank=32,
            moe_intermediate_size=64,
            n_routed_experts=16,
            num_experts_per_tok=4,
            hc_mult=4,
            hc_sinkhorn_iters=20,
            scoring_func="sqrtsoftplus",
            partial_rotary_factor=0.25,
            rope_theta=10000.0,
            compress_rope_theta=160000.0,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 16.0,
                "original_max_position_embeddings": 256,
                "beta_fast": 32,
                "beta_slow": 1,
            },
            sliding_window=32,
            index_topk=16,
            max_position_embeddings=4096,
        ),
        legacy="defaults",
        seq_len=520,
        seed=3,
    ),
}


def randomize(model, cfg, gen):
    def randn(shape, std):
        return torch.randn(shape, generator=gen) * std

    for name, p in model.named_parameters():
        shape = p.shape
        if name.endswith("embed_tokens.weight"):
            v = randn(shape, 1.0)
        elif name.endswith("sinks"):
            v = randn(shape, 1.0)
        elif name.endswith("position_bias"):
            v = randn(shape, 0.7)
        elif name.endswith(".fn") or name.endswith("hc_fn"):
            v = randn(shape, 1.0 / math.sqrt(shape[1]))
        elif name.endswith(".base") or name.endswith("hc_base"):
            v = randn(shape, 0.5)
        elif name.endswith(".scale") or name.endswith("hc_scale"):
            v = 0.5 + torch.rand(shape, generator=gen)
        elif p.dim() == 1:  # norm weights
            v = 1.0 + randn(shape, 0.1)
        elif p.dim() == 3:  # experts [E, out, in]
            v = randn(shape, 1.0 / math.sqrt(shape[2]))
        else:  # linear [out, in]
            v = randn(shape, 1.0 / math.sqrt(shape[1]))
        with torch.no_grad():
            p.copy_(v)
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            with torch.no_grad():
                b.copy_(randn(b.shape, 0.3))
        elif name.endswith("tid2eid"):
            E, k = cfg.n_routed_experts, cfg.num_experts_per_tok
            rows = [torch.randperm(E, generator=gen)[:k] for _ in range(b.shape[0])]
            with torch.no_grad():
                b.copy_(torch.stack(rows))


def rewrite_config(path, legacy):
    with open(path) as f:
        cfg = json.load(f)
    if legacy == "defaults":
        cfg.pop("layer_types", None)
        cfg.pop("mlp_layer_types", None)
    elif legacy:
        cfg.pop("layer_types", None)
        cfg.pop("mlp_layer_types", None)
        cfg.pop("compress_rates", None)
        cfg.pop("partial_rotary_factor", None)
        rp = cfg.get("rope_parameters")
        if isinstance(rp, dict):  # let the config rebuild them from the legacy keys
            cfg.pop("rope_parameters")
        cfg.update(legacy)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


@torch.no_grad()
def reference_logits(model, ids):
    full = model(input_ids=ids[None], use_cache=True).logits[0].float()
    out = model(input_ids=ids[None, :1], use_cache=True)
    cache = out.past_key_values
    steps = [out.logits[0, -1].float()]
    for t in range(1, ids.numel()):
        out = model(input_ids=ids[None, t : t + 1], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        steps.append(out.logits[0, -1].float())
    return full, torch.stack(steps)


@torch.no_grad()
def greedy(model, ids, n):
    out = model(input_ids=ids[None], use_cache=True)
    cache, toks = out.past_key_values, []
    nxt = int(out.logits[0, -1].argmax())
    for _ in range(n):
        toks.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        nxt = int(out.logits[0, -1].argmax())
    return toks


def build(name, spec, out_root):
    gen = torch.Generator().manual_seed(spec["seed"])
    kw = dict(BASE)
    kw.update(spec["config"])
    cfg = DeepseekV4Config(**kw)
    model = DeepseekV4ForCausalLM(cfg).float().eval()
    randomize(model, cfg, gen)
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)
    rewrite_config(os.path.join(out_dir, "config.json"), spec["legacy"])
    for junk in ("generation_config.json",):
        if os.path.exists(os.path.join(out_dir, junk)):
            os.remove(os.path.join(out_dir, junk))

    ref = DeepseekV4ForCausalLM.from_pretrained(out_dir, dtype=torch.float32).eval()
    ref.config._attn_implementation = "eager"
    # the reload must reproduce the model we built (legacy keys / default schedules included)
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), ref.state_dict().items()):
        assert n1 == n2 and torch.equal(p1.float(), p2.float()), f"reload mismatch at {n1}"
    assert ref.config.layer_types == cfg.layer_types, (ref.config.layer_types, cfg.layer_types)
    assert ref.config.mlp_layer_types == cfg.mlp_layer_types

    ids = torch.randint(2, cfg.vocab_size, (spec["seq_len"],), generator=gen)
    full, steps = reference_logits(ref, ids)
    cont = greedy(ref, ids[:48], 16)
    top2 = full.topk(2, dim=-1).values
    np.save(os.path.join(out_dir, "logits_prefill.npy"), full.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, "logits_decode.npy"), steps.numpy().astype(np.float32))
    rel = float((full - steps).norm() / full.norm())
    meta = dict(
        input_ids=ids.tolist(),
        greedy_prompt_len=48,
        greedy_continuation=cont,
        logits_std=float(full.std()),
        ref_prefill_vs_decode_rel_l2=rel,
        min_top2_margin=float((top2[:, 0] - top2[:, 1]).min()),
        layer_types=ref.config.layer_types,
        mlp_layer_types=ref.config.mlp_layer_types,
        cache_layers=[type(l).__name__ for l in ref(input_ids=ids[None, :4], use_cache=True).past_key_values.layers],
    )
    with open(os.path.join(out_dir, "fixture.json"), "w") as f:
        json.dump(meta, f)
    from safetensors import safe_open

    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        names = sorted(f.keys())
    print(f"{name}: logits std {meta['logits_std']:.3f}, prefill-vs-decode rel {rel:.2e}, "
          f"{len(names)} tensors, cache {meta['cache_layers']}")
    return names


def main():
    out_root = sys.argv[1]
    torch.manual_seed(0)
    for name, spec in FIXTURES.items():
        names = build(name, spec, out_root)
        if name == "tiny-a":
            print("\n".join(names))


if __name__ == "__main__":
    main()
