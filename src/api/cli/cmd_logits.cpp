// `deepinfer logits`: fp32 logits of a token-id prompt, fed whole or in chunks through the state.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "api/cli/command.h"
#include "api/cli/parse.h"
#include "io/npy.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cli {
namespace {

struct LogitsArgs {
  std::string model;
  std::string input_ids;
  std::string out;
  int64_t chunk = 0;
};

int run_logits(const LogitsArgs& a) {
  const std::vector<int32_t> ids = parse_id_list(a.input_ids, "--input-ids");
  DI_CHECK(a.chunk >= 0, ErrorCode::kInvalidArgument, "--chunk must be >= 0 (got {})", a.chunk);
  auto backend = make_cpu_backend();
  const auto t0 = std::chrono::steady_clock::now();
  auto model = deepseek_v4::Model::load(a.model, *backend);
  const auto t1 = std::chrono::steady_clock::now();
  const int64_t S = static_cast<int64_t>(ids.size());
  const int64_t V = model->config().vocab_size;
  std::vector<float> logits(S * V);
  auto state = model->new_state();
  const int64_t chunk = a.chunk == 0 ? S : a.chunk;
  for (int64_t begin = 0; begin < S; begin += chunk) {
    const int64_t end = std::min(S, begin + chunk);
    Tensor out = model->forward(std::span<const int32_t>(ids.data() + begin, end - begin), state);
    std::copy_n(out.data_as<float>(), (end - begin) * V, logits.data() + begin * V);
  }
  const auto t2 = std::chrono::steady_clock::now();
  write_npy_f32(a.out, logits.data(), {S, V});
  auto secs = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::fprintf(stderr,
               "deepinfer logits: %lld tokens (chunk %lld), load %.2f s, forward %.3f s -> %s\n",
               static_cast<long long>(S), static_cast<long long>(chunk), secs(t1 - t0),
               secs(t2 - t1), a.out.c_str());
  // The five most likely next tokens after the prompt, as a quick human check.
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  const float* last = logits.data() + (S - 1) * V;
  const int64_t k = std::min<int64_t>(5, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t x, int32_t y) { return last[x] > last[y]; });
  std::fprintf(stderr, "next-token top-%lld:", static_cast<long long>(k));
  for (int64_t i = 0; i < k; ++i) std::fprintf(stderr, " %d (%.3f)", order[i], last[order[i]]);
  std::fprintf(stderr, "\n");
  return 0;
}

CommandRegistrar reg(
    "logits", "Compute fp32 logits [seq_len, vocab] of a prompt and write .npy",
    [](CLI::App& sub) -> CommandFn {
      auto a = std::make_shared<LogitsArgs>();
      sub.add_option("--model", a->model, "checkpoint directory (HF layout)")->required();
      sub.add_option("--input-ids", a->input_ids, "comma-separated token ids, e.g. 5,17,42")
          ->required();
      sub.add_option("--out", a->out, "output .npy path")->required();
      sub.add_option("--chunk", a->chunk,
                     "feed the prompt N tokens at a time (1 = token by token; "
                     "0 = all at once)");
      return [a] { return run_logits(*a); };
    });

}  // namespace
}  // namespace deepinfer::cli
