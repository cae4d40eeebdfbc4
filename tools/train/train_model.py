#!/usr/bin/env python3
"""Step 3: train a tiny DeepSeek-V4 with transformers' own DeepseekV4ForCausalLM.

The checkpoint is in the reference format by construction (save_pretrained of the reference
model class). Every part of the architecture is exercised: sliding, CSA (compressor + lightning
indexer with a real top-k) and HCA layers, hash-routed and top-k-routed MoE with 16 experts
and a shared expert, mHC with 4 streams (Sinkhorn), attention sinks, grouped low-rank output
projection, partial interleaved RoPE with separate main/compress bases.

Training details beyond plain next-token loss, both as DeepSeek describes them:
  * hash layers: `tid2eid` is a seeded random table (k distinct experts per token id), saved;
  * top-k layers: aux-loss-free balancing, `e_score_correction_bias += gamma * sign(mean - load)`
    after each step (a buffer, saved);
  * the lightning indexer (whose top-k has no gradient) is trained with a KL loss towards the
    main attention's distribution over the selected compressed entries (summed over heads),
    on detached inputs, as in DeepSeek-V3.2's sparse stage.
Runs the forward without a cache (the compressors work single-shot over the whole sequence),
eager attention, bf16 autocast over fp32 master weights, AdamW, cosine schedule. The validation
split picks the checkpoint (early stopping); the held-out split is never looked at here.

usage: train_model.py --corpus work/corpus --tokenizer work/tokenizer --out DIR [--steps N] ...
"""
import argparse
import bisect
import json
import math
import os
import re
import shutil
import time

import numpy as np
import torch
import torch.nn.functional as F
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

from common import BOS_ID, EOS_ID, PAD_ID, encode, load_tokenizer, read_docs, windowed_nll, write_json

LAYER_TYPES = [
    "sliding_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "sliding_attention",
]
MLP_TYPES = ["hash_moe", "hash_moe", "moe", "moe", "moe", "moe"]


def model_kwargs(vocab_size):
    return dict(
        vocab_size=vocab_size,
        hidden_size=256,
        num_hidden_layers=len(LAYER_TYPES),
        layer_types=LAYER_TYPES,
        mlp_layer_types=MLP_TYPES,
        num_attention_heads=8,
        num_key_value_heads=1,
        head_dim=64,
        partial_rotary_factor=0.5,  # 32 rope dims (the trailing half of each head)
        q_lora_rank=128,
        o_groups=4,
        o_lora_rank=64,
        moe_intermediate_size=192,
        n_routed_experts=16,
        num_experts_per_tok=4,
        n_shared_experts=1,
        scoring_func="sqrtsoftplus",
        norm_topk_prob=True,
        routed_scaling_factor=1.5,
        swiglu_limit=10.0,
        sliding_window=64,
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        index_n_heads=4,
        index_head_dim=32,
        index_topk=32,  # < the 128 CSA entries of a 512-token window
        hc_mult=4,
        hc_sinkhorn_iters=20,
        hc_eps=1e-6,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        max_position_embeddings=4096,
        num_nextn_predict_layers=0,
        bos_token_id=BOS_ID,
        eos_token_id=EOS_ID,
        pad_token_id=PAD_ID,
        tie_word_embeddings=False,
        initializer_range=0.02,
        attention_dropout=0.0,
        use_cache=True,
    )


def build_stream(tok, docs):
    """[BOS] doc [EOS] [BOS] doc [EOS] ... and the stream positions where a paragraph starts
    (a document start points at its BOS)."""
    encs = tok.encode_batch(docs, add_special_tokens=False)
    stream, starts = [], []
    for doc, enc in zip(docs, encs):
        base = len(stream)
        starts.append(base)
        offsets = [o[0] for o in enc.offsets]
        for m in re.finditer("\n", doc):
            j = bisect.bisect_left(offsets, m.end())
            if j < len(offsets):
                starts.append(base + 1 + j)
        stream.append(BOS_ID)
        stream.extend(enc.ids)
        stream.append(EOS_ID)
    return np.asarray(stream, dtype=np.int64), np.asarray(sorted(set(starts)), dtype=np.int64)


def make_batch(stream, starts, rng, batch, seq):
    s = rng.choice(starts, size=batch)
    ar = np.arange(seq)
    plain = stream[s[:, None] + ar]
    with_bos = np.concatenate([np.full((batch, 1), BOS_ID), stream[s[:, None] + ar[:-1]]], axis=1)
    return np.where((stream[s] == BOS_ID)[:, None], plain, with_bos)


