// The op interface the model is written against. One implementation per device (cpu/, cuda/).
// Conventions: tensors are row-major and contiguous unless stated; weights are [out, in]
// (y = x W^T); every output is preallocated by the caller and fully overwritten (never read)
// unless the op says it accumulates. The CPU backend computes in fp32; the CUDA backend
// computes in bf16 with fp32 accumulation. Index tensors are int32.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>

#include "core/status.h"
#include "core/tensor.h"

namespace deepinfer {

enum class ScoringFunc { kSoftmax, kSigmoid, kSqrtSoftplus };

// Routed experts of one MoE layer, stacked over experts: in the backend's weight_dtype(), or kept
// in the checkpoint's MXFP4 where Backend::takes_mxfp4_experts says so. MXFP4: w1 / w3 / w2 are
// FP4E2M1 (two per byte, the low nibble the even column) of the shapes below, and s1 / s3 / s2
// their E8M0 scales, one per 32 values of a row, stored k-group-major: s1 [E, D / 32, I] (s1[e,
// g, i] scales w1[e, i, 32 g .. 32 g + 31]), s3 likewise, s2 [E, I / 32, D]. Every scale is in
// [kMxfp4MinScale, kMxfp4MaxScale], so each weight is exact in bf16 and fp32 (and a backend may
// widen it by a bf16 multiply). The MXFP4 data are in the order Backend::prepare_mxfp4_experts
// left them. Without scales (empty views) the experts are unquantised.
struct ExpertWeights {
  TensorView w1;  // [E, I, D] gate
  TensorView w3;  // [E, I, D] up
  TensorView w2;  // [E, D, I] down
  TensorView s1{}, s3{}, s2{};
  bool mxfp4() const { return !s1.empty(); }
};
// The e8m0 scales MXFP4-resident experts may have: 2^-125 .. 2^1 (a weight's magnitude is at most
// 6 * 2, the least nonzero one 0.5 * 2^-125, both normal in bf16).
inline constexpr uint8_t kMxfp4MinScale = 2, kMxfp4MaxScale = 128;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // The dtype of large weight matrices on this backend: the `w` of matmul / grouped_matmul, the
  // experts of moe_experts and the embedding table (fp32 on the CPU, bf16 on CUDA). Vectors and
  // small parameters (norm weights, biases, sinks, ape, mHC parameters) are always fp32.
  virtual DType weight_dtype() const { return DType::kF32; }
  // Whether moe_experts takes routed experts of E experts, intermediate size I and hidden size D
  // kept in MXFP4 (ExpertWeights): the loader then keeps a checkpoint's MXFP4 experts as they
  // are (DEEPINFER_MXFP4_EXPERTS) instead of widening them to weight_dtype().
  virtual bool takes_mxfp4_experts(int64_t E, int64_t I, int64_t D) const {
    (void)E;
    (void)I;
    (void)D;
    return false;
  }
  // Reorders MXFP4 expert data (ExpertWeights' w1 / w3 / w2 as a checkpoint stores them: FP4E2M1
  // [E, rows, cols], cols % 64 == 0) in place into the order this backend's moe_experts reads
  // them in; whoever builds MXFP4 ExpertWeights calls it once per matrix. A no-op where the
  // kernels read the checkpoint's order (the CPU).
  virtual void prepare_mxfp4_experts(const TensorView& data) { (void)data; }
  // The dtype a producer best writes a tensor of `rows` rows in whose only readers are products
  // (matmul, grouped_matmul, moe_experts): weight_dtype() where the backend's products of that
  // size round x to it anyway (writing it so saves them a cast pass over fp32), else F32. The
  // ops that may write it: rms_norm, swiglu, grouped_matmul, and hc_pre_norm /
  // hc_post_pre_norm's `normed`.
  virtual DType product_input_dtype(int64_t rows) const {
    (void)rows;
    return DType::kF32;
  }

