// Launchers of the CUDA backend's kernels: plain C++17 (no deepinfer headers), raw device
// pointers and sizes, so that the .cu files compile under nvcc's C++17 while the Backend class
// (C++20) lives in .cpp files. Every launcher enqueues on `stream` and returns the launch status
// (cudaGetLastError); it never synchronises. bf16 data is passed as uint16_t bits.
//
// Kernels never trust index inputs: an out-of-range id / expert / entry is skipped (or written
// as NaN / -1) and its op code is recorded in `err` (first one wins, see kErr*), which the
// backend reads at its next synchronisation and turns into an error naming the op.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::cuda {

// Codes written into the device error word.
enum : int32_t {
  kErrNone = 0,
  kErrEmbeddingId = 1,     // embedding: an id outside the table
  kErrAttentionIdx = 2,    // attention: comp_idx >= E
  kErrAttentionVis = 3,    // attention: comp_visible outside [0, E]
  kErrIndexerVisible = 4,  // indexer_scores: visible outside [0, E]
  kErrRouteId = 5,         // route: ids outside tid2eid
  kErrRouteExpert = 6,     // route: tid2eid entry outside [0, E)
  kErrMoeExpert = 7,       // moe_experts: idx entry outside [0, E)
};

// 16-byte aligned (what vector loads and cp.async of a tensor's rows need).
inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Kernels launch as programmatic dependents of the kernel before them in their stream
// (launch.cuh; default on); off launches them plainly. For the whole process: the backend sets
// it from DEEPINFER_CUDA_PDL.
void set_programmatic_launch(bool on);
// Launches from now on at the device's highest priority (a side branch's kernels), or without a
// priority of their own.
void set_launch_priority(bool high);

// ---- dense / elementwise (kernels_dense.cu) ----------------------------------------------------
// One copy of copy_batch: `bytes` bytes from src to dst (device addresses).
struct CopyDesc {
  const void* src;
  void* dst;
  int64_t bytes;
};
// Runs n copies described in device memory (descs), in no particular order.
cudaError_t launch_copy_batch(const CopyDesc* descs, int64_t n, cudaStream_t stream);
// dst [M, width bytes] (packed) = the first `width` bytes of each src row (pitch src_pitch). A
// kernel rather than cudaMemcpy2DAsync: a graph can update a kernel's arguments, not a 2D copy.
cudaError_t launch_copy_rows(const void* src, int64_t src_pitch, void* dst, int64_t M,
                             int64_t width, cudaStream_t stream);
cudaError_t launch_f32_to_bf16(const float* in, uint16_t* out, int64_t n, cudaStream_t stream);
// The exact fp32 values of n bf16 ones.
cudaError_t launch_bf16_to_f32(const uint16_t* in, float* out, int64_t n, cudaStream_t stream);
// out[m] = table[ids[m]] as fp32; table_bf16 selects the table dtype. D columns.
cudaError_t launch_embedding(const int32_t* ids, int64_t M, const void* table, bool table_bf16,
                             int64_t V, int64_t D, float* out, int32_t* err, cudaStream_t stream);
cudaError_t launch_add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// Rows of D: out = x * rsqrt(mean(x^2) + eps) [* weight]; out may equal x. Exactly one of out
// (fp32) and out_bf16 (the same values rounded to bf16 as launch_f32_to_bf16 rounds them).
cudaError_t launch_rms_norm(const float* x, const float* weight, float eps, int64_t rows, int64_t D,
                            float* out, uint16_t* out_bf16, cudaStream_t stream);
// launch_rms_norm of x [M * H rows of hd] into out, then launch_rope on out, in one pass
// where rms_norm_rope_fused (the same bits as the two in turn).
bool rms_norm_rope_fused(const float* x, const float* weight, int64_t hd, int64_t R,
                         const float* out);
cudaError_t launch_rms_norm_rope(const float* x, const float* weight, float eps, int64_t M,
                                 int64_t H, int64_t hd, const int32_t* positions,
                                 const float* inv_freq, int64_t R, float* out, cudaStream_t stream);
cudaError_t launch_rope(float* x, int64_t M, int64_t H, int64_t hd, const int32_t* positions,
                        const float* inv_freq, int64_t R, bool inverse, cudaStream_t stream);
// out = silu(min(g, limit)) * clamp(u, +-limit) (limit <= 0: no clamp); fp32 or bf16 output.
cudaError_t launch_swiglu(const float* gate, const float* up, float limit, int64_t n, float* out,
                          uint16_t* out_bf16, cudaStream_t stream);

