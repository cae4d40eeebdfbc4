// The attention sub-block of every layer type (sliding, CSA, HCA).
#include <algorithm>
#include <cmath>

#include "core/env.h"
#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

Tensor upload_i32(Backend& b, const std::vector<int32_t>& values) {
  return b.from_host(values.data(), {static_cast<int64_t>(values.size())}, DType::kI32);
}

const StepInputs::RateRows& StepInputs::rate(int m) const {
  for (const RateRows& r : rates)
    if (r.m == m) return r;
  fail(ErrorCode::kInternal, "no per-row inputs for compress rate {}", m);
}

int64_t indexer_chunk_rows(int64_t entries) {
  const int64_t rows = env::get_int("DEEPINFER_INDEXER_CHUNK_ROWS");
  if (rows < 1)
    fail(ErrorCode::kInvalidArgument, "DEEPINFER_INDEXER_CHUNK_ROWS={} is not >= 1", rows);
  if (entries <= 0) return rows;
  const int64_t fit = kIndexerScoreBytes / (entries * int64_t{sizeof(float)});
  return std::clamp<int64_t>(fit, 1, rows);
}

namespace {

// The window keys of a segment: the ring's rows followed by the new K=V rows ([P + S, hd],
// positions in order), after which the ring keeps the last W-1 of them. When the new rows fit
// after the ring's rows in its buffer they are written there (queued on `copies`) and the window
// is a view of the buffer (the usual decode step); otherwise the kept rows move to the buffer's
// front first, and a segment longer than the buffer gets a window tensor of its own (kept in
// holder). Direct copies here run before the queued ones, which write other rows.
TensorView window_keys(Backend& b, CopyBatch& copies, const TensorView& kv, int64_t window,
                       LayerState& st, Tensor& holder) {
  const int64_t S = kv.dim(0), hd = kv.dim(1), cap = st.ring.dim(0);
  const int64_t keep_max = std::max<int64_t>(window - 1, 0);
  if (st.ring_begin + st.ring_rows + S > cap && st.ring_begin > 0 && st.ring_rows + S <= cap) {
    if (st.ring_rows > 0) b.copy(st.ring_view(), st.ring.view().slice_rows(0, st.ring_rows));
    st.ring_begin = 0;
  }
  if (st.ring_begin + st.ring_rows + S <= cap) {
    const int64_t first = st.ring_begin, end = st.ring_begin + st.ring_rows;
    copies.add(kv, st.ring.view().slice_rows(end, end + S));
    const int64_t keep = std::min(keep_max, st.ring_rows + S);
    st.ring_begin = end + S - keep;
    st.ring_rows = keep;
    return st.ring.view().slice_rows(first, end + S);
  }
  const int64_t P = st.ring_rows;
  holder = b.empty({P + S, hd});
  const TensorView win = holder.view();
  if (P > 0) b.copy(st.ring_view(), win.slice_rows(0, P));
  b.copy(kv, win.slice_rows(P, P + S));
  const int64_t keep = std::min(keep_max, P + S);
  if (keep > 0) b.copy(win.slice_rows(P + S - keep, P + S), st.ring.view().slice_rows(0, keep));
  st.ring_begin = 0;
  st.ring_rows = keep;
  return win;
}

// What a compressed layer computes for every row of the step at once (one GEMM each rather than
// one per sequence): the compressor projections and, for CSA, the indexer's projections and
// queries (set_index_queries).
struct LayerRows {
  TensorView visible;  // I32 [T]: compressed entries row t may see, (position + 1) / m
  CompressorRows comp;
  CompressorRows indexer;
  Tensor index_q;  // [T, nh, di]
  Tensor index_w;  // [T, nh]
};

LayerRows project_layer_rows(Backend& b, const ModelConfig& c, int layer,
                             const std::vector<Tensor>& xp, const StepInputs& in) {
  LayerRows r;
  const int m = c.compress_rate(layer);
  const bool csa = c.layer_types[layer] == AttnType::kCSA;
  const StepInputs::RateRows& rate = in.rate(m);
  r.visible = rate.visible.view();
  // xp: wq_a, wkv, then the compressor's blocks, then the indexer's (attention_x_members).
  const std::span<const Tensor> blocks(xp);
  const size_t nc = csa ? 4 : 2;
  r.comp = compressor_rows(csa, blocks.subspan(2, nc));
  if (!csa) return r;
  r.indexer = compressor_rows(true, blocks.subspan(2 + nc, 4));
  r.index_w = xp[2 + nc + 4];
  return r;
}

// The indexer's queries of a CSA layer's rows, their projection index_q_raw rotated in place.
void set_index_queries(Backend& b, Tensor index_q_raw, const StepInputs& in,
                       const TensorView& inv_freq, LayerRows& rows) {
  rows.index_q = std::move(index_q_raw);
  b.rope(rows.index_q, in.positions_dev, inv_freq, false);
}

// The indexer's scale: 1 / sqrt(head dim) / sqrt(heads).
float indexer_scale(const ModelConfig& c) {
  return 1.0f / std::sqrt(static_cast<float>(c.index_head_dim)) /
         std::sqrt(static_cast<float>(c.index_n_heads));
}

// Lightning indexer of some rows: picks, per query, the top-k of the entries it may see among
// keys [E, di]. q3 [S, nh, di], hw [S, nh], visible [S] (every value <= E).
Tensor indexer_select(Backend& b, const ModelConfig& c, const TensorView& q3, const TensorView& hw,
                      const TensorView& visible, const TensorView& keys) {
  const int64_t S = q3.dim(0), E = keys.dim(0);
  Tensor scores = b.empty({S, E});
  b.indexer_scores(q3, keys, hw, indexer_scale(c), visible, scores);
  const int k = static_cast<int>(std::min<int64_t>(c.index_topk, E));
  Tensor idx = b.empty({S, k}, DType::kI32);
  b.topk(scores, k, idx);
  return idx;
}

// What the first pass over a layer's segments leaves for the second: the window keys and
// which compressors had their rows queued (their full windows pool once the copies ran).
struct SegmentWork {
  TensorView win;
  Tensor win_holder;
  std::vector<Tensor> idx_holders;
  bool comp_staged = false, index_staged = false;
  bool index_batched = false;  // a decode row: its indexer selection runs with the others'
};

// Decode-sized CSA steps (up to this many rows) split the key chain into two side branches
// (attention_block): batch 1 2.455 -> 2.443 ms, batch 8 7.433 -> 7.425 on the H200, but batch
// 64 25.36 -> 25.40-25.59 (docs/perf.md), so larger steps keep one branch.
constexpr int64_t kSplitKeyChainMaxRows = 8;

// First pass, per segment: ring update and compressor updates, their row copies queued on
// `copies` where they fit (every decode token), the rest run directly.
void stage_segment(Backend& b, const ModelConfig& c, const ModelWeights& weights, int layer,
                   const TensorView& kv, const LayerRows& rows, const Segment& seg,
                   CopyBatch& copies, SegmentWork& work) {
  const AttentionWeights& w = weights.layers[layer].attn;
  LayerState& st = seg.state->layers[layer];
  const int64_t r0 = seg.row0, S = seg.count;
  work.win =
      window_keys(b, copies, kv.slice_rows(r0, r0 + S), c.sliding_window, st, work.win_holder);
  if (!w.has_compressor) return;
  const int m = c.compress_rate(layer);
  const bool csa = c.layer_types[layer] == AttnType::kCSA;
  const float eps = static_cast<float>(c.rms_norm_eps);
  work.comp_staged = compressor_stage(copies, m, csa, rows.comp, r0, S, st.comp);
  if (!work.comp_staged)
    compressor_update(b, w.compressor, m, c.head_dim, csa, eps, rows.comp, r0, S,
                      weights.inv_freq_compress, st.comp);
  if (!csa) return;
  work.index_staged = compressor_stage(copies, m, true, rows.indexer, r0, S, st.indexer);
  if (!work.index_staged)
    compressor_update(b, w.indexer.compressor, m, c.index_head_dim, true, eps, rows.indexer, r0, S,
                      weights.inv_freq_compress, st.indexer);
}

// After the queued copies: the windows the staged rows filled, of every segment at once (so a
// decode step's launches do not depend on which sequences close a window).
void close_staged_windows(Backend& b, const ModelConfig& c, const ModelWeights& weights, int layer,
                          const StepInputs& in, const std::vector<SegmentWork>& work) {
  const AttentionWeights& w = weights.layers[layer].attn;
  const int m = c.compress_rate(layer);
  const bool csa = c.layer_types[layer] == AttnType::kCSA;
  const float eps = static_cast<float>(c.rms_norm_eps);
  std::vector<CompressorState*> comp, index;
  for (size_t i = 0; i < work.size(); ++i) {
    LayerState& st = in.segments[i].state->layers[layer];
    if (work[i].comp_staged) comp.push_back(&st.comp);
    if (work[i].index_staged) index.push_back(&st.indexer);
  }
  compressor_close_full_windows(b, w.compressor, m, c.head_dim, csa, eps, weights.inv_freq_compress,
                                comp);
  if (csa)
    compressor_close_full_windows(b, w.indexer.compressor, m, c.index_head_dim, true, eps,
                                  weights.inv_freq_compress, index);
}

// Second pass, per segment (after the queued copies and closes): the indexer's selection; appends
// what the segment's rows attend to (one entry, or one per indexer chunk of a long CSA segment).
void select_keys(Backend& b, const ModelConfig& c, const ModelWeights& weights, int layer,
                 const LayerRows& rows, const StepInputs& in, const Segment& seg, SegmentWork& work,
                 std::vector<Backend::AttentionSegment>& out) {
  const AttentionWeights& w = weights.layers[layer].attn;
  LayerState& st = seg.state->layers[layer];
  const int64_t r0 = seg.row0, r1 = seg.row0 + seg.count, S = seg.count;
  const AttnType type = c.layer_types[layer];

  Backend::AttentionSegment keys;
  keys.row0 = r0;
  keys.count = S;
  keys.win_kv = work.win;
  if (w.has_compressor) {
    const int m = c.compress_rate(layer);
    const bool csa = type == AttnType::kCSA;
    const int64_t E = st.comp.entries.rows();
    if (csa) DI_ASSERT(st.indexer.entries.rows() == E);
    if (E > 0) {
      // Every row sees at most the windows closed up to it: (position + 1) / m <= E.
      keys.comp_kv = st.comp.entries.view();
      if (!csa) {
        keys.comp_visible = rows.visible.slice_rows(r0, r1);
      } else if (S == 1) {
        work.index_batched = true;  // select_keys_of_decode_rows fills comp_idx
      } else {
        // Chunks of rows, each against the entries its last row may see, each its own
        // attention segment (rows [a, b) of the segment see window rows [0, P + b)).
        const int64_t P = work.win.dim(0) - S;
        const int64_t chunk = indexer_chunk_rows(E);
        for (int64_t a = 0; a < S; a += chunk) {
          const int64_t e = std::min(S, a + chunk);
          const int64_t Ec = std::min<int64_t>(E, (in.positions[r0 + e - 1] + 1) / m);
          Backend::AttentionSegment part{r0 + a, e - a, work.win.slice_rows(0, P + e), {}, {}, {}};
          if (Ec > 0) {
            work.idx_holders.push_back(
                indexer_select(b, c, rows.index_q.view().slice_rows(r0 + a, r0 + e),
                               rows.index_w.view().slice_rows(r0 + a, r0 + e),
                               rows.visible.slice_rows(r0 + a, r0 + e),
                               st.indexer.entries.view().slice_rows(0, Ec)));
            part.comp_kv = keys.comp_kv;
            part.comp_idx = work.idx_holders.back().view();
          }
          out.push_back(part);
        }
        return;
      }
    }
  }
  out.push_back(keys);
}

// The lightning indexer for every decode row (one-token segment) of a CSA layer at once: one
// scoring launch and one top-k over [rows, largest E] (a row's columns past its own E are -inf
// and come out of the top-k as -1, which the attention skips: the same keys as alone).
Tensor select_keys_of_decode_rows(Backend& b, const ModelConfig& c, const LayerRows& rows,
                                  int layer, const StepInputs& in,
                                  const std::vector<SegmentWork>& work,
                                  const std::vector<size_t>& first_key,
                                  std::vector<Backend::AttentionSegment>& keys) {
  std::vector<Backend::IndexerSegment> segs;
  std::vector<size_t> which;
  int64_t E_max = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    if (!work[i].index_batched) continue;
    const Segment& seg = in.segments[i];
    const TensorView entries = seg.state->layers[layer].indexer.entries.view();
    segs.push_back({seg.row0, 1, entries});
    which.push_back(i);
    E_max = std::max(E_max, entries.dim(0));
  }
  if (segs.empty()) return {};
  const int64_t R = static_cast<int64_t>(segs.size());
  Tensor scores = b.empty({R, E_max});
  b.indexer_scores_batch(rows.index_q, segs, rows.index_w, indexer_scale(c), rows.visible, scores);
  const int k = static_cast<int>(std::min<int64_t>(c.index_topk, E_max));
  Tensor idx = b.empty({R, k}, DType::kI32);
  b.topk(scores, k, idx);
  for (int64_t r = 0; r < R; ++r)
    keys[first_key[which[r]]].comp_idx = idx.view().slice_rows(r, r + 1);
  return idx;
}

}  // namespace

