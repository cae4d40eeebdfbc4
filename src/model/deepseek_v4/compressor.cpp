// Window compressors of CSA / HCA layers and of the lightning indexer.
#include <limits>

#include "model/deepseek_v4/blocks.h"

namespace deepinfer::deepseek_v4 {

namespace {

// pending rows followed by the new rows: [pending + S, d].
Tensor join(Backend& b, const Tensor& pending_rows, int pending, const TensorView& fresh,
            int64_t d) {
  const int64_t S = fresh.dim(0);
  Tensor out = b.empty({pending + S, d});
  if (pending > 0)
    b.copy(pending_rows.view().slice_rows(0, pending), out.view().slice_rows(0, pending));
  b.copy(fresh, out.view().slice_rows(pending, pending + S));
  return out;
}

Tensor constant_rows(Backend& b, int64_t rows, int64_t d, float value) {
  const std::vector<float> host(rows * d, value);
  return b.from_host(host.data(), {rows, d}, DType::kF32);
}

}  // namespace

CompressorRows compressor_rows(bool csa, std::span<const Tensor> proj) {
  CompressorRows r;
  r.kv_a = proj[0];
  r.gate_a = proj[1];
  if (csa) {
    r.kv_b = proj[2];
    r.gate_b = proj[3];
  }
  return r;
}

namespace {

// Pools the windows in rows [0, total) of the views (pending rows first): closed windows become
// entries, the rest [n_win * m, total) moves to the front of the pending buffers.
void pool_windows(Backend& b, const CompressorWeights& w, int m, int d, bool csa, float norm_eps,
                  const TensorView& inv_freq, const TensorView& kv_a, const TensorView& gate_a,
                  const TensorView& kv_b, const TensorView& gate_b, int64_t total,
                  CompressorState& st) {
  const int64_t n_win = total / m;
  const int64_t rest = total - n_win * m;

  if (n_win > 0) {
    Tensor pooled = b.empty({n_win, d});
    if (!csa) {
      // HCA: each window's m slots are consecutive rows already.
      const TensorView kv3 = kv_a.slice_rows(0, n_win * m).reshape({n_win, m, d});
      const TensorView g3 = gate_a.slice_rows(0, n_win * m).reshape({n_win, m, d});
      b.window_pool(kv3, g3, w.slot_bias, pooled);
    } else {
      // CSA: entry w pools 2m slots: series a of window w-1 (the carried window for w = 0,
      // nothing before the first window) and series b of window w. Assembled by one batch of
      // copies (a prompt closes many windows).
      Tensor kv3 = b.empty({n_win, 2 * m, d});
      Tensor g3 = b.empty({n_win, 2 * m, d});
      const TensorView kv_rows = kv3.view().reshape({n_win * 2 * m, d});
      const TensorView g_rows = g3.view().reshape({n_win * 2 * m, d});
      Tensor empty_kv, empty_gate;
      CopyBatch copies;
      for (int64_t win = 0; win < n_win; ++win) {
        const int64_t o = win * 2 * m;
        if (win > 0) {
          copies.add(kv_a.slice_rows((win - 1) * m, win * m), kv_rows.slice_rows(o, o + m));
          copies.add(gate_a.slice_rows((win - 1) * m, win * m), g_rows.slice_rows(o, o + m));
        } else if (st.has_prev) {
          copies.add(st.prev_kv_a, kv_rows.slice_rows(o, o + m));
          copies.add(st.prev_gate_a, g_rows.slice_rows(o, o + m));
        } else {
          empty_kv = constant_rows(b, m, d, 0.0f);
          empty_gate = constant_rows(b, m, d, -std::numeric_limits<float>::infinity());
          copies.add(empty_kv, kv_rows.slice_rows(o, o + m));
          copies.add(empty_gate, g_rows.slice_rows(o, o + m));
        }
        copies.add(kv_b.slice_rows(win * m, (win + 1) * m), kv_rows.slice_rows(o + m, o + 2 * m));
        copies.add(gate_b.slice_rows(win * m, (win + 1) * m), g_rows.slice_rows(o + m, o + 2 * m));
      }
      copies.flush(b);
      b.window_pool(kv3, g3, w.slot_bias, pooled);
      b.copy(kv_a.slice_rows((n_win - 1) * m, n_win * m), st.prev_kv_a);
      b.copy(gate_a.slice_rows((n_win - 1) * m, n_win * m), st.prev_gate_a);
      st.has_prev = true;
    }
    Tensor entries = b.empty({n_win, d});
    b.rms_norm(pooled, w.norm, norm_eps, entries);
    std::vector<int32_t> pos(n_win);
    const int64_t first = st.entries.rows();
    for (int64_t win = 0; win < n_win; ++win) pos[win] = static_cast<int32_t>((first + win) * m);
    b.rope(entries.view().reshape({n_win, 1, d}), upload_i32(b, pos), inv_freq, false);
    st.entries.append(b, entries);
  }

  // Whatever did not fill a window waits for the next call.
  const int64_t from = n_win * m;
  if (rest > 0) {
    b.copy(kv_a.slice_rows(from, total), st.pend_kv_a.view().slice_rows(0, rest));
    b.copy(gate_a.slice_rows(from, total), st.pend_gate_a.view().slice_rows(0, rest));
    if (csa) {
      b.copy(kv_b.slice_rows(from, total), st.pend_kv_b.view().slice_rows(0, rest));
      b.copy(gate_b.slice_rows(from, total), st.pend_gate_b.view().slice_rows(0, rest));
    }
  }
  st.pending = static_cast<int>(rest);
}

}  // namespace

bool compressor_stage(CopyBatch& copies, int m, bool csa, const CompressorRows& rows, int64_t r0,
                      int64_t S, CompressorState& st) {
  const int64_t p0 = st.pending, total = st.pending + S;
  if (total > m) return false;
  auto seg = [&](const Tensor& t) { return t.view().slice_rows(r0, r0 + S); };
  copies.add(seg(rows.kv_a), st.pend_kv_a.view().slice_rows(p0, total));
  copies.add(seg(rows.gate_a), st.pend_gate_a.view().slice_rows(p0, total));
  if (csa) {
    copies.add(seg(rows.kv_b), st.pend_kv_b.view().slice_rows(p0, total));
    copies.add(seg(rows.gate_b), st.pend_gate_b.view().slice_rows(p0, total));
  }
  st.pending = static_cast<int>(total);
  return true;
}

void compressor_close_full_windows(Backend& b, const CompressorWeights& w, int m, int d, bool csa,
                                   float norm_eps, const TensorView& inv_freq,
                                   std::span<CompressorState* const> states) {
  std::vector<CompressorState*> full;
  for (CompressorState* st : states)
    if (st->pending >= m) full.push_back(st);
  if (full.empty()) return;
  // Each full window holds exactly m pending rows (staged rows never pass the window).
  const int64_t n = static_cast<int64_t>(full.size()), S = csa ? 2 * m : m;
  // Window i of the batch: CSA pools series a of the sequence's previous window (zeros and -inf
  // gates before its first) then series b of this one; HCA pools its series a.
  Tensor kv3 = b.empty({n, S, d}), g3 = b.empty({n, S, d});
  Tensor no_kv, no_gate;
  CopyBatch gather;
  for (int64_t i = 0; i < n; ++i) {
    const CompressorState& st = *full[i];
    const TensorView kv = kv3.view().reshape({n * S, d}).slice_rows(i * S, (i + 1) * S);
    const TensorView g = g3.view().reshape({n * S, d}).slice_rows(i * S, (i + 1) * S);
    if (!csa) {
      gather.add(st.pend_kv_a, kv);
      gather.add(st.pend_gate_a, g);
      continue;
    }
    if (st.has_prev) {
      gather.add(st.prev_kv_a, kv.slice_rows(0, m));
      gather.add(st.prev_gate_a, g.slice_rows(0, m));
    } else {
      if (!no_kv.defined()) {
        no_kv = constant_rows(b, m, d, 0.0f);
        no_gate = constant_rows(b, m, d, -std::numeric_limits<float>::infinity());
      }
      gather.add(no_kv, kv.slice_rows(0, m));
      gather.add(no_gate, g.slice_rows(0, m));
    }
    gather.add(st.pend_kv_b, kv.slice_rows(m, 2 * m));
    gather.add(st.pend_gate_b, g.slice_rows(m, 2 * m));
  }
  gather.flush(b);
  Tensor pooled = b.empty({n, d}), entries = b.empty({n, d});
  b.window_pool(kv3, g3, w.slot_bias, pooled);
  b.rms_norm(pooled, w.norm, norm_eps, entries);
  std::vector<int32_t> pos(n);
  for (int64_t i = 0; i < n; ++i) pos[i] = static_cast<int32_t>(full[i]->entries.rows() * m);
  b.rope(entries.view().reshape({n, 1, d}), upload_i32(b, pos), inv_freq, false);
  // Each entry appended to its sequence's store and (CSA) series a kept as the next carry.
  CopyBatch store;
  for (int64_t i = 0; i < n; ++i) {
    CompressorState& st = *full[i];
    store.add(entries.view().slice_rows(i, i + 1), st.entries.extend(b, 1));
    if (csa) {
      store.add(st.pend_kv_a, st.prev_kv_a);
      store.add(st.pend_gate_a, st.prev_gate_a);
      st.has_prev = true;
    }
    st.pending = 0;
  }
  store.flush(b);
}

void compressor_update(Backend& b, const CompressorWeights& w, int m, int d, bool csa,
                       float norm_eps, const CompressorRows& rows, int64_t r0, int64_t S,
                       const TensorView& inv_freq, CompressorState& st) {
  CopyBatch copies;
  if (compressor_stage(copies, m, csa, rows, r0, S, st)) {
    copies.flush(b);
    CompressorState* one = &st;
    compressor_close_full_windows(b, w, m, d, csa, norm_eps, inv_freq,
                                  std::span<CompressorState* const>(&one, 1));
    return;
  }
  // More rows than the unfinished window takes: pending rows and new rows joined.
  auto seg = [&](const Tensor& t) { return t.view().slice_rows(r0, r0 + S); };
  const int64_t total = st.pending + S;
  Tensor kv_a = join(b, st.pend_kv_a, st.pending, seg(rows.kv_a), d);
  Tensor gate_a = join(b, st.pend_gate_a, st.pending, seg(rows.gate_a), d);
  Tensor kv_b, gate_b;
  if (csa) {
    kv_b = join(b, st.pend_kv_b, st.pending, seg(rows.kv_b), d);
    gate_b = join(b, st.pend_gate_b, st.pending, seg(rows.gate_b), d);
  }
  const TensorView none;
  pool_windows(b, w, m, d, csa, norm_eps, inv_freq, kv_a.view(), gate_a.view(),
               csa ? kv_b.view() : none, csa ? gate_b.view() : none, total, st);
}

}  // namespace deepinfer::deepseek_v4