// ---- random fill (kernels_fill.cu) -------------------------------------------------------------
// Backend::fill_random's FP4E2M1 fill: n bytes, byte j the top byte of element j's hash.
cudaError_t launch_fill_random_bytes(uint8_t* out, int64_t n, uint64_t seed, cudaStream_t stream);
// Backend::fill_random over n elements (fp32, or bf16 bits when bf16) at `out`.
cudaError_t launch_fill_random(void* out, bool bf16, int64_t n, uint64_t seed, float lo, float hi,
                               cudaStream_t stream);

// ---- mHC (kernels_hc.cu) -----------------------------------------------------------------------
inline constexpr int kMaxHc = 16;
// Scratch floats hc_pre / hc_head need for M rows of hc x D with nmix mixes (chunk partials).
int64_t hc_partial_floats(int64_t M, int64_t hc, int64_t D, int64_t nmix);
cudaError_t launch_hc_pre(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                          const float* base, const float* scale, int iters, float hc_eps,
                          float norm_eps, float* collapsed, float* post, float* comb,
                          float* partial, int sms, cudaStream_t stream);
// hc_pre, then rms_norm(collapsed, norm_w (null: unweighted), norm_eps) into normed, in one
// launch after the mixing pass: the same bits as launch_hc_pre then launch_rms_norm. Where
// hc_pre_norm_fused() holds (V4's 4 streams of up to 4096 columns; 16-byte aligned normed, norm_w).
// normed: fp32 rows, or NormedOut::bf16 ones (rounded as launch_f32_to_bf16 rounds them: a
// product's operand made here instead of by a cast).
struct NormedOut {
  float* f32 = nullptr;
  uint16_t* bf16 = nullptr;
  const void* ptr() const { return f32 ? static_cast<const void*>(f32) : bf16; }
};
bool hc_pre_norm_fused(int64_t hc, int64_t D, const float* norm_w, const void* normed);
cudaError_t launch_hc_pre_norm(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                               const float* base, const float* scale, int iters, float hc_eps,
                               float norm_eps, const float* norm_w, NormedOut normed, float* post,
                               float* comb, float* partial, int sms, cudaStream_t stream);
cudaError_t launch_hc_post(const float* X, const float* y, const float* post, const float* comb,
                           int64_t M, int64_t hc, int64_t D, float* out, cudaStream_t stream);
// launch_hc_post into out, then launch_hc_pre_norm of out, with the mixing pass folded into the
// expansion (each block forms the partials of the chunks it writes, by the mixing kernel's
// chains: the same bits) where hc_post_mix_fused() holds: decode-sized M (fn is staged per row),
// D a multiple of the 128-column chunk, hc <= 4, and hc_pre_norm_fused().
bool hc_post_mix_fused(int64_t M, int64_t hc, int64_t D, const float* norm_w, const void* normed);
cudaError_t launch_hc_post_pre_norm(const float* X, const float* y, const float* post,
                                    const float* comb, int64_t M, int64_t hc, int64_t D, float* out,
                                    const float* fn, const float* base, const float* scale,
                                    int iters, float hc_eps, float norm_eps, const float* norm_w,
                                    NormedOut normed, float* next_post, float* next_comb,
                                    float* partial, cudaStream_t stream);
cudaError_t launch_hc_head(const float* X, int64_t M, int64_t hc, int64_t D, const float* fn,
                           const float* base, const float* scale, float hc_eps, float norm_eps,
                           float* out, float* partial, int sms, cudaStream_t stream);

// ---- attention (kernels_attention.cu) ----------------------------------------------------------
// slot_bias: [S, d] added to each window's gates, or null.
cudaError_t launch_window_pool(const float* kv, const float* gate, const float* slot_bias,
                               int64_t N, int64_t S, int64_t d, float* out, cudaStream_t stream);
