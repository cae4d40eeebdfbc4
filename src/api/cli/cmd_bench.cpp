// `deepinfer bench`: prefill / decode step benchmarks against the roofline, and serve-style
// latency (TTFT, TPOT, ITL, E2EL) through the engine. See src/bench/runner.h and serve.h.
// Prefill / decode run on a checkpoint (--model) or on random weights generated on the device
// (--random-weights with make-random's preset flags, src/bench/random_weights.h), with context
// prefilled or set synthetically (--synthetic-context).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "api/cli/command.h"
#include "api/cli/parse.h"
#include "bench/machine.h"
#include "bench/random_checkpoint.h"
#include "bench/random_weights.h"
#include "bench/roofline.h"
#include "bench/runner.h"
#include "bench/serve.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/backend_factory.h"
#include "engine/engine.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::cli {
namespace {

using json = nlohmann::json;

struct BenchArgs {
  std::string model, mode = "decode", device = "cpu", json_out, decode_num_requests = "1";
  int64_t prefill_batch_size = 2048, prefill_seqs = 1, context_length = 0, fill_chunk = 2048;
  int output_len = 0, input_len = 128, num_prompts = 32, warmup_steps = -1, num_steps = 60;
  int max_num_seqs = 256;
  int64_t max_prefill_tokens = 8192;
  double request_rate = INFINITY, peak_gbs = 0, peak_tflops = 0;
  uint64_t seed = 0;
  bool print_steps = false;
  // Random weights instead of --model.
  bool random_weights = false, synthetic_context = false, overlap = false, mxfp4_experts = false;
  std::string preset = "tiny", layer_types;
  int num_layers = 0, num_experts = 0;
  uint64_t weight_seed = 0;
};

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      const long long n = std::stoll(item, &used);
      DI_CHECK(used == item.size() && n > 0, ErrorCode::kInvalidArgument, "bad");
      v.push_back(n);
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidArgument,
           "--decode-num-requests: '{}' is not a positive integer (expected e.g. 1,4,16)", item);
    }
  }
  DI_CHECK(!v.empty(), ErrorCode::kInvalidArgument, "--decode-num-requests is empty");
  return v;
}

// The 1-minute load average (other work on the machine skews CPU numbers); -1 if unknown.
double load_average() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