  // ---- synchronisation guard -------------------------------------------------------------------
  // Between enter and leave, anything that would make the host wait for the device (a download,
  // an op that needs device data on the host) throws kInternal naming it, unless
  // DEEPINFER_DISABLE_SYNC_GUARD=1: a forward runs inside one so that its launches stream ahead
  // of the device and can be captured in a graph. Regions do not nest. No-ops on the CPU.
  virtual void enter_sync_free(const char* region) { (void)region; }
  virtual void leave_sync_free() {}

  // ---- graphs ----------------------------------------------------------------------------------
  // Between begin_graph and end_graph the ops' launches are recorded rather than run, then run
  // as one graph: CUDA replays a kept executable graph of the same key and layout with the new
  // arguments, or instantiates one (DEEPINFER_CUDA_GRAPHS=0 turns this off). Only inside a
  // sync-free region (nothing recorded may wait for the device). begin_graph returns false when
  // it records nothing (the CPU; graphs off; the sync guard disabled): the launches then run as
  // issued and end_graph is not called. end_graph(false) drops the recording (error unwinding).
  virtual bool begin_graph(int64_t key) {
    (void)key;
    return false;
  }
  virtual void end_graph(bool run) { (void)run; }

  // ---- a side branch ---------------------------------------------------------------------------
  // Work that does not depend on the ops issued beside it can run concurrently with them (a
  // decode step's key and indexer chain, short latency-bound kernels, beside the query
  // projection's weight stream):
  //   begin_side();  ops issued now run after everything issued before, on a side stream
  //   end_side();    ops issued now run on the main stream again, beside the side branch
  //   join_side();   ops issued now also wait for the side branch
  // Neither branch may write what the other reads or writes; each branch's ops run in their
  // order, so the results are those of issuing the branches one after the other (the same bits).
  // One branch at a time; graphs record both. No-ops on the CPU (and with
  // DEEPINFER_CUDA_SIDE_STREAM=0), where the ops simply run in turn.
  virtual void begin_side() {}
  virtual void end_side() {}
  virtual void join_side() {}

  // ---- memory -------------------------------------------------------------------------------
  // Gives memory kept cached for reuse back to the device (CUDA: drains the stream, then frees
  // the caching allocator's free blocks); a no-op on the CPU. Called once loading is done, so
  // that what loading freed counts as free when the engine sizes the state memory.
  virtual void release_cached_memory() {}
  virtual Tensor empty(std::initializer_list<int64_t> shape, DType dtype = DType::kF32) = 0;
  virtual void upload(const void* host, const TensorView& dst) = 0;  // dst.nbytes() bytes
  // A new tensor holding a copy of the host bytes (its nbytes()): empty() then upload(). The CUDA
  // backend packs a graph recording's from_host tensors into one copy at the graph's start.
  virtual Tensor from_host(const void* host, std::initializer_list<int64_t> shape, DType dtype) {
    Tensor t = empty(shape, dtype);
    if (t.numel() > 0) upload(host, t);
    return t;
  }
  virtual void download(const TensorView& src, void* host) = 0;
  virtual void copy(const TensorView& src, const TensorView& dst) = 0;  // same numel and dtype
  // Many copies as one op (one launch on a GPU; the many small row copies of a decode step):
  // pair i copies src[i] to dst[i] as copy() would. The pairs run in no particular order, so a
  // destination may overlap nothing else, not even its own source (unless it is that source
  // exactly: a no-op); checked, kInvalidArgument names the pairs.
  virtual void copy_batch(std::span<const TensorView> src, std::span<const TensorView> dst) = 0;
  // dst [M, w] = columns [col0, col0 + w) of src [M, N] (same dtype, both contiguous, no
  // overlap): the blocks of a fused projection's product.
  virtual void copy_columns(const TensorView& src, int64_t col0, const TensorView& dst) = 0;
  // Fills t (contiguous, F32 or BF16) with uniform values in [lo, hi], every element a pure
  // function of (seed, flat index i), so every backend writes the same bits:
  //   z = seed + (i + 1) * 0x9E3779B97F4A7C15 (mod 2^64), then the SplitMix64 finaliser
  //   z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB; z ^= z >> 31
  //   u = float(z >> 40) * 2^-24;  v = fmaf(hi - lo, u, lo) (fp32, one rounding); BF16 stores v
  //   rounded to nearest even. FP4E2M1 (two per byte): byte j holds elements 2j, 2j + 1 and is
  //   z >> 56 of flat index j, so every code is equally likely (values in [-6, 6]; lo and hi
  //   must be -6 and 6). For random weights and synthetic state (bench), not for sampling.
  virtual void fill_random(const TensorView& t, uint64_t seed, float lo, float hi) = 0;

