// Shared by the CPU and CUDA golden tests: the fixtures under tests/data/golden (made by
// tools/golden/make_fixtures.py with transformers) and the comparisons against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/npy.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::golden {

// DEEPINFER_SOURCE_DIR in the environment overrides the compiled-in source tree, so a binary
// built elsewhere can run next to a copy of the repository.
inline std::string dir() {
  const char* env = std::getenv("DEEPINFER_SOURCE_DIR");
  return std::string(env && *env ? env : DEEPINFER_SOURCE_DIR) + "/tests/data/golden/";
}

struct Fixture {
  std::vector<int32_t> ids;
  std::vector<int32_t> greedy_prompt, greedy_continuation;
  NpyArray prefill, decode;  // reference logits [S, V]: whole prompt / token by token
};

inline Fixture load_fixture(const std::string& name) {
  Fixture f;
  std::ifstream in(dir() + name + "/fixture.json");
  const auto j = nlohmann::json::parse(in);
  f.ids = j["input_ids"].get<std::vector<int32_t>>();
  const int n = j["greedy_prompt_len"].get<int>();
  f.greedy_prompt.assign(f.ids.begin(), f.ids.begin() + n);
  f.greedy_continuation = j["greedy_continuation"].get<std::vector<int32_t>>();
  f.prefill = read_npy(dir() + name + "/logits_prefill.npy");
  f.decode = read_npy(dir() + name + "/logits_decode.npy");
  return f;
}

// Runs the prompt through a fresh state `chunk` tokens at a time (0 = all at once).
inline std::vector<float> run(deepseek_v4::Model& model, const std::vector<int32_t>& ids,
                              int64_t chunk) {
  const int64_t S = ids.size(), V = model.config().vocab_size;
  if (chunk == 0) chunk = S;
  std::vector<float> out(S * V);
  auto state = model.new_state();
  for (int64_t b = 0; b < S; b += chunk) {
    const int64_t e = std::min(S, b + chunk);
    Tensor l = model.forward(std::span<const int32_t>(ids.data() + b, e - b), state);
    std::copy_n(l.data_as<float>(), (e - b) * V, out.data() + b * V);
  }
  return out;
}

// One sequence of a batched run: the first `len` fixture tokens fed `chunk` at a time.
struct BatchedSeq {
  int64_t len = 0, chunk = 1;
  std::vector<float> logits;  // [len, V] once run_batched returns
};

// Feeds every sequence's chunks together through forward_batch, step after step (sequences of
// different lengths and chunk sizes share each forward), collecting each one's logits.
inline void run_batched(deepseek_v4::Model& model, const std::vector<int32_t>& ids,
                        std::vector<BatchedSeq>& seqs) {
  const int64_t V = model.config().vocab_size;
  std::vector<deepseek_v4::SequenceState> states;
  std::vector<int64_t> fed(seqs.size(), 0);
  for (size_t i = 0; i < seqs.size(); ++i) states.push_back(model.new_state());
  for (;;) {
    std::vector<deepseek_v4::Model::BatchItem> items;
    std::vector<size_t> order;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (fed[i] == seqs[i].len) continue;
      const int64_t n = std::min(seqs[i].chunk, seqs[i].len - fed[i]);
      items.push_back({std::span<const int32_t>(ids.data() + fed[i], n), &states[i],
                       deepseek_v4::Model::BatchItem::Logits::kAll});
      order.push_back(i);
      fed[i] += n;
    }
    if (items.empty()) return;
    Tensor l = model.forward_batch(items);
    int64_t row = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      const int64_t n = items[k].ids.size();
      auto& out = seqs[order[k]].logits;
      out.insert(out.end(), l.data_as<float>() + row * V, l.data_as<float>() + (row + n) * V);
      row += n;
    }
  }
}

// ||a - ref|| / ||ref||; infinite for a size mismatch or a non-finite value.
inline double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  if (a.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

// Largest |a - ref| over row r of [*, V] logits.
inline double row_max_abs_err(const std::vector<float>& a, const std::vector<float>& ref, int64_t V,
                              size_t r) {
  double m = 0;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, std::fabs(double(a[r * V + v]) - ref[r * V + v]));
  return m;
}

// A row's argmax (first of equal maxima), its runner-up and the margin between them.
struct Top2 {
  int64_t top = 0, second = 0;
  double margin = 0;
};
inline Top2 top2(const float* y, int64_t V) {
  Top2 t;
  t.top = std::max_element(y, y + V) - y;
  t.second = t.top == 0 ? 1 : 0;
  for (int64_t v = 0; v < V; ++v)
    if (v != t.top && y[v] > y[t.second]) t.second = v;
  t.margin = y[t.top] - y[t.second];  // in float, as the checks always took it
  return t;
}

// Rows whose reference top-2 margin exceeds both `margin` and the row's own error (largest
// |a - ref|: "identical where the reference margin exceeds the error") must have the same argmax;
// returns how many do not.
inline int argmax_mismatches(const std::vector<float>& a, const std::vector<float>& ref, int64_t V,
                             double margin) {
  int bad = 0;
  for (size_t r = 0; r < a.size() / V; ++r) {
    const Top2 y = top2(ref.data() + r * V, V);
    const int64_t ax = top2(a.data() + r * V, V).top;
    if (y.margin > margin && y.margin > row_max_abs_err(a, ref, V, r) && ax != y.top) ++bad;
  }
  return bad;
}

// Rows whose own relative L2 error exceeds `tol`: where a near-tie routing / indexer decision
// inside the model went the other way, the whole row moves (by ~10-20% on the tiny fixtures).
inline int rows_off_by_more_than(const std::vector<float>& a, const std::vector<float>& ref,
                                 int64_t V, double tol) {
  int n = 0;
  for (size_t r = 0; r < a.size() / V; ++r) {
    const std::vector<float> x(a.begin() + r * V, a.begin() + (r + 1) * V);
    const std::vector<float> y(ref.begin() + r * V, ref.begin() + (r + 1) * V);
    if (rel_l2(x, y) > tol) ++n;
  }
  return n;
}

// One line per row whose argmax differs where the reference margin exceeds `margin`: the
// reference's top two and their margin, what `a` gave those tokens and its own pick, and the
// row's error (relative L2, largest |a - ref|; a row whose error exceeds its margin is not
// counted by argmax_mismatches).
inline std::string describe_mismatches(const std::vector<float>& a, const std::vector<float>& ref,
                                       int64_t V, double margin) {
  std::string out;
  for (size_t r = 0; r < a.size() / V; ++r) {
    const std::vector<float> x(a.begin() + r * V, a.begin() + (r + 1) * V);
    const std::vector<float> y(ref.begin() + r * V, ref.begin() + (r + 1) * V);
    const int64_t ax = top2(x.data(), V).top;
    const Top2 t = top2(y.data(), V);
    const int64_t ay = t.top, sy = t.second;
    if (!(t.margin > margin) || ax == ay) continue;
    const double max_abs = row_max_abs_err(a, ref, V, r);
    char line[320];
    std::snprintf(line, sizeof line,
                  "row %zu: ref top %lld (%.4f), second %lld (%.4f), margin %.4f; got %.4f / %.4f "
                  "there, picks %lld (%.4f ref %.4f); row rel L2 %.3e, max |err| %.4f\n",
                  r, static_cast<long long>(ay), y[ay], static_cast<long long>(sy), y[sy], t.margin,
                  x[ay], x[sy], static_cast<long long>(ax), x[ax], y[ax], rel_l2(x, y), max_abs);
    out += line;
  }
  return out;
}

}  // namespace deepinfer::golden