def fill_tid2eid(model, cfg, seed):
    """Hash routing table: for every token id, k distinct experts, drawn per layer."""
    n = 0
    for name, mod in model.named_modules():
        if type(mod).__name__ == "DeepseekV4HashRouter":
            layer = int(re.search(r"layers\.(\d+)\.", name).group(1))
            g = torch.Generator().manual_seed(seed * 1000 + layer)
            table = torch.rand(cfg.vocab_size, cfg.n_routed_experts, generator=g).argsort(dim=1)
            with torch.no_grad():
                mod.tid2eid.copy_(table[:, : cfg.num_experts_per_tok].to(mod.tid2eid.dtype))
            assert all(len(set(r.tolist())) == cfg.num_experts_per_tok for r in mod.tid2eid[:64])
            n += 1
    return n


def set_impl(model, experts):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:
        model.config._attn_implementation = "eager"
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(experts)
    else:
        model.config._experts_implementation = experts


class Trainer:
    def __init__(self, args, model, cfg, device):
        self.args, self.model, self.cfg, self.device = args, model, cfg, device
        self.training_step = False
        # aux-loss-free balancing: per-router expert loads of the current step
        self.routers = [m for m in model.modules() if type(m).__name__ == "DeepseekV4TopKRouter"]
        self.loads = {m: torch.zeros(cfg.n_routed_experts, device=device) for m in self.routers}
        for r in self.routers:
            r.register_forward_hook(self._router_hook)
        # indexer KL loss: capture the main attention probabilities and the indexer scores
        self.captured = {}
        self.checked_selection = False
        self.csa_layers = [i for i, t in enumerate(cfg.layer_types) if t == "compressed_sparse_attention"]
        for i in self.csa_layers:
            attn = model.model.layers[i].self_attn
            attn.register_forward_hook(lambda m, a, out, i=i: self._capture(("attn", i), out[1]))
            attn.compressor.indexer.scorer.register_forward_hook(
                lambda m, a, out, i=i: self._capture(("score", i), out)
            )
            attn.compressor.indexer.register_forward_pre_hook(self._detach_indexer_inputs)
        # dropout (training only; the saved model has none): on the embeddings and on every
        # attention / MoE block output before it is mixed into the residual streams
        if args.dropout > 0:
            model.model.embed_tokens.register_forward_hook(self._drop_tensor)
            for layer in model.model.layers:
                layer.self_attn.register_forward_hook(self._drop_first)
                layer.mlp.register_forward_hook(self._drop_tensor)

    def _drop_tensor(self, mod, args, out):
        if mod.training:
            return F.dropout(out, self.args.dropout, training=True)
        return None

    def _drop_first(self, mod, args, out):
        if mod.training:
            return (F.dropout(out[0], self.args.dropout, training=True), *out[1:])
        return None

    @staticmethod
    def _detach_indexer_inputs(mod, args):
        hidden, q_residual, *rest = args
        return (hidden.detach(), q_residual.detach(), *rest)

    def _router_hook(self, mod, inputs, out):
        if self.training_step:
            with torch.no_grad():
                self.loads[mod] += torch.bincount(out[2].reshape(-1), minlength=self.cfg.n_routed_experts).float()

    def _capture(self, key, value):
        if self.training_step and self.args.indexer_loss > 0:
            self.captured[key] = value

    def indexer_loss(self):
        losses = []
        for i in self.csa_layers:
            attn = self.captured.pop(("attn", i), None)
            score = self.captured.pop(("score", i), None)
            if attn is None or score is None:
                raise RuntimeError(f"indexer loss: layer {i} did not report attention weights / index scores")
            T = score.shape[-1]
            a = attn[..., -T:].detach().float().sum(dim=1)  # [B, S, T] over the compressed entries
            sel = a > 0  # entries the indexer selected (and causally visible)
            rows = sel.any(dim=-1)
            if not self.checked_selection:
                n_sel = int(sel.sum(dim=-1).max())
                print(f"indexer check (layer {i}): {T} compressed entries, at most {n_sel} selected per query "
                      f"(index_topk {self.cfg.index_topk})")
                if n_sel > self.cfg.index_topk:
                    raise RuntimeError("more compressed entries attended than index_topk: block mask not applied")
                self.checked_selection = True
            if not bool(rows.any()):
                continue
            p = a / a.sum(dim=-1, keepdim=True).clamp_min(1e-30)
            s = torch.where(sel, score.float(), torch.full_like(score, -1e9, dtype=torch.float32))
            logq = F.log_softmax(s, dim=-1)
            kl = (torch.xlogy(p, p) - p * logq).sum(dim=-1)
            losses.append(kl[rows].mean())
        self.captured.clear()
        return torch.stack(losses).mean() if losses else torch.zeros((), device=self.device)

    @torch.no_grad()
    def update_biases(self):
        g = self.args.bias_update
        for r in self.routers:
            load = self.loads[r]
            if g > 0 and load.sum() > 0:
                r.e_score_correction_bias += g * torch.sign(load.mean() - load)
            load.zero_()

    def balance_stats(self):
        """max/mean expert load over the top-k layers for the last step (1.0 = perfect)."""
        out = []
        for r in self.routers:
            l = self.loads[r]
            out.append(float(l.max() / l.mean().clamp_min(1e-9)))
        return out