// One query row of an attention call (row m of q): its sequence's keys, what it sees, and its
// share of the grid. Key splits are chosen per sequence (attention_splits of that sequence's rows
// and keys alone, and folded in one order however their units are scheduled), so a row's result
// does not depend on the other sequences of the call.
struct AttnRow {
  const float* win;        // the sequence's window rows (win_kv)
  const float* comp;       // its compressed entries, or null
  const int32_t* idx;      // this row of its comp_idx, or null
  const int32_t* visible;  // &comp_visible[this row], or null
  int64_t win_end;  // window rows up to and including this query (P + its row in the sequence + 1)
  int64_t first_block;  // its blocks: [first_block, first_block + groups * unit_blocks), in order
  int64_t part_off;     // with partials: its first partial slot (sum of earlier rows' splits)
  int32_t E, K;         // entries in comp; columns of idx
  int32_t splits;       // key units of this row (attention_splits; 1: its keys in one pass)
  int32_t unit_blocks;  // blocks per head group: ceil(splits / units_per_block), or 1
  // The same keys already split into fp16 hi / lo (launch_split_keys; rows of 2 * hd halves:
  // hi then lo), or null. Used by blocks that stream their keys (two-group blocks): they load
  // the halves as they are instead of converting every chunk for every query.
  const uint16_t* win_h;
  const uint16_t* comp_h;
};
// Segments of at least this many query rows have their keys split for the kernel.
inline constexpr int64_t kSplitKeysMinRows = 64;
// dst row r = [hi(src[r]) | lo(src[r])] (fp16, half_split.cuh), for rows of hd floats (hd % 4 ==
// 0, 16-byte aligned): the halves an attention row's keys take in shared memory.
cudaError_t launch_split_keys(const float* src, int64_t rows, int64_t hd, uint16_t* dst,
                              cudaStream_t stream);
// Compacts idx of every row with one: the distinct entries >= 0 (entries >= E are flagged and
// dropped), in row order, into list [M, Kmax] with count [M] (0 for rows without idx).
// Emax: the most entries any row's comp has (sizes the first-occurrence table).
cudaError_t launch_dedup_idx(const AttnRow* rows, int64_t M, int64_t Kmax, int64_t Emax,
                             int32_t* list, int32_t* count, int32_t* err, cudaStream_t stream);