json config_json(const ModelConfig& c) {
  const bench::ParamCounts p = bench::param_counts(c);
  return json{{"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"num_hidden_layers", c.num_hidden_layers},
              {"n_routed_experts", c.n_routed_experts},
              {"num_experts_per_tok", c.num_experts_per_tok},
              {"params_total", p.total},
              {"params_active_per_token", p.active_per_token}};
}

void write_json(const std::string& path, const json& j) {
  if (path.empty()) return;
  std::ofstream out(path);
  DI_CHECK(out.good(), ErrorCode::kNotFound, "--json-out: cannot write '{}'", path);
  out << j.dump(2) << "\n";
  std::fprintf(stderr, "wrote %s\n", path.c_str());
}

int run_serve_mode(const BenchArgs& a, json doc) {
  DI_CHECK(!a.random_weights && !a.synthetic_context, ErrorCode::kInvalidArgument,
           "--mode serve runs the engine on a checkpoint: --random-weights and "
           "--synthetic-context are for prefill / decode");
  DI_CHECK(!a.model.empty(), ErrorCode::kInvalidArgument, "--mode serve needs --model DIR");
  EngineConfig cfg;
  cfg.model = a.model;
  cfg.device = a.device;
  cfg.show_progress = false;
  cfg.max_num_seqs = a.max_num_seqs;
  cfg.max_prefill_tokens = a.max_prefill_tokens;
  Engine engine(cfg);
  bench::ServeOptions o;
  o.num_prompts = a.num_prompts;
  o.request_rate = a.request_rate;
  o.input_len = a.input_len;
  o.output_len = a.output_len > 0 ? a.output_len : 32;
  o.seed = a.seed;
  std::fprintf(stderr, "serve: %d prompts, %d in / %d out tokens, rate %s req/s\n", o.num_prompts,
               o.input_len, o.output_len,
               std::isinf(o.request_rate) ? "inf" : fmt::format("{:g}", o.request_rate).c_str());
  const bench::ServeResult r = bench::run_serve(engine, o);
  std::printf("%s", bench::serve_report(r).c_str());
  doc["config"] = config_json(engine.model_config());
  doc["serve"] = bench::serve_json(r);
  write_json(a.json_out, doc);
  return 0;
}

int run_bench(const BenchArgs& a) {
  DI_CHECK(a.mode == "prefill" || a.mode == "decode" || a.mode == "serve",
           ErrorCode::kInvalidArgument, "--mode: '{}' is not one of prefill, decode, serve",
           a.mode);
  DI_CHECK(a.model.empty() || !a.random_weights, ErrorCode::kInvalidArgument,
           "give either --model DIR or --random-weights, not both");
  DI_CHECK(!a.model.empty() || a.random_weights || a.mode == "serve", ErrorCode::kInvalidArgument,
           "give --model DIR (a checkpoint) or --random-weights (with --preset ...)");
  bench::PresetOptions preset;
  preset.preset = a.preset;
  preset.num_layers = a.num_layers;
  preset.num_experts = a.num_experts;
  preset.layer_types = split_list(a.layer_types);
  json doc{{"tool", "deepinfer bench"},
           {"mode", a.mode},
           {"model", a.random_weights ? "random:" + a.preset : a.model},
           {"device", a.device},
           {"threads", ThreadPool::global().size()},
           {"load_avg_1m", load_average()},
           {"seed", a.seed}};
  if (a.mode == "serve") return run_serve_mode(a, doc);

  auto backend = make_backend(a.device);
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<deepseek_v4::Model> model;
  if (a.random_weights) {
    model = bench::make_random_model(preset, a.weight_seed, *backend, a.mxfp4_experts);
    const ModelConfig& c = model->config();
    std::fprintf(stderr,
                 "random weights on %s: preset %s, %d layers, %d experts (top-%d), seed %llu, "
                 "%.3fB parameters, generated in %.1f s\n",
                 a.device.c_str(), a.preset.c_str(), c.num_hidden_layers, c.n_routed_experts,
                 c.num_experts_per_tok, static_cast<unsigned long long>(a.weight_seed),
                 bench::param_counts(c).total / 1e9,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    doc["weights"] = {{"source", "random"},
                      {"preset", a.preset},
                      {"num_layers", c.num_hidden_layers},
                      {"num_experts", c.n_routed_experts},
                      {"layer_types", a.layer_types},
                      {"seed", a.weight_seed},
                      {"mxfp4_experts", a.mxfp4_experts}};
  } else {
    model = deepseek_v4::Model::load(a.model, *backend);
    std::fprintf(stderr, "loaded %s in %.1f s\n", a.model.c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    doc["weights"] = {{"source", "checkpoint"}};
  }
  doc["synthetic_context"] = a.synthetic_context;
  const bench::ProbedPeaks peaks = bench::machine_peaks(*backend, a.peak_gbs, a.peak_tflops);
  std::fprintf(stderr, "peaks: %s\n", peaks.description.c_str());
  bench::BenchSetup setup;
  setup.peaks = peaks.peaks;
  setup.dtypes = bench::backend_dtypes(*backend);
  // Experts kept in MXFP4 (a checkpoint's, or --mxfp4-experts) stream 4.25 bits a weight.
  const bool experts_mxfp4 =
      !model->weights().layers.empty() && model->weights().layers.front().moe.s1.defined();
  if (experts_mxfp4) setup.dtypes.expert = 4.25 / 8;
  std::fprintf(stderr, "routed experts: %s\n",
               experts_mxfp4 ? "MXFP4 (4.25 bits a weight)" : "the backend's weight dtype");
  setup.seed = a.seed;
  setup.fill_chunk_tokens = a.fill_chunk;
  setup.synthetic_context = a.synthetic_context;
  bench::BenchRunner runner(*model, setup);

  DI_CHECK(!a.overlap || a.mode == "decode", ErrorCode::kInvalidArgument,
           "--overlap is for --mode decode");
  std::vector<bench::RunResult> runs;
  if (a.mode == "prefill") {
    const int warmup = a.warmup_steps >= 0 ? a.warmup_steps : 5;
    std::fprintf(stderr,
                 "prefill: %lld tokens/step over %lld seq(s), context %lld%s, %d warm-up + %d "
                 "steps\n",
                 static_cast<long long>(a.prefill_batch_size),
                 static_cast<long long>(a.prefill_seqs), static_cast<long long>(a.context_length),
                 a.synthetic_context ? " (synthetic)" : "", warmup, a.num_steps);
    runs.push_back(runner.run_prefill(a.prefill_batch_size, a.prefill_seqs, a.context_length,
                                      warmup, a.num_steps));
  } else {
    const int warmup = a.warmup_steps >= 0 ? a.warmup_steps : 50;
    const int steps = a.output_len > 0 ? a.output_len - warmup : a.num_steps;
    DI_CHECK(steps > 0, ErrorCode::kInvalidArgument,
             "--output-len {} leaves no logged steps after {} warm-up steps", a.output_len, warmup);
    for (int64_t n : parse_counts(a.decode_num_requests)) {
      std::fprintf(stderr, "decode: %lld request(s), context %lld%s, %d warm-up + %d steps\n",
                   static_cast<long long>(n), static_cast<long long>(a.context_length),
                   a.synthetic_context ? " (synthetic)" : "", warmup, steps);
      runs.push_back(runner.run_decode(n, a.context_length, warmup, steps, a.overlap));
      std::fprintf(stderr, "  context fill %.2f s\n", runs.back().fill_seconds);
    }
  }
  for (const auto& r : runs)
    if (a.print_steps) std::printf("%s\n", bench::steps_table(r, peaks.peaks).c_str());
  std::printf("%s", bench::summary_table(runs, peaks.peaks).c_str());

  doc["config"] = config_json(model->config());
  doc["timer"] = runner.timer().name();
  doc["machine"] = {{"peak_gbs", peaks.peaks.bytes_per_s / 1e9},
                    {"peak_tflops", peaks.peaks.flops_per_s / 1e12},
                    {"peaks_from", peaks.description}};
  doc["dtypes"] = {
      {"weight_bytes", setup.dtypes.weight},
      {"expert_weight_bytes", setup.dtypes.expert > 0 ? setup.dtypes.expert : setup.dtypes.weight},
      {"param_bytes", setup.dtypes.param},
      {"state_bytes", setup.dtypes.state}};
  json jr = json::array();
  for (const auto& r : runs) jr.push_back(bench::run_json(r, peaks.peaks));
  doc["runs"] = std::move(jr);
  write_json(a.json_out, doc);
  return 0;
}

CommandRegistrar reg(
    "bench",
    "Benchmark prefill / decode steps against the roofline, or serve latency (TTFT, TPOT, ITL)",
    [](CLI::App& sub) -> CommandFn {
      auto a = std::make_shared<BenchArgs>();
      sub.add_option("--model", a->model,
                     "checkpoint directory (HF layout); or use --random-weights");
      sub.add_option("--mode", a->mode, "prefill | decode | serve (default decode)")
          ->check(CLI::IsMember({"prefill", "decode", "serve"}));
      sub.add_option("--device", a->device, "cpu (default), cuda or cuda:N");
      sub.add_option("--prefill-batch-size", a->prefill_batch_size,
                     "prefill: new tokens per step (default 2048)");
      sub.add_option("--prefill-seqs", a->prefill_seqs,
                     "prefill: sequences sharing a step's tokens (default 1)");
      sub.add_option("--decode-num-requests", a->decode_num_requests,
                     "decode: concurrent requests; a comma list sweeps (default 1)");
      sub.add_option("--context-length", a->context_length,
                     "tokens of state each sequence holds before the timed steps, filled untimed "
                     "(prefill: refilled for the fresh sequences of every step; default 0)");
      sub.add_option("--output-len", a->output_len,
                     "decode: steps per request incl. warm-up (default warm-up + --num-steps); "
                     "serve: output tokens per request (default 32)");
      sub.add_option("--warmup-steps", a->warmup_steps,
                     "untimed steps first (default 5 prefill, 50 decode)");
      sub.add_option("--num-steps", a->num_steps, "logged steps (default 60)");
      sub.add_option("--fill-chunk", a->fill_chunk,
                     "tokens per forward when filling context untimed (default 2048)");
      sub.add_flag("--synthetic-context", a->synthetic_context,
                   "prefill / decode: set each sequence's state to --context-length tokens "
                   "directly (full ring, compressed entries, indexer keys, pending windows with "
                   "random values) instead of prefilling them");
      sub.add_flag("--overlap", a->overlap,
                   "decode: queue each step while the last one runs, as the engine does with "
                   "zero-overhead scheduling (greedy tokens from the device sampler, read there by "
                   "the next step; step time: one device "
                   "interval over the logged steps, divided by their number; mode decode/o)");
      CLI::Option* rw =
          sub.add_flag("--random-weights", a->random_weights,
                       "prefill / decode: random weights of a make-random preset generated on the "
                       "device instead of --model (no files)");
      sub.add_option("--preset", a->preset,
                     "--random-weights: tiny | v4-flash | v4-pro (default tiny)")
          ->check(CLI::IsMember({"tiny", "v4-flash", "v4-pro"}))
          ->needs(rw);
      sub.add_option("--num-layers", a->num_layers,
                     "--random-weights: layers (default: the preset's)")
          ->needs(rw);
      sub.add_option("--num-experts", a->num_experts,
                     "--random-weights: routed experts per layer (default: the preset's; top-k "
                     "is capped at it)")
          ->needs(rw);
      sub.add_option("--layer-types", a->layer_types,
                     "--random-weights: comma-separated attention type per layer: sliding, csa, "
                     "hca (default: the preset's schedule)")
          ->needs(rw);
      sub.add_option("--weight-seed", a->weight_seed,
                     "--random-weights: seed of the weight values (default 0)")
          ->needs(rw);
      sub.add_flag("--mxfp4-experts", a->mxfp4_experts,
                   "--random-weights: routed experts kept in MXFP4 (random e2m1 codes, one "
                   "scale a matrix) where the backend takes them, as a V4 checkpoint's are "
                   "with DEEPINFER_MXFP4_EXPERTS")
          ->needs(rw);
      sub.add_option("--input-len", a->input_len, "serve: prompt tokens per request (default 128)");
      sub.add_option("--num-prompts", a->num_prompts, "serve: requests (default 32)");
      sub.add_option("--request-rate", a->request_rate,
                     "serve: Poisson arrival rate in requests/s (default inf: all at once)");
      sub.add_option("--max-num-seqs", a->max_num_seqs,
                     "serve: engine decode batch limit (default 256)");
      sub.add_option("--max-prefill-tokens", a->max_prefill_tokens,
                     "serve: engine prefill tokens per step (default 8192)");
      sub.add_option("--peak-gbs", a->peak_gbs,
                     "memory bandwidth peak for the roofline in GB/s (default: memcpy probe)");
      sub.add_option("--peak-tflops", a->peak_tflops,
                     "compute peak for the roofline in TFLOP/s (default: GEMM probe)");
      sub.add_option("--seed", a->seed, "seed of the random prompt tokens");
      sub.add_option("--json-out", a->json_out, "write every step and the summaries as JSON");
      sub.add_flag("--print-steps", a->print_steps, "print one table row per logged step");
      return [a] { return run_bench(*a); };
    });

}  // namespace
}  // namespace deepinfer::cli
