// `deepinfer make-random`: a random DeepSeek-V4 checkpoint of a preset's shapes (tiny, v4-flash,
// v4-pro), streamed to sharded safetensors, loadable like any checkpoint.
#include <cstdio>
#include <sstream>

#include "api/cli/command.h"
#include "api/cli/parse.h"
#include "bench/random_checkpoint.h"
#include "bench/roofline.h"
#include "core/status.h"
#include "deepinfer/llm.h"
#include "io/model_config.h"

namespace deepinfer::cli {
namespace {

struct MakeRandomArgs {
  std::string preset = "tiny", dtype = "bf16", out, layer_types, tokenizer_from;
  int num_layers = 0, num_experts = 0, threads = 0;
  uint64_t seed = 0;
  double shard_gb = 3.0;
};

int run_make_random(const MakeRandomArgs& a) {
  bench::RandomCheckpointOptions o;
  o.preset.preset = a.preset;
  o.preset.num_layers = a.num_layers;
  o.preset.num_experts = a.num_experts;
  o.preset.layer_types = split_list(a.layer_types);
  o.dtype = bench::parse_checkpoint_dtype(a.dtype);
  o.seed = a.seed;
  o.out_dir = a.out;
  DI_CHECK(a.shard_gb > 0, ErrorCode::kInvalidArgument, "--shard-size-gb must be positive");
  o.shard_bytes = static_cast<int64_t>(a.shard_gb * 1e9);
  o.tokenizer_from = a.tokenizer_from.empty() ? default_model_dir() : a.tokenizer_from;
  o.num_threads = a.threads;
  o.log = [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  };
  const ModelConfig cfg = parse_model_config(bench::preset_config(o.preset).dump(), a.preset);
  const bench::ParamCounts pc = bench::param_counts(cfg);
  std::fprintf(stderr,
               "deepinfer make-random: preset %s, %d layers, %d experts (top-%d), dtype %s, seed "
               "%llu: %.3fB parameters (%.3fB active per token) -> %s\n",
               a.preset.c_str(), cfg.num_hidden_layers, cfg.n_routed_experts,
               cfg.num_experts_per_tok, a.dtype.c_str(), static_cast<unsigned long long>(a.seed),
               pc.total / 1e9, pc.active_per_token / 1e9, a.out.c_str());
  const bench::RandomCheckpointResult r = bench::write_random_checkpoint(o);
  std::printf("wrote %s: %lld tensors, %.3f GB in %zu shard(s), %.1f s (%.0f MB/s)\n",
              a.out.c_str(), static_cast<long long>(r.num_tensors), r.bytes / 1e9, r.shards.size(),
              r.seconds, r.bytes / 1e6 / std::max(r.seconds, 1e-9));
  if (r.tokenizer_copied) {
    std::printf("tokenizer: copied from %s\n", o.tokenizer_from.c_str());
  } else {
    std::printf("tokenizer: %s\n", r.tokenizer_note.c_str());
  }
  return 0;
}

CommandRegistrar reg(
    "make-random",
    "Write a random DeepSeek-V4 checkpoint (tiny / v4-flash / v4-pro shapes) for benchmarks",
    [](CLI::App& sub) -> CommandFn {
      auto a = std::make_shared<MakeRandomArgs>();
      sub.add_option("--preset", a->preset, "tiny | v4-flash | v4-pro")
          ->check(CLI::IsMember({"tiny", "v4-flash", "v4-pro"}));
      sub.add_option("--num-layers", a->num_layers, "layers (default: the preset's)");
      sub.add_option("--num-experts", a->num_experts,
                     "routed experts per layer (default: the preset's; top-k is capped at it)");
      sub.add_option("--layer-types", a->layer_types,
                     "comma-separated attention type per layer: sliding, csa, hca (default: the "
                     "preset's schedule)");
      sub.add_option("--dtype", a->dtype, "bf16 | fp8 | mxfp4-experts")
          ->check(CLI::IsMember({"bf16", "fp8", "mxfp4-experts"}));
      sub.add_option("--seed", a->seed, "RNG seed (the values depend only on it)");
      sub.add_option("--out", a->out, "output checkpoint directory")->required();
      sub.add_option("--shard-size-gb", a->shard_gb, "shard size limit in GB (default 3)");
      sub.add_option("--threads", a->threads, "generator threads (default: all cores)");
      sub.add_option("--tokenizer-from", a->tokenizer_from,
                     "checkpoint whose tokenizer is copied when the vocab matches (default: the "
                     "bundled model)");
      return [a] { return run_make_random(*a); };
    });

}  // namespace
}  // namespace deepinfer::cli