inline constexpr int64_t kMaxAttnHeadDim = 512;
inline constexpr int kAttnHeadsPerBlock = 16;
// Key units for M queries of H heads with at most max_keys keys each (flash decoding): 1 when the
// queries alone fill the device or the keys fit one unit, else ceil(max_keys /
// attention_split_keys()) units, each an online softmax of its own, folded in order.
inline constexpr int64_t kMaxAttnUnits = 1 << 20;
int attention_splits(int64_t M, int64_t H, int64_t max_keys, int num_sms);
// The keys of a unit (DEEPINFER_ATTENTION_SPLIT_KEYS, rounded up to whole 32-key chunks). Units
// are chosen per sequence; how they are scheduled (attention_unit_plan) does not change a bit.
// 64: batch-1 decode at 4k context 2.6% faster than the 128-key splits before, batch 8 as fast,
// and a row of up to 64 keys keeps the bits of the same query in a prefill call (32: batch 1
// 3.6% faster, batch 8 0.6% slower, golden tiny-c's chunked decode 2.10e-2 -> 2.62e-2).
inline constexpr int64_t kAttentionSplitKeys = 64;
void set_attention_split_keys(int64_t keys);
int64_t attention_split_keys();
// How a launch schedules its split rows' units: with a block per SM or more in one-group blocks
// (split_rows x ceil(H / 16)), each block folds all its row's units (fold: no partials, no
// merge; launch_attention then takes one-group blocks); else blocks of units_per_block
// consecutive units (about a block per SM over the `units` all split rows have) store a
// partial per unit, folded by a merge kernel after.
struct AttnUnitPlan {
  bool fold = false;
  int64_t units_per_block = 1;
};
AttnUnitPlan attention_unit_plan(int64_t split_rows, int64_t units, int64_t H, int num_sms);
// Blocks of (query, 16 x groups_per_block heads, range of key units) on tensor cores (fp16 hi/lo
// operands, fp32 accumulation), `blocks` in all (the rows' groups * unit_blocks; rows_uniform:
// every row has as many, so row m's blocks start at m * blocks / M). Query m's keys: its window
// rows, then its compressed entries: the deduplicated list (list row m, count[m]) when
// rows[m].idx is set, else the prefix comp[0, *visible), else none. workspace: (hd + 2) floats
// per partial slot (H per unit of part_off), partial_slots of them, when rows leave partials
// (split rows of a launch that does not fold).
// groups_per_block (1 or 2, attention_groups_per_block): 16-head groups one block serves, each
// row's blocks then ceil(H / (16 groups_per_block)) * unit_blocks; a head's result is the same
// either way.
int attention_groups_per_block(int64_t M, int64_t H, int num_sms);
// Pairs where a call's one-group grid (M x ceil(H / 16) blocks) has at least this many blocks per
// SM (DEEPINFER_ATTENTION_PAIR_BLOCKS; 0: always). The same bits either way.
// 1: decode batches from 33 rows on and prefill (0.5-1.2% faster decode steps at batch 64 / 128
// than 32, prefill-sized calls only; batch 1 keeps twice the blocks: docs/perf.md).
inline constexpr int64_t kAttentionPairBlocksPerSm = 1;
void set_attention_pair_blocks(int64_t per_sm);
// Whether every attention kernel takes the queries and the softmax probabilities (the A operands
// of Q K^T and P V) as one fp16 operand each: hi*hi + hi*lo per product, two MMAs instead of
// three, the keys and values still split (DEEPINFER_CUDA_ATTENTION_FP16_QP, on by default: with
// the indexer's fp16 operands 12% off a 65,536-token prefill step on an H100, the golden
// fixtures within their bound, docs/perf.md).
// All kernels drop the same product, so a row's bits stay the same in any kernel and batch.
void set_attention_fp16_qp(bool on);
bool attention_fp16_qp();
// Whether prefill-sized calls under set_attention_fp16_qp take the one-pass wgmma kernel (Q
// resident, each key read from L2 once: kernels_attention_wgmma_onepass.cu) rather than the
// streaming one (DEEPINFER_CUDA_ATTENTION_ONEPASS, on). The same bits either way.
void set_attention_onepass(bool on);
bool attention_onepass();
// Warps per quarter of the head dim in a launch's blocks (quarter_warps of launch_attention): 2
// for one-group blocks of head dims past 64 whose grid fits one wave (a block per SM, bound by its
// warps' instruction latency: decode at small batches), splitting the chunk's keys and the
// quarter's output dims between them; else 1. The same bits either way.
int attention_quarter_warps(int groups_per_block, int64_t hd, int64_t blocks, int num_sms);
// Where launch_attention writes out [M, H, hd]: fp32 `out` or bf16 `out_bf16` (exactly one; bf16
// for the product that reads it, which would round it so anyway), and with rope_pos set each
// head's trailing 2 * rope_R dims rotated back by rope_pos[m] * rope_freq[i] (rope(out, ...,
// inverse) of kernels_dense.cu, the same bits) before they are stored. bf16 and the rotation
// store pairs of dims: they need attention_stores_pairs.
struct AttnOutput {
  float* out = nullptr;
  uint16_t* out_bf16 = nullptr;
  const int32_t* rope_pos = nullptr;
  const float* rope_freq = nullptr;
  int64_t rope_R = 0;
};
// Whether the kernels store out's heads by pairs of dims: an even hd and out aligned to two
// elements (fp32, or bf16).
inline bool attention_stores_pairs(int64_t hd, const void* out, bool bf16) {
  return hd % 2 == 0 && reinterpret_cast<uintptr_t>(out) % (bf16 ? 4 : 8) == 0;
}
cudaError_t launch_attention(const float* q, int64_t M, int64_t H, int64_t hd, const AttnRow* rows,
                             int groups_per_block, int quarter_warps, int64_t blocks,
                             bool rows_uniform, const AttnUnitPlan& units, int64_t window,
                             const int32_t* list, const int32_t* count, int64_t Kmax,
                             const float* sinks, float scale, float* workspace,
                             int64_t partial_slots, const AttnOutput& out, int32_t* err,
                             cudaStream_t stream);
// launch_attention's two-group path on Hopper wgmma (kernels_attention_wgmma.cu; only where
// wgmma_available() and attention_wgmma_supported(H, hd)): the same bits, one block per row.
// Every row's keys must come split (win_h, and comp_h where it has entries), none split
// (splits == 1), out stored by pairs. Its queries come as fp16 hi / lo halves
// [M, 64, 2 * 512] (16-byte aligned) made by launch_attention_q_halves from q [M, 64, 512]
// fp32: q as it is, or, with q_eps, q before rms_norm_rope (unweighted, its last 2 R dims
// rotated at positions[m]; attention_wgmma_norms_q(R)), giving that op's values. sms: the
// device's multiprocessors (the one-pass kernel's persistent grid).
bool attention_wgmma_supported(int64_t H, int64_t hd);
bool attention_wgmma_norms_q(int64_t R);
cudaError_t launch_attention_q_halves(const float* q, int64_t M, const float* q_eps,
                                      const int32_t* positions, const float* inv_freq, int64_t R,
                                      uint16_t* halves, cudaStream_t stream);