  // ---- dense ---------------------------------------------------------------------------------
  // out[M, N] = x[M, K] @ w[N, K]^T, or out += ... when accumulate. x is F32, or (matmul and
  // grouped_matmul) in weight_dtype() where that is BF16: the bf16 operand the product would
  // round x to, made by x's producer.
  virtual void matmul(const TensorView& x, const TensorView& w, const TensorView& out,
                      bool accumulate = false) = 0;
  // Block-diagonal projection: x [M, G, K], w [G*N, K] (block g = rows g*N .. g*N+N-1),
  // out [M, G, N]: out[m, g] = x[m, g] @ w_g^T.
  virtual void grouped_matmul(const TensorView& x, const TensorView& w, const TensorView& out) = 0;
  // out[m] = table[ids[m]]; ids I32 [M], table [V, D], out [M, D]. Ids are range-checked.
  virtual void embedding(const TensorView& ids, const TensorView& table, const TensorView& out) = 0;
  virtual void add(const TensorView& a, const TensorView& b, const TensorView& out) = 0;

  // ---- normalisation and position -------------------------------------------------------------
  // Rows of length D = x.dim(-1): out = x * rsqrt(mean(x^2) + eps) [* weight[D] if non-empty].
  virtual void rms_norm(const TensorView& x, const TensorView& weight, float eps,
                        const TensorView& out) = 0;
  // In place on x [M, H, hd]: interleaved RoPE (pairs 2i, 2i+1) on the trailing 2*R dims of each
  // head, R = inv_freq.dim(0), angle = positions[m] * inv_freq[i]. inverse: rotate by -angle.
  virtual void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
                    bool inverse) = 0;
  // rms_norm of x's rows (weight [hd] or none) into out, then rope(out, positions, inv_freq,
  // false): x, out [M, H, hd]. One op so that a backend can do both in one pass over the rows;
  // the same values as the two in turn, which is what this default runs.
  virtual void rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                             const TensorView& positions, const TensorView& inv_freq,
                             const TensorView& out) {
    rms_norm(x, weight, eps, out);
    rope(out, positions, inv_freq, false);
  }

  // ---- manifold-constrained hyper-connections (mHC) ------------------------------------------
  // X [M, hc, D]. f = rmsnorm_unweighted(flatten(X), norm_eps) @ fn^T ([(2+hc)*hc] per row);
  // pre = sigmoid(f[:hc]*scale[0] + base[:hc]) + hc_eps; post = 2 sigmoid(f[hc:2hc]*scale[1] +
  // base[hc:2hc]); comb = Sinkhorn(softmax_rows(f[2hc:]*scale[2] + base[2hc:]) + hc_eps, iters);
  // collapsed[m] = sum_h pre[h] X[m, h]. Outputs: collapsed [M, D], post [M, hc], comb [M, hc, hc].
  virtual void hc_pre(const TensorView& X, const TensorView& fn, const TensorView& base,
                      const TensorView& scale, int sinkhorn_iters, float hc_eps, float norm_eps,
                      const TensorView& collapsed, const TensorView& post,
                      const TensorView& comb) = 0;
  // hc_pre, then rms_norm(collapsed, norm_weight, norm_eps, normed) (normed [M, D]): an mHC
  // site's normed input. One op so that a backend can norm each row as it collapses it; the
  // same values as the two in turn, which is what this default runs.
  virtual void hc_pre_norm(const TensorView& X, const TensorView& fn, const TensorView& base,
                           const TensorView& scale, int sinkhorn_iters, float hc_eps,
                           float norm_eps, const TensorView& norm_weight, const TensorView& normed,
                           const TensorView& post, const TensorView& comb) {
    DI_CHECK(normed.ndim() == 2, ErrorCode::kInvalidArgument,
             "hc_pre_norm: normed must be [M, D], got {}", normed.shape_str());
    Tensor collapsed = empty({normed.dim(0), normed.dim(1)});
    hc_pre(X, fn, base, scale, sinkhorn_iters, hc_eps, norm_eps, collapsed, post, comb);
    rms_norm(collapsed, norm_weight, norm_eps, normed);
  }
  // out[m, h] = post[m, h] * y[m] + sum_j comb[m, j, h] * X[m, j]; out must not alias X.
  virtual void hc_post(const TensorView& X, const TensorView& y, const TensorView& post,
                       const TensorView& comb, const TensorView& out) = 0;
  // hc_post(X, y, post, comb, out), then the next site's hc_pre_norm(out, fn, ...) into normed,
  // next_post and next_comb. One op so that a backend can form the next site's mixing sums as it
  // writes out; the same values as the two in turn, which is what this default runs.
  virtual void hc_post_pre_norm(const TensorView& X, const TensorView& y, const TensorView& post,
                                const TensorView& comb, const TensorView& out, const TensorView& fn,
                                const TensorView& base, const TensorView& scale, int sinkhorn_iters,
                                float hc_eps, float norm_eps, const TensorView& norm_weight,
                                const TensorView& normed, const TensorView& next_post,
                                const TensorView& next_comb) {
    hc_post(X, y, post, comb, out);
    hc_pre_norm(out, fn, base, scale, sinkhorn_iters, hc_eps, norm_eps, norm_weight, normed,
                next_post, next_comb);
  }
  // Final collapse: pre = sigmoid(rmsnorm_unweighted(flatten(X)) @ fn^T * scale[0] + base) +
  // hc_eps; out[m] = sum_h pre[h] X[m, h]. fn [hc, hc*D], base [hc], scale [1], out [M, D].
  virtual void hc_head(const TensorView& X, const TensorView& fn, const TensorView& base,
                       const TensorView& scale, float hc_eps, float norm_eps,
                       const TensorView& out) = 0;

  // ---- attention ----------------------------------------------------------------------------
  // Softmax-gated pooling: kv, gate [N, S, d], slot_bias [S, d] (each slot's position bias; an
  // empty view adds none) -> out[n, c] = sum_s softmax_s(gate[n, :, c] + slot_bias[:, c]) *
  // kv[n, s, c]; -inf slots get no weight.
  virtual void window_pool(const TensorView& kv, const TensorView& gate,
                           const TensorView& slot_bias, const TensorView& out) = 0;
  // Shared-KV attention with per-head sinks. q [M, H, hd]; win_kv [P + M, hd] holds the keys of
  // positions p0-P .. p0+M-1 where query m sits at p0+m: query m sees rows r with
  // m + P - window < r <= m + P. Compressed entries comp_kv [E, hd] (E may be 0): query m also
  // sees comp_kv[comp_idx[m, j]] for every j with comp_idx[m, j] >= 0 when comp_idx is
  // non-empty ([M, K]), else comp_kv[0 .. comp_visible[m]) when comp_visible ([M]) is
  // non-empty. Scores are q.k * scale; the softmax includes sinks[h] as an extra logit with no
  // value. out [M, H, hd].
  virtual void attention(const TensorView& q, const TensorView& win_kv, int64_t window,
                         const TensorView& comp_kv, const TensorView& comp_idx,
                         const TensorView& comp_visible, const TensorView& sinks, float scale,
                         const TensorView& out) = 0;
  // attention() for several sequences as one op (one launch on a GPU: a decode step's batch).
  // Segment i is rows [row0, row0 + count) of q and out, with its own win_kv ([P_i + count, hd]),
  // comp_kv, comp_idx ([count, K_i]) or comp_visible ([count]) exactly as attention() takes them
  // for those rows; window, sinks and scale are shared. The segments tile q's rows in order.
  struct AttentionSegment {
    int64_t row0 = 0, count = 0;
    TensorView win_kv, comp_kv, comp_idx, comp_visible;
  };
  virtual void attention_batch(const TensorView& q, std::span<const AttentionSegment> segments,
                               int64_t window, const TensorView& sinks, float scale,
                               const TensorView& out) = 0;
  // attention_batch, then rope(out, positions, inv_freq, true): the heads back in their query's
  // frame (V4's K = V carries RoPE into the output's rope dims). One op so that a backend can
  // rotate as it writes, and write out in its weight_dtype() when that is not F32 (BF16: what the
  // product reading out rounds it to anyway, so the same values reach it). This default runs the
  // two in turn (out F32).
  virtual void attention_batch_derotated(const TensorView& q,
                                         std::span<const AttentionSegment> segments, int64_t window,
                                         const TensorView& sinks, float scale,
                                         const TensorView& positions, const TensorView& inv_freq,
                                         const TensorView& out) {
    attention_batch(q, segments, window, sinks, scale, out);
    rope(out, positions, inv_freq, true);
  }
  // Whether attention_batch_raw_q of `rows` query rows (heads x head_dim, RoPE on rope_pairs
  // pairs) normalises them inside its attention kernel. Where not, a caller may as well run
  // rms_norm_rope itself, early (beside other work), and call attention_batch_derotated.
  virtual bool attention_normalises_raw_q(int64_t rows, int64_t heads, int64_t head_dim,
                                          int64_t rope_pairs) const {
    (void)rows, (void)heads, (void)head_dim, (void)rope_pairs;
    return false;
  }
  // rms_norm_rope(q_raw, no weight, q_eps, positions, inv_freq) (each head's unweighted RMSNorm,
  // then RoPE), then attention_batch_derotated of those queries with the same positions and
  // frequencies. One op so that a backend can normalise and rotate the queries as its attention
  // loads them (a pass over [M, H, hd] fewer); the same values as the two in turn, which this
  // default runs.
  virtual void attention_batch_raw_q(const TensorView& q_raw,
                                     std::span<const AttentionSegment> segments, int64_t window,
                                     const TensorView& sinks, float scale, float q_eps,
                                     const TensorView& positions, const TensorView& inv_freq,
                                     const TensorView& out) {
    DI_CHECK(q_raw.ndim() == 3, ErrorCode::kInvalidArgument,
             "attention_batch_raw_q: q_raw must be [M, H, hd], got {}", q_raw.shape_str());
    Tensor q = empty({q_raw.dim(0), q_raw.dim(1), q_raw.dim(2)});
    rms_norm_rope(q_raw, TensorView(), q_eps, positions, inv_freq, q);
    attention_batch_derotated(q, segments, window, sinks, scale, positions, inv_freq, out);
  }
  // Lightning indexer: scores[m, e] = sum_h w[m, h] * relu(q[m, h] . k[e]) * scale for
  // e < visible[m], -inf otherwise. q [M, nh, d], k [E, d], w [M, nh], visible I32 [M],
  // scores [M, E].
  virtual void indexer_scores(const TensorView& q, const TensorView& k, const TensorView& w,
                              float scale, const TensorView& visible, const TensorView& scores) = 0;
  // indexer_scores for several sequences' rows in one op (one launch on a GPU: the decode rows
  // of a step). Segment i takes rows [row0, row0 + count) of q, w and visible, scored against its
  // own keys k_i ([E_i, d]), and fills the next count rows of scores [R, N] (R = the segments'
  // rows together, in segment order; N >= every E_i): columns from min(visible, E_i) on are -inf.
  struct IndexerSegment {
    int64_t row0 = 0, count = 0;
    TensorView k;
  };
  virtual void indexer_scores_batch(const TensorView& q, std::span<const IndexerSegment> segments,
                                    const TensorView& w, float scale, const TensorView& visible,
                                    const TensorView& scores) = 0;
  // Per row of scores [M, N]: indices I32 [M, k] of the k largest values in descending order
  // (ties: lower index first); an index whose value is -inf is written as -1. k <= N.
  virtual void topk(const TensorView& scores, int k, const TensorView& idx) = 0;

  // ---- mixture of experts ---------------------------------------------------------------------
  // s = score_fn(logits [M, E]). Selection: hash routing when tid2eid ([V, k] I32) is non-empty
  // (rows tid2eid[ids[m]]), else the top-k of s + bias (bias [E] may be empty). weights [M, k] =
  // s at the selection / (sum + 1e-20) * routed_scale; idx I32 [M, k].
  virtual void route(const TensorView& logits, ScoringFunc func, const TensorView& bias,
                     const TensorView& tid2eid, const TensorView& ids, float routed_scale,
                     const TensorView& weights, const TensorView& idx) = 0;
  // out = silu(min(gate, limit)) * clamp(up, -limit, limit), elementwise; all [M, I].
  virtual void swiglu(const TensorView& gate, const TensorView& up, float limit,
                      const TensorView& out) = 0;
  // The token permutation moe_experts needs for idx (I32 [M, k]) over num_experts experts, made
  // ahead of the call (on a side branch, beside other work): pass it to moe_experts with the same
  // idx. The default, an empty tensor, leaves the planning to moe_experts.
  virtual Tensor moe_plan(const TensorView& idx, int64_t num_experts) {
    (void)idx;
    (void)num_experts;
    return Tensor();
  }
  // out[m] += sum_j weights[m, j] * (swiglu(x[m] W1_e^T, x[m] W3_e^T) W2_e^T), e = idx[m, j].
  // x [M, D], idx I32 / weights F32 [M, k], out [M, D] (accumulated into). plan: moe_plan's of
  // this idx and these experts, or empty (planned here).
  virtual void moe_experts(const TensorView& x, const TensorView& idx, const TensorView& weights,
                           const ExpertWeights& experts, float limit, const TensorView& plan,
                           const TensorView& out) = 0;
};