Tensor attention_block(Backend& b, const ModelConfig& c, const ModelWeights& weights, int layer,
                       const TensorView& x, const StepInputs& in) {
  const AttentionWeights& w = weights.layers[layer].attn;
  const int64_t T = in.num_tokens;
  const int H = c.num_attention_heads, hd = c.head_dim, D = c.hidden_size;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const TensorView inv_freq = c.layer_types[layer] == AttnType::kSliding
                                  ? weights.inv_freq_main.view()
                                  : weights.inv_freq_compress.view();

  // Every projection of x in one GEMM (weights.h: x_proj).
  const std::vector<Tensor> xp = project_fused(b, x, w.x_proj, member_rows(attention_x_members(w)));

  // Queries: low-rank projection, per-head unweighted RMSNorm, RoPE (wq_b below). Where the
  // backend's attention normalises and rotates them as it reads them (raw_q), it gets wq_b's
  // output; else they are normalised beside the key chain.
  const Tensor& qa = xp[0];
  Tensor qr = b.empty({T, c.q_lora_rank}, b.product_input_dtype(T));  // read by products only
  const bool raw_q = b.attention_normalises_raw_q(T, H, hd, inv_freq.dim(0));
  Tensor q_raw = b.empty({T * H, hd});
  Tensor q = raw_q ? Tensor() : b.empty({T, H, hd});
  const TensorView q_raw3 = q_raw.view().reshape({T, H, hd});

  // The heads in the dtype of wo_a's weights (bf16 on a GPU: the product rounds them so anyway).
  Tensor attn = b.empty({T, H, hd}, b.weight_dtype());
  Tensor kv = b.empty({T, hd});
  LayerRows rows;
  std::vector<SegmentWork> work(in.segments.size());
  std::vector<Backend::AttentionSegment> keys;
  Tensor decode_idx;  // the decode rows' comp_idx (keys views it) until the attention is queued
  // The keys (the shared K=V head, the compressors, the indexer's selection) go on side
  // branches: chains of short kernels that need none of the queries' wq_b product. First the
  // K=V head's norm and RoPE, the ring and compressor rows and the window closes.
  const auto stage_keys = [&] {
    const Tensor& kv_raw = xp[1];
    b.rms_norm_rope(kv_raw.view().reshape({T, 1, hd}), w.kv_norm, eps, in.positions_dev, inv_freq,
                    kv.view().reshape({T, 1, hd}));
    if (w.has_compressor) rows = project_layer_rows(b, c, layer, xp, in);
    // Two passes over the segments so that their ring and pending-buffer writes go out as one
    // batch of copies, then one attention call for all of them.
    CopyBatch copies;
    for (size_t i = 0; i < in.segments.size(); ++i)
      stage_segment(b, c, weights, layer, kv, rows, in.segments[i], copies, work[i]);
    copies.flush(b);
    if (w.has_compressor) close_staged_windows(b, c, weights, layer, in, work);
  };
  // Then what each segment's rows attend to (CSA: the indexer's selection).
  const auto select_all_keys = [&] {
    std::vector<size_t> first_key(in.segments.size());  // segment i's first entry in keys
    for (size_t i = 0; i < in.segments.size(); ++i) {
      first_key[i] = keys.size();
      select_keys(b, c, weights, layer, rows, in, in.segments[i], work[i], keys);
    }
    decode_idx = select_keys_of_decode_rows(b, c, rows, layer, in, work, first_key, keys);
  };
  // The queries' up projection and, where the attention does not, their norm and RoPE.
  const auto project_queries = [&] {
    b.matmul(qr, w.wq_b, q_raw.view().reshape({T, H * hd}));
    if (!raw_q) b.rms_norm_rope(q_raw3, TensorView(), eps, in.positions_dev, inv_freq, q);
  };
  // CSA: the indexer's queries, a product of the normed low-rank query.
  const bool csa = c.layer_types[layer] == AttnType::kCSA;
  const auto project_index_queries = [&] {
    Tensor index_q = b.empty({T, c.index_n_heads, c.index_head_dim});
    b.matmul(qr, w.indexer.wq_b,
             index_q.view().reshape({T, int64_t{c.index_n_heads} * c.index_head_dim}));
    return index_q;
  };
  if (csa && T <= kSplitKeyChainMaxRows) {
    // The selection needs the indexer's queries: the staging runs beside the query norm and
    // their product (alone: beside wq_b's weight stream it took as long as wq_b), and the
    // selection beside wq_b (the key chain was the layer's critical path with all of it after
    // the indexer's product).
    Tensor index_q;
    {
      SideBranch side(b);
      stage_keys();
      side.to_main();
      b.rms_norm(qa, w.q_norm, eps, qr);
      index_q = project_index_queries();
    }  // joined: the selection reads both branches
    SideBranch side(b);
    set_index_queries(b, std::move(index_q), in, weights.inv_freq_compress, rows);
    select_all_keys();
    side.to_main();
    project_queries();
  } else {
    b.rms_norm(qa, w.q_norm, eps, qr);
    // One branch beside wq_b; a larger CSA step's indexer queries first, alone.
    Tensor index_q = csa ? project_index_queries() : Tensor();
    SideBranch side(b);
    stage_keys();
    if (csa) set_index_queries(b, std::move(index_q), in, weights.inv_freq_compress, rows);
    select_all_keys();
    side.to_main();
    project_queries();
  }  // joined: the attention reads both branches
  // K = V carried RoPE into the output's rope dims: rotated back to the query's frame as written.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  if (raw_q)
    b.attention_batch_raw_q(q_raw3, keys, c.sliding_window, w.sinks, scale, eps, in.positions_dev,
                            inv_freq, attn);
  else
    b.attention_batch_derotated(q, keys, c.sliding_window, w.sinks, scale, in.positions_dev,
                                inv_freq, attn);

  // Grouped low-rank output projection.
  const int G = c.o_groups;
  Tensor grouped = b.empty({T, G, c.o_lora_rank}, b.product_input_dtype(T));  // wo_b's operand
  b.grouped_matmul(attn.view().reshape({T, G, H * hd / G}), w.wo_a, grouped);
  Tensor out = b.empty({T, D});
  b.matmul(grouped.view().reshape({T, G * c.o_lora_rank}), w.wo_b, out);
  return out;
}

}  // namespace deepinfer::deepseek_v4