cudaError_t launch_attention_wgmma(const uint16_t* q_halves, int64_t M, const AttnRow* rows,
                                   int64_t window, const int32_t* list, const int32_t* count,
                                   int64_t Kmax, const float* sinks, float scale,
                                   const AttnOutput& out, int32_t* err, int sms,
                                   cudaStream_t stream);
// scores[m, e] = scale * sum_h w[m, h] * relu(dots[m, h, e]) for e < visible[m], else -inf.
// dots [M, nh, E] are the per-head q . k products (a GEMM).
cudaError_t launch_indexer_reduce(const float* dots, int64_t M, int64_t nh, int64_t E,
                                  const float* w, float scale, const int32_t* visible,
                                  float* scores, int32_t* err, cudaStream_t stream);
// One scored row of indexer_scores_batch: its sequence's keys.
struct IndexerRow {
  const float* k;  // [E, d], or null when E == 0
  int64_t q_row;   // its row of q, w and visible
  int64_t E;
};
// scores[r, e] = scale * sum_h w[t, h] * relu(q[t, h] . k_r[e]) for e < min(visible[t], E_r), else
// -inf (t = rows[r].q_row), for R rows of N columns; fp32 FMAs, one block per (row, 32 entries).
// indexer_rows_smem() bytes of shared memory per block (the op refuses shapes above 200 KiB).
int64_t indexer_rows_smem(int64_t nh, int64_t d);
cudaError_t launch_indexer_rows(const float* q, int64_t nh, int64_t d, const float* w,
                                const int32_t* visible, const IndexerRow* rows, int64_t R,
                                int64_t N, float scale, float* scores, int32_t* err,
                                cudaStream_t stream);
// indexer_scores fused on Hopper wgmma (kernels_indexer_wgmma.cu; only where wgmma_available()):
// the same scores as a GEMM + launch_indexer_reduce up to fp32 rounding (fp16 hi/lo operands,
// another head-sum order), for the shapes indexer_wgmma_supported() takes; q, k and w 16-byte
// aligned. k_halves: scratch for the keys' fp16 hi and lo, 2 * E * d halves.
bool indexer_wgmma_supported(int64_t nh, int64_t d);
// Whether the wgmma indexer takes its queries / its keys as one fp16 operand each (the lo * hi /
// hi * lo product dropped; without k's, no key lo halves are made or staged; both: one plain fp16
// MMA a product instead of three): DEEPINFER_CUDA_INDEXER_FP16_Q / _K, on by default (the golden
// fixtures bitwise those of split operands; with the attention's fp16 Q and P, 12% off a
// 65,536-token prefill step on an H100: docs/perf.md). Prefill and decode rows drop the same
// products (the same bits).
void set_indexer_fp16_q(bool on);
bool indexer_fp16_q();
void set_indexer_fp16_k(bool on);
bool indexer_fp16_k();
cudaError_t launch_indexer_wgmma(const float* q, const float* k, int64_t M, int64_t nh, int64_t d,
                                 int64_t E, const float* w, float scale, const int32_t* visible,
                                 uint16_t* k_halves, float* scores, int sms, int32_t* err,
                                 cudaStream_t stream);
// indexer_scores_batch on wgmma: scores rows as launch_indexer_rows does, up to fp32 rounding
// (the wgmma kernel's arithmetic, one row per block, each splitting its rows' keys, 16-byte
// aligned, to fp16 halves as it stages them: the halves launch_indexer_wgmma's split makes).
cudaError_t launch_indexer_rows_wgmma(const float* q, int64_t M, int64_t nh, int64_t d,
                                      const float* w, const int32_t* visible,
                                      const IndexerRow* rows, int64_t R, int64_t N, float scale,
                                      float* scores, int sms, int32_t* err, cudaStream_t stream);
inline constexpr int kMaxTopk = 8192;
cudaError_t launch_topk(const float* scores, int64_t M, int64_t N, int k, int32_t* idx,
                        cudaStream_t stream);

// ---- mixture of experts (kernels_moe.cu) -------------------------------------------------------
// func: 0 softmax, 1 sigmoid, 2 sqrt(softplus). tid2eid/ids (hash routing) or bias may be null.
cudaError_t launch_route(const float* logits, int64_t M, int64_t E, int func, const float* bias,
                         const int32_t* tid2eid, int64_t V, const int32_t* ids, int k,
                         float routed_scale, float* weights, int32_t* idx, int32_t* err,
                         cudaStream_t stream);