// Keeps a backend's sync-free region open for one scope.
class SyncFreeRegion {
 public:
  SyncFreeRegion(Backend& backend, const char* region) : backend_(backend) {
    backend_.enter_sync_free(region);
  }
  ~SyncFreeRegion() { backend_.leave_sync_free(); }
  SyncFreeRegion(const SyncFreeRegion&) = delete;
  SyncFreeRegion& operator=(const SyncFreeRegion&) = delete;

 private:
  Backend& backend_;
};

// Records one scope's launches as a graph (Backend::begin_graph) and runs it at finish();
// leaving the scope without finish() (an exception) drops the recording.
class GraphRegion {
 public:
  GraphRegion(Backend& backend, int64_t key)
      : backend_(backend), recording_(backend.begin_graph(key)) {}
  ~GraphRegion() {
    if (!recording_) return;
    try {
      backend_.end_graph(false);
    } catch (...) {  // already unwinding: the first error is the one to report
    }
  }
  void finish() {
    if (!recording_) return;
    recording_ = false;
    backend_.end_graph(true);
  }
  GraphRegion(const GraphRegion&) = delete;
  GraphRegion& operator=(const GraphRegion&) = delete;

 private:
  Backend& backend_;
  bool recording_;
};

// A side branch for one scope (Backend::begin_side): ops go to the side stream from
// construction until to_main(), then to the main one; the destructor joins (also when unwinding,
// so that a graph recording is never left with an unjoined branch).
class SideBranch {
 public:
  explicit SideBranch(Backend& backend) : backend_(backend) { backend_.begin_side(); }
  void to_main() {
    if (on_side_) backend_.end_side();
    on_side_ = false;
  }
  ~SideBranch() {
    to_main();
    backend_.join_side();
  }
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;

 private:
  Backend& backend_;
  bool on_side_ = true;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace deepinfer
