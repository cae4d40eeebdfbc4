#include "core/env.h"

#include <cstdlib>

#include <fmt/format.h>

#include "core/status.h"

namespace deepinfer::env {

namespace {

constexpr VarSpec kVars[] = {
    {"DEEPINFER_NUM_THREADS", VarType::kInt, "0",
     "Worker threads of the CPU backend's pool; 0 uses every hardware thread."},
    {"DEEPINFER_PREFILL_ATTEMPT_INTERVAL", VarType::kInt, "70",
     "While sequences decode, attempt a prefill every this many decode steps if ALL "
     "data-parallel ranks vote for it."},
    {"DEEPINFER_PREFILL_ANY_ATTEMPT_INTERVAL", VarType::kInt, "100",
     "While sequences decode, attempt a prefill every this many decode steps if ANY "
     "data-parallel rank votes for it (bounds how long a request waits)."},
    {"DEEPINFER_DEFAULT_MODEL", VarType::kString, "",
     "Checkpoint directory used when no model is given (deepinfer generate, LLM()); empty "
     "means the bundled models/deepseek-v4-tiny-en."},
    {"DEEPINFER_CUDA_SYNC", VarType::kBool, "0",
     "CUDA backend: synchronise after every op so an error names the op that raised it (slow; "
     "for debugging)."},
    {"DEEPINFER_ATTENTION_PAIR_BLOCKS", VarType::kInt, "1",
     "CUDA backend: attention blocks serve two 16-head groups of a query (its key chunks staged "
     "once for 32 heads, the next one streamed in while the current one computes) when the "
     "call's one-group grid has at least this many blocks per SM; 0: always. The same bits "
     "either way. For tuning."},
    {"DEEPINFER_ATTENTION_SPLIT_KEYS", VarType::kInt, "64",
     "CUDA backend: the keys of one unit of a decode query's attention (flash decoding; "
     "rounded up to 32-key chunks): each unit is an online softmax of its own, and the units "
     "fold together in order, in one block per head group when the batch fills the device, "
     "else over several blocks and a merge kernel (the same bits either way). Chosen per "
     "sequence (a sequence's bits do not depend on its batch). For tuning."},
    {"DEEPINFER_CUDA_ATTENTION_FP16_QP", VarType::kBool, "1",
     "CUDA backend: every attention kernel takes the queries and the softmax probabilities as "
     "one fp16 operand each (hi * hi + hi * lo per product: two tensor-core MMAs instead of "
     "three; the keys and values stay split into fp16 hi + lo, about 21 bits). Every kernel "
     "drops the same product, so prefill rows stay bitwise decode rows and batches stay "
     "invariant. 0: Q and P split too (three MMAs, ~fp32 scores; prefill slower, "
     "docs/perf.md)."},
    {"DEEPINFER_MXFP4_EXPERTS", VarType::kBool, "1",
     "Keep a checkpoint's MXFP4 routed experts in MXFP4 (4.25 bits a weight) where the backend's "
     "moe_experts takes them (the CPU and CUDA backends), widening each tile as it is used: the "
     "same logits, bit for bit, as widening them once at load. 0: widen at load."},
    {"DEEPINFER_CUDA_EXPERT_CLUSTER", VarType::kInt, "2",
     "CUDA backend: the routed experts' up GEMM of prefill-sized batches (experts averaging 4 "
     "or more 128-row tiles) runs its blocks in clusters of this many (1, 2 or 4); where a "
     "cluster's row tiles are one expert's, each block loads its share of the weight tile into "
     "every block by TMA multicast, so the weights cross L2 once a cluster. 1: no clusters. "
     "The same bits either way. For tuning."},
    {"DEEPINFER_CUDA_ATTENTION_ONEPASS", VarType::kBool, "1",
     "CUDA backend: prefill-sized attention calls with fp16 Q and P "
     "(DEEPINFER_CUDA_ATTENTION_FP16_QP) run the one-pass wgmma kernel: Q resident in shared "
     "memory for its row and each key read from L2 once; 0 runs the streaming kernel (Q once "
     "per 128 keys, each key twice). The same bits either way. For comparison and debugging."},
    {"DEEPINFER_CUDA_INDEXER_FP16_Q", VarType::kBool, "1",
     "CUDA backend: the lightning indexer's wgmma kernel takes its queries as one fp16 operand "
     "(the lo * hi product dropped; DeepSeek's own indexer quantises q and k to FP8). Prefill "
     "and decode rows drop the same product (the same bits). 0: q split into fp16 hi + lo, "
     "for comparison (docs/perf.md)."},
    {"DEEPINFER_CUDA_INDEXER_FP16_K", VarType::kBool, "1",
     "CUDA backend: the lightning indexer's wgmma kernel takes its keys as one fp16 operand "
     "(the hi * lo product dropped; no lo halves made or staged, half the key bytes); with "
     "DEEPINFER_CUDA_INDEXER_FP16_Q, one plain fp16 MMA a product instead of three. Prefill "
     "and decode rows drop the same product (the same bits). 0: k split, for comparison "
     "(docs/perf.md)."},
    {"DEEPINFER_CUDA_CLUSTER_SPLIT", VarType::kBool, "1",
     "CUDA backend: a decode product whose K is split into 2-8 segments runs each output "
     "tile's segments as one thread block cluster where the grid's clusters are all resident "
     "at once (sm_90+), the first block summing the others' partials out of their shared "
     "memory; 0 sums them through a global workspace (up to 16 rows) or one after the other "
     "in each block (more rows): the same bits. For comparison and debugging."},
    {"DEEPINFER_CUDA_GRAPHS", VarType::kBool, "1",
     "CUDA backend: run each decode forward as one CUDA graph (recorded, then replayed through a "
     "kept executable graph of the same batch size and layout), removing the gaps between its "
     "~400 launches. Off with the sync guard disabled."},
    {"DEEPINFER_CUDA_PDL", VarType::kBool, "1",
     "CUDA backend: launch each kernel as a programmatic dependent of the kernel before it "
     "(Hopper's programmatic dependent launch): its blocks are scheduled while that kernel "
     "drains and wait for its writes, which hides most of the launch gap between the short "
     "kernels of a decode step. 0 launches plainly (the same results). For comparison and "
     "debugging."},
    {"DEEPINFER_CUDA_SIDE_STREAM", VarType::kBool, "1",
     "CUDA backend: run the model's side branches (an attention layer's key, compressor and "
     "indexer chain beside its query projection; the router beside the shared expert) on a "
     "second, high-priority stream, so that their short kernels overlap those products' weight "
     "streams; graphs record both. 0 runs everything on one stream (the same results). For "
     "comparison and debugging."},
    {"DEEPINFER_CUDA_HC_POST_MIX", VarType::kBool, "1",
     "CUDA backend: let a decode step's mHC expansion (hc_post, up to 8 rows) form the next "
     "site's mixing sums as it writes the streams (the mixing kernel's arithmetic in its order), "
     "one launch fewer per site, instead of the mixing kernel after it (the same bits; batch-1 "
     "decode 2% faster on the H200). 0 runs the two kernels, for A/Bs."},
    {"DEEPINFER_CUDA_BF16_PRODUCT_INPUTS", VarType::kBool, "1",
     "CUDA backend: prefill-sized activations read only by products (the mHC sites' normed "
     "inputs, the normed low-rank query, the shared expert's SwiGLU, wo_a's output) are "
     "written in bf16 by their producers, the operand the products round them to, instead of "
     "fp32 that each product casts first (the same bits). 0 writes fp32, for A/Bs."},
    {"DEEPINFER_CUDA_DOWN_COMBINE", VarType::kBool, "1",
     "CUDA backend: at batch-1 decode the routed experts' down GEMM combines their outputs into "
     "the layer's output itself (each column tile's last block, the combine kernel's sums), one "
     "launch fewer per MoE layer (the same bits; 0.4% faster on the H200). 0 runs the combine "
     "kernel after it, for A/Bs."},
    {"DEEPINFER_CUDA_WGMMA", VarType::kBool, "1",
     "CUDA backend: run the routed experts of prefill-sized batches (more than 8 rows per "
     "expert), the attention of prefill-sized calls (64 heads of 512) and the lightning "
     "indexer's scoring (prefill and decode rows) on Hopper's warpgroup MMA kernels (sm_90 "
     "only); 0 keeps the experts and the attention on their mma.sync kernels (the same bits) "
     "and scores the indexer on fp32 FMAs (the same values up to fp32 rounding). For "
     "comparison and debugging."},
    {"DEEPINFER_DENSE_RESIDENT_A", VarType::kInt, "4096",
     "CUDA backend: a decode product of up to 16 rows reads fp32 x itself (each block keeps "
     "its rows of x over its K segment as bf16 in shared memory: no cast kernel) while those "
     "are at most this many values (at most 8192; 0: always through the cast). The same bits "
     "either way. For tuning."},
    {"DEEPINFER_DENSE_SPLIT_TARGET", VarType::kInt, "792",
     "CUDA backend: a decode-sized bf16 product whose one-row grid has fewer blocks than this "
     "splits K into segments (summed in a fixed order, so rows stay batch invariant) to fill "
     "about this many; 0 never splits. For tuning on other GPUs (792 = one wave of one-row "
     "blocks on a 132-SM H200)."},
    {"DEEPINFER_INDEXER_CHUNK_ROWS", VarType::kInt, "1024",
     "Model: query rows per lightning-indexer call of a long CSA prefill segment (at least 1), "
     "fewer where a call's [rows, entries] fp32 scores would pass 256 MiB (256 rows at 1M tokens "
     "of context). Each call scores its rows against the entries its last row may see, then "
     "takes their top-k; every row's picks are the same at any size. Larger calls fill the "
     "GPU's waves better and launch less, for more score memory. For tuning."},
    {"DEEPINFER_DISABLE_SYNC_GUARD", VarType::kBool, "0",
     "CUDA backend: allow host-device synchronisation inside a model forward. By default anything "
     "that would make the host wait for the GPU there (a download, a host-side plan) is a loud "
     "error, because it stalls the launch pipeline and breaks graph capture. For debugging."},
    {"DEEPINFER_ZERO_OVERHEAD_SCHEDULING", VarType::kBool, "1",
     "Engine: plan and queue step N+1 while the device runs step N. Sampled tokens stay on the "
     "device, where the next forward reads them; each step returns the outputs of the step "
     "before it. 0 waits for every step's tokens before planning the next."},
    {"DEEPINFER_CPU_TIMER", VarType::kBool, "0",
     "Time named host sections (engine: schedule, prepare inputs, forward, sample, output "
     "processing; model: forward, attention and MoE blocks; CUDA backend: every op's host side, "
     "and the allocator's cudaMalloc on a cache miss and its release of cached blocks, which "
     "waits for the device) and print a table at exit, largest total first. deepinfer bench "
     "clears it after each run's warm-up."},
};

const char* type_name(VarType t) {
  switch (t) {
    case VarType::kBool:
      return "bool";
    case VarType::kInt:
      return "int";
    case VarType::kString:
      return "string";
  }
  return "?";
}

std::string raw_value(const VarSpec& s) {
  const char* v = std::getenv(std::string(s.name).c_str());
  return v ? std::string(v) : std::string(s.default_value);
}

}  // namespace

std::span<const VarSpec> registry() {
  return kVars;
}

const VarSpec& spec(std::string_view name) {
  for (const auto& v : kVars)
    if (v.name == name) return v;
  fail(ErrorCode::kInternal, "environment variable {} is not declared in the env registry", name);
}

bool get_bool(std::string_view name) {
  const auto& s = spec(name);
  DI_ASSERT(s.type == VarType::kBool);
  const std::string v = raw_value(s);
  if (v == "1" || v == "true" || v == "TRUE" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "FALSE" || v == "off" || v == "no" || v.empty())
    return false;
  fail(ErrorCode::kInvalidArgument, "{}={} is not a boolean (use 1/0, true/false, on/off)", name,
       v);
}

int64_t get_int(std::string_view name) {
  const auto& s = spec(name);
  DI_ASSERT(s.type == VarType::kInt);
  const std::string v = raw_value(s);
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  DI_CHECK(!v.empty() && end && *end == '\0', ErrorCode::kInvalidArgument,
           "{}={} is not an integer", name, v);
  return x;
}

std::string get_string(std::string_view name) {
  const auto& s = spec(name);
  DI_ASSERT(s.type == VarType::kString);
  return raw_value(s);
}

std::string markdown() {
  std::string out =
      "# Environment variables\n\n"
      "Every `DEEPINFER_*` variable deepinfer reads. This file is generated from the registry in\n"
      "`src/core/env.cpp` by `deepinfer env --markdown`; a test keeps the two in step.\n\n"
      "| Variable | Type | Default | Meaning |\n| --- | --- | --- | --- |\n";
  for (const auto& v : kVars)
    out += fmt::format("| `{}` | {} | `{}` | {} |\n", v.name, type_name(v.type), v.default_value,
                       v.doc);
  return out;
}

}  // namespace deepinfer::env