// xg[r] = bf16(x[rows[r]]) for r < R; x [*, D].
cudaError_t launch_gather_rows_bf16(const float* x, const int32_t* rows, int64_t R, int64_t D,
                                    uint16_t* xg, cudaStream_t stream);
// act_bf16[r, i] = swiglu(h[r, i], h[r, I + i]) for h [R, 2I] (gate | up).
cudaError_t launch_swiglu_pairs(const float* h, int64_t R, int64_t I, float limit,
                                uint16_t* act_bf16, cudaStream_t stream);
// Device-side sort of the R = M * k (token, slot) pairs of idx by expert: offsets [E + 1] (rows
// of each expert), row_token [R] (token of each sorted row), where [R] (sorted row of pair i; -1
// and an error for an idx outside [0, E)) and the (expert, first row) pairs of the tile_rows-row
// tiles of every expert ([moe_max_tiles(R, E, tile_rows)][2], *num_tiles of them set). One block:
// the sort is a small part of any MoE layer.
inline constexpr int64_t kMaxPlanExperts = 4096;  // 2 x 4 B each in shared memory
int64_t moe_max_tiles(int64_t R, int64_t E, int tile_rows);
cudaError_t launch_moe_plan(const int32_t* idx, int64_t R, int k, int64_t E, int tile_rows,
                            int32_t* offsets, int32_t* row_token, int32_t* where, int32_t* tiles,
                            int32_t* num_tiles, int32_t* err, cudaStream_t stream);
// Tensor-core expert GEMMs over the plan's tiles (kernels_grouped_gemm.cu), bf16 weights:
// act [R, I] bf16 = swiglu(x[row_token] w1^T, x[row_token] w3^T) (x fp32 [*, D], D % 8 == 0);
// y [R, D] fp32 = act w2^T (I % 8 == 0). Two tile shapes with the same arithmetic per output
// (the same k order, so a row's result does not depend on the shape): moe_tile_rows(R, E) rows
// per tile, 64 for many rows per expert (prefill), 16 for few (decode: more, narrower blocks
// with deeper pipelines keep more weight bytes in flight). The plan must use the same value.
// With wgmma (wgmma_available), prefill-sized batches take kMoeWgmmaTileRows-row tiles and
// launch_moe_{up,down}_wgmma instead.
inline constexpr int kMoeWgmmaTileRows = 128;
int moe_tile_rows(int64_t R, int64_t E, bool wgmma);
cudaError_t launch_moe_up_gemm(const float* x, const int32_t* row_token, const int32_t* offsets,
                               const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                               int tile_rows, const uint16_t* w1, const uint16_t* w3, int64_t I,
                               int64_t D, float limit, uint16_t* act, cudaStream_t stream);
// The down GEMM's combine (launch_moe_combine's sums of y into out [M, D]) done by each column
// tile's last block, where moe_down_combines: the tokens' where / weights [M, k] and
// kDenseSplitCounters zeroed ints (left zeroed).
struct MoeDownCombine {
  const int32_t* where;
  const float* weights;
  int64_t M, k;
  float* out;
  int32_t* counters;
};
// Up to this many tokens the down GEMM combines; past it a combine kernel follows (the same
// sums). Measured on the H200 (9 layers, decode 4k): batch 1 2.514 -> 2.504 ms, but batch 8
// 7.30 -> 7.32 with it up to 16 tokens (the last block's combine is a chain of L2 round trips
// per token), so batch 1 only.
inline constexpr int64_t kMoeDownCombineMaxTokens = 1;
bool moe_down_combines(int64_t M, int64_t D, int tile_rows, const float* y, const float* out);
// Launch it right after launch_moe_up_gemm of the same plan on the same stream: it reads the plan
// (and starts its weights) before its programmatic-launch wait, which the up GEMM's order makes
// safe.
cudaError_t launch_moe_down_gemm(const uint16_t* act, const int32_t* offsets, const int32_t* tiles,
                                 const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                 const uint16_t* w2, int64_t D, int64_t I, float* y,
                                 const MoeDownCombine* combine, cudaStream_t stream);
