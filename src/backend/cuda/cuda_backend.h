// The CUDA backend (Hopper sm_90a first): every op of backend.h on one device. Weight matrices
// are bf16 (weight_dtype()), GEMMs run through cuBLAS with fp32 accumulation and fp32 outputs,
// everything else is fp32 / int32 on the device.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "backend/backend.h"
#include "backend/cuda/graph_cache.h"

namespace deepinfer {

// Throws deepinfer::Error when the device cannot be used (no driver, no GPU, bad index).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

// The main stream of a CUDA backend, which every op runs on or (a side branch's) joins back
// into: work queued there outside a side branch is ordered after the ops; null when `backend`
// is not a CUDA backend.
cudaStream_t cuda_stream(Backend& backend);
// Side branches (Backend::begin_side) on a second stream, or every op on the main one
// (DEEPINFER_CUDA_SIDE_STREAM sets the default; the same results either way): for tests and
// benchmarks.
void set_cuda_side_stream(Backend& backend, bool on);

// The decode graphs' counters of a CUDA backend (null for others), and turning its graphs on or
// off (DEEPINFER_CUDA_GRAPHS sets the default): for tests and benchmarks.
const cuda::GraphStats* cuda_graph_stats(Backend& backend);
void set_cuda_graphs(Backend& backend, bool on);
// At most this many kept executable graphs over all batch sizes (64 by default); for tests.
void set_cuda_graph_capacity(Backend& backend, size_t graphs);
// The Hopper wgmma kernels (routed experts of prefill-sized batches, the attention of
// prefill-sized calls, the indexer's fused scoring of prefill and decode rows) on or off: off,
// the experts and the attention run their mma.sync kernels (the same bits) and the indexer fp32
// FMAs (a GEMM and a reduction; per-row blocks for decode).
// DEEPINFER_CUDA_WGMMA sets the default; returns whether wgmma is now in use (never on a device
// without it). For tests and benchmarks.
bool set_cuda_wgmma(Backend& backend, bool on);
// How many attention calls so far ran on the Hopper wgmma kernel (0 off CUDA). For tests.
int64_t cuda_wgmma_attention_calls(const Backend& backend);
// How many hc_pre_norm calls so far ran as one fused kernel (0 off CUDA). For tests.
int64_t cuda_fused_hc_pre_norm_calls(const Backend& backend);
// attention_batch_raw_q calls whose attention kernel normalised the queries (0 off CUDA).
int64_t cuda_fused_q_norm_attention_calls(const Backend& backend);
// hc_post_pre_norm calls whose expansion formed the next site's mixing sums (0 off CUDA), and
// the switch that allows it (returns the previous setting; false off CUDA). For tests.
int64_t cuda_hc_post_mix_calls(const Backend& backend);
bool set_cuda_hc_post_mix(Backend& backend, bool on);
// moe_experts calls whose down GEMM combined the experts' outputs (0 off CUDA), and the switch
// that allows it (returns the previous setting; false off CUDA). For tests.
int64_t cuda_down_combines(const Backend& backend);
bool set_cuda_down_combine(Backend& backend, bool on);
// The routed experts' up GEMM's cluster size (DEEPINFER_CUDA_EXPERT_CLUSTER: 1, 2 or 4; an
// invalid size throws); returns the previous one (0 off CUDA). For tests and benchmarks.
int set_cuda_expert_cluster(Backend& backend, int blocks);
// Whether product_input_dtype may answer bf16 (DEEPINFER_CUDA_BF16_PRODUCT_INPUTS); returns the
// previous setting (false off CUDA). For tests.
bool set_cuda_bf16_product_inputs(Backend& backend, bool on);

}  // namespace deepinfer