def lr_at(step, args):
    if step <= args.warmup:
        return args.lr * step / args.warmup
    t = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def bench_experts(model, batch_fn, candidates, trainer):
    """Time forward+backward of each experts implementation (no optimizer step)."""
    times = {}
    for impl in candidates:
        try:
            set_impl(model, impl)
            for i in range(5):
                if i == 2:
                    torch.cuda.synchronize()
                    t0 = time.time()
                x = batch_fn()
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(input_ids=x, labels=x, use_cache=False).loss
                loss.backward()
                model.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times[impl] = (time.time() - t0) / 3
        except Exception as e:  # noqa: BLE001 - report and fall back
            times[impl] = f"failed: {type(e).__name__}: {str(e)[:200]}"
            model.zero_grad(set_to_none=True)
    trainer.captured.clear()
    ok = {k: v for k, v in times.items() if isinstance(v, float)}
    return min(ok, key=ok.get), times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="directory from prepare_corpus.py")
    ap.add_argument("--tokenizer", required=True, help="directory from train_tokenizer.py")
    ap.add_argument("--out", required=True, help="model directory to write")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--indexer-loss", type=float, default=0.1, help="weight of the indexer KL loss (0: off)")
    ap.add_argument("--bias-update", type=float, default=1e-3, help="aux-loss-free bias step (0: off)")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="training-only dropout on embeddings and attention / MoE block outputs")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--experts-impl", default="eager", help="eager | grouped_mm | auto (time both, keep the faster)")
    ap.add_argument("--time-limit-min", type=float, default=11.0, help="stop early past this many minutes")
    args = ap.parse_args()

    t_start = time.time()
    device = torch.device("cuda")
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    tok = load_tokenizer(os.path.join(args.tokenizer, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    stream, starts = build_stream(tok, read_docs(os.path.join(args.corpus, "train.txt")))
    starts = starts[starts + args.seq <= len(stream)]
    with open(os.path.join(args.corpus, "valid.txt"), encoding="utf-8") as f:
        valid_ids = encode(tok, f.read())
    print(f"data: train stream {len(stream)} tokens, {len(starts)} paragraph starts; valid {len(valid_ids)} tokens; "
          f"{time.time() - t_start:.1f}s")

    cfg = DeepseekV4Config(**model_kwargs(vocab))
    model = DeepseekV4ForCausalLM(cfg)
    n_hash = fill_tid2eid(model, cfg, args.seed)
    model.to(device)
    set_impl(model, "eager")
    trainer = Trainer(args, model, cfg, device)

    n_params = sum(p.numel() for p in model.parameters())
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    per_expert = n_expert / (cfg.num_hidden_layers * cfg.n_routed_experts)
    n_active = n_params - n_expert + per_expert * cfg.num_hidden_layers * cfg.num_experts_per_tok
    print(f"model: {n_params / 1e6:.2f}M parameters ({n_expert / 1e6:.2f}M in routed experts, "
          f"{n_active / 1e6:.2f}M active per token); {n_hash} hash layers")

    rng = np.random.default_rng(args.seed)

    def batch_fn():
        return torch.from_numpy(make_batch(stream, starts, rng, args.batch, args.seq)).to(device)

    impl_times = None
    impl = args.experts_impl
    if impl == "auto":
        bench_rng_state = rng.bit_generator.state
        impl, impl_times = bench_experts(model, batch_fn, ["eager", "grouped_mm"], trainer)
        rng.bit_generator.state = bench_rng_state
        print(f"experts implementation timings (s/step): {impl_times} -> {impl}")
    set_impl(model, impl)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True,
    )

    log = {"train": [], "valid": [], "balance": []}
    best = (float("inf"), 0, None)
    acc_lm, acc_idx, acc_n = 0.0, 0.0, 0
    t_train = time.time()
    stopped_early = False
    step = 0
    for step in range(1, args.steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        model.train()
        x = batch_fn()
        trainer.training_step = True
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=x, labels=x, use_cache=False)
            lm = out.loss
            idx = trainer.indexer_loss() if args.indexer_loss > 0 else torch.zeros((), device=device)
            loss = lm + args.indexer_loss * idx
        trainer.training_step = False
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % args.log_every == 0:
            log["balance"].append([step, trainer.balance_stats()])
        trainer.update_biases()
        acc_lm += float(lm.detach())
        acc_idx += float(idx.detach())
        acc_n += 1
        if step % args.log_every == 0:
            el = time.time() - t_train
            log["train"].append([step, acc_lm / acc_n, acc_idx / acc_n, round(el, 1)])
            print(f"step {step:5d} lr {lr_at(step, args):.2e} loss {acc_lm / acc_n:.4f} "
                  f"idx-kl {acc_idx / acc_n:.4f} {el / step:.3f}s/step", flush=True)
            acc_lm, acc_idx, acc_n = 0.0, 0.0, 0
        over_time = (time.time() - t_start) / 60 > args.time_limit_min
        if step % args.eval_every == 0 or step == args.steps or over_time:
            model.eval()
            nll, cnt = windowed_nll(model, valid_ids, device, ctx=args.seq, autocast_dtype=torch.bfloat16)
            vl = nll / cnt
            log["valid"].append([step, vl])
            mark = ""
            if vl < best[0]:
                best = (vl, step, {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()})
                mark = " *"
            print(f"  valid loss {vl:.4f} ppl {math.exp(vl):.2f}{mark}", flush=True)
        if over_time:
            print(f"time limit reached at step {step}")
            stopped_early = True
            break
    train_s = time.time() - t_train

    # Save the best-on-validation weights in bf16 via save_pretrained (the reference format).
    model.load_state_dict(best[2])
    model.config.use_cache = True
    model.to(torch.bfloat16)
    os.makedirs(args.out, exist_ok=True)
    model.save_pretrained(args.out, safe_serialization=True)
    gen_cfg = os.path.join(args.out, "generation_config.json")
    if os.path.exists(gen_cfg):
        os.remove(gen_cfg)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer, f), os.path.join(args.out, f))

    biases = {n: b.float().abs().max().item() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias")}
    summary = {
        "args": vars(args),
        "experts_impl": impl,
        "experts_impl_timings": impl_times,
        "params": n_params,
        "params_routed_experts": n_expert,
        "params_active_per_token": int(n_active),
        "train_tokens": int(len(stream)),
        "valid_tokens": len(valid_ids),
        "steps_run": step,
        "stopped_early": stopped_early,
        "tokens_seen": step * args.batch * args.seq,
        "epochs": step * args.batch * args.seq / len(stream),
        "train_seconds": round(train_s, 1),
        "total_seconds": round(time.time() - t_start, 1),
        "best_valid_loss": best[0],
        "best_step": best[1],
        "max_abs_e_score_correction_bias": biases,
        "log": log,
    }
    write_json(os.path.join(args.out, "train_log.json"), summary)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        tr = np.array([r[:2] for r in log["train"]])
        va = np.array(log["valid"])
        if len(tr):
            ax.plot(tr[:, 0], tr[:, 1], label="train (mean of 10 steps)", lw=1)
        if len(va):
            ax.plot(va[:, 0], va[:, 1], label="validation", lw=1.5)
        ax.axvline(best[1], color="gray", ls=":", lw=1, label=f"kept: step {best[1]}")
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy (nats/token)")
        ax.set_ylim(bottom=max(0.0, min(tr[:, 1].min() if len(tr) else 0, va[:, 1].min() if len(va) else 0) - 0.5),
                    top=min(9.5, (tr[:, 1].max() if len(tr) else 9)))
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "loss_curve.png"))
    except Exception as e:  # noqa: BLE001 - the table in the model card still has the curve
        print("loss curve PNG not written:", e)
    print(f"trained {step} steps in {train_s:.0f}s; best valid loss {best[0]:.4f} at step {best[1]}; "
          f"saved to {args.out}")


if __name__ == "__main__":
    main()