// The same two GEMMs on Hopper's warpgroup MMA (kernels_expert_wgmma.cu) over a plan of
// kMoeWgmmaTileRows-row tiles, with x already bf16 ([*, D], D % 8 == 0, I % 8 == 0, 16-byte
// aligned rows; the E experts' weights 16-byte aligned, read by TMA): the same arithmetic per
// output as the mma.sync tiles. Only where wgmma_available() (device_info.h). Up's blocks run
// in clusters of `cluster` (1, 2 or 4; others: 1) sharing each weight tile by TMA multicast
// where their tiles are one expert's; act is [R, I].
cudaError_t launch_moe_up_wgmma(const uint16_t* x, const int32_t* row_token, const int32_t* offsets,
                                const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                                const uint16_t* w1, const uint16_t* w3, int64_t E, int64_t I,
                                int64_t D, float limit, uint16_t* act, int cluster,
                                cudaStream_t stream);
cudaError_t launch_moe_down_wgmma(const uint16_t* act, int64_t R, const int32_t* offsets,
                                  const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
                                  const uint16_t* w2, int64_t E, int64_t D, int64_t I, float* y,
                                  cudaStream_t stream);
// MXFP4-resident experts (backend.h, ExpertWeights): one stacked matrix [E, N, K] as packed
// e2m1 codes [E, N, K / 2] in the resident order (mxfp4.cuh) and e8m0 scales [E, K / 32, N],
// scales in 2..128.
struct Mxfp4Matrix {
  const uint8_t* data;
  const uint8_t* scales;
};
// MXFP4 expert data [.., rows, cols] (cols % 64 == 0, `tiles` = rows * cols / 64 of them, 16-byte
// aligned) from a checkpoint's order into the resident order the MXFP4 tiles read (mxfp4.cuh),
// in place.
cudaError_t launch_mxfp4_resident_order(uint8_t* data, int64_t tiles, cudaStream_t stream);
// The two GEMMs above with MXFP4 weights (in the resident order), widened to bf16 as the tiles use
// them: the outputs the bf16 kernels give for the weights dequantised. Same plans and tiles; K a
// multiple of 64 and N of 16, rows 16-byte aligned. The mma.sync tiles (tile_rows 16 or 64):
cudaError_t launch_moe_up_gemm_mxfp4(const float* x, const int32_t* row_token,
                                     const int32_t* offsets, const int32_t* tiles,
                                     const int32_t* num_tiles, int64_t max_tiles, int tile_rows,
                                     const Mxfp4Matrix& w1, const Mxfp4Matrix& w3, int64_t I,
                                     int64_t D, float limit, uint16_t* act, cudaStream_t stream);
cudaError_t launch_moe_down_gemm_mxfp4(const uint16_t* act, const int32_t* offsets,
                                       const int32_t* tiles, const int32_t* num_tiles,
                                       int64_t max_tiles, int tile_rows, const Mxfp4Matrix& w2,
                                       int64_t D, int64_t I, float* y,
                                       const MoeDownCombine* combine, cudaStream_t stream);
// ... and the wgmma tiles (kernels_expert_mxfp4_wgmma.cu; kMoeWgmmaTileRows-row plans, bf16 x,
// wgmma_available() only; no clusters). tile_pairs: a block takes two of an expert's tiles
// (for experts averaging two tiles or more: half the widening a FLOP, twice the token bytes):
cudaError_t launch_moe_up_mxfp4_wgmma(const uint16_t* x, const int32_t* row_token,
                                      const int32_t* offsets, const int32_t* tiles,
                                      const int32_t* num_tiles, int64_t max_tiles,
                                      const Mxfp4Matrix& w1, const Mxfp4Matrix& w3, int64_t I,
                                      int64_t D, float limit, bool tile_pairs, uint16_t* act,
                                      cudaStream_t stream);
cudaError_t launch_moe_down_mxfp4_wgmma(const uint16_t* act, const int32_t* offsets,
                                        const int32_t* tiles, const int32_t* num_tiles,
                                        int64_t max_tiles, const Mxfp4Matrix& w2, int64_t D,
                                        int64_t I, bool tile_pairs, float* y, cudaStream_t stream);
// Dense bf16 products of decode-sized batches on the same tensor-core tiles:
// out_b[M, N] (+)= x_b[M, K] (bf16) w_b[N, K]^T for b < batch (element
// strides sx / sw / so; leading dimensions ldx / ldw / ldo). Every output sums its 16-wide k
// chunks in increasing order in one fp32 register chain per K segment, the segments' sums added
// in segment order, whatever the tile shape (chosen from M), so a row's result is bitwise the
// same for any M up to kDenseGemmMaxRows: the batch invariance cuBLASLt does not give (its
// kernels for 1-8 and for 64+ rows differ in the last bits).
// The segments: one, unless the one-row grid would leave the GPU mostly idle (a one-row product
// is as slow as its chain of dependent mma steps over K); then K splits so that about
// set_dense_split_target's blocks run. On sm_90+, with up to 8 segments and all clusters resident
// at once, the segment blocks of an output tile form a thread block cluster and the first sums
// the others' partials out of their shared memory. Otherwise, up to 16 rows, the segments still
// run on blocks of their own and the last block of each output tile sums them from the
// workspace; for more rows, each block sums them in turn.
// The split depends on N, K and batch only, so a row's bits still do not depend on M. A call with
// dense_gemm_partials(M, N, K, batch) > 0 needs that many floats of scratch and
// kDenseSplitCounters zeroed ints, left zeroed (the calls on one stream may share them).
inline constexpr int64_t kDenseGemmMaxRows = 256;
inline constexpr int64_t kDenseSplitCounters = 4096;
struct DenseSplit {
  int splits;     // K segments
  int seg_tiles;  // 64-wide k tiles per segment
};
DenseSplit dense_gemm_split(int64_t N, int64_t K, int64_t batch);
int64_t dense_gemm_partials(int64_t M, int64_t N, int64_t K, int64_t batch);
// For benchmarks: how many one-row blocks a split aims at (0: never split; the default is about
// one wave of resident one-row blocks, 6 per SM by shared memory on a 132-SM H200). Changing it
// changes the bits of split products, so not while a model serves.
inline constexpr int64_t kDenseSplitTargetBlocks = 792;
void set_dense_split_target(int64_t blocks);
// false: split decode products sum their K segments through the workspace (up to 16 rows) or in
// turn (more) even where a thread block cluster could (the same bits;
// DEEPINFER_CUDA_CLUSTER_SPLIT, for comparison).
void set_cluster_reductions(bool on);
// Whether a split product of M rows sums in clusters (its clusters all resident at once), from
// fp32 x (dense_gemm_f32_supported) or bf16 x: for tests and benchmarks.
bool dense_split_in_cluster(int64_t M, int64_t N, int64_t K, int64_t batch, bool fp32_x);
// Whether the current device launches thread block clusters (sm_90+), cached per device.
bool cluster_launch_supported();
bool dense_gemm_supported(int64_t M, int64_t N, int64_t K, int64_t ldx, int64_t ldw, const void* x,
                          const void* w);
cudaError_t launch_dense_gemm(const uint16_t* x, int64_t ldx, int64_t sx, const uint16_t* w,
                              int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so,
                              int64_t M, int64_t N, int64_t K, int64_t batch, bool accumulate,
                              float* partials, int32_t* counters, cudaStream_t stream);
// The same product of fp32 x (ldx, sx in floats) where dense_gemm_f32_supported: each block keeps
// its rows of x, rounded to bf16 as launch_f32_to_bf16 rounds them, for its whole K segment in
// shared memory, so the result is bitwise launch_f32_to_bf16 then launch_dense_gemm, without the
// cast's kernel and buffer. While a block's rows x K segment are at most set_dense_resident_a's
// values.
bool dense_gemm_f32_supported(int64_t M, int64_t N, int64_t K, int64_t batch, int64_t ldx,
                              int64_t ldw, const float* x, const void* w);
cudaError_t launch_dense_gemm_f32(const float* x, int64_t ldx, int64_t sx, const uint16_t* w,
                                  int64_t ldw, int64_t sw, float* out, int64_t ldo, int64_t so,
                                  int64_t M, int64_t N, int64_t K, int64_t batch, bool accumulate,
                                  float* partials, int32_t* counters, cudaStream_t stream);
// For benchmarks: false makes dense_gemm_f32_supported answer false (products go through the
// cast), to time the two side by side.
void set_dense_gemm_f32(bool on);
// How many values of fp32 x (a block's rows x its K segment) a product may keep resident
// (at most 8192; 0: every product goes through the cast). Same bits either way.
inline constexpr int64_t kDenseResidentAElems = 4096;
void set_dense_resident_a(int64_t elems);
// out[m] += sum_j weights[m, j] * y[where[m, j]] in slot order (where < 0: skipped); M rows of D.
cudaError_t launch_moe_combine(const float* y, const int32_t* where, const float* weights,
                               int64_t M, int64_t k, int64_t D, float* out, cudaStream_t stream);

}  // namespace deepinfer::cuda
