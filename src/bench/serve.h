// `deepinfer bench --mode serve`: a stream of requests through the offline Engine, with
// `vllm bench serve`'s metrics and definitions:
//   TTFT  time from a request's arrival to its first output token;
//   TPOT  (E2EL - TTFT) / (output tokens - 1) per request with more than one output token;
//   ITL   every gap between successive output tokens of a request, pooled over requests;
//   E2EL  time from arrival to the last output token;
// reported as mean, median, p99 (and p90) in ms, with request / output / total token throughput,
// the peak output token throughput (busiest 1 s bucket) and the peak number of concurrent
// requests.
//
// Arrivals are a Poisson process of rate `request_rate` (exponential gaps from a SplitMix64
// stream of the seed, each request's gap then its prompt tokens; an infinite
// rate sends every request at t = 0). A request arrives at its scheduled time even while a step
// is running: the engine takes it in after that step, and the wait counts in its TTFT, as it
// would against a server. The engine returns a request's output after every step that gave it a
// token, so each token is stamped with the steady-clock time its step returned.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::bench {

struct ServeOptions {
  int num_prompts = 32;
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second
  int input_len = 128;
  int output_len = 32;
  uint64_t seed = 0;
};

struct RequestTiming {
  double arrival = 0;               // seconds since the benchmark start
  std::vector<double> token_times;  // per output token
  int input_len = 0;
  bool ok = false;
  std::string error;
};

struct ServeResult {
  ServeOptions options;
  double duration = 0;  // start to the last completion
  std::vector<RequestTiming> requests;
  int64_t engine_steps = 0;
  int peak_concurrency = 0;
};

ServeResult run_serve(Engine& engine, const ServeOptions& options);

// The metrics (seconds converted to ms as vLLM prints them).
nlohmann::json serve_json(const ServeResult& result);
// vLLM's "Serving Benchmark Result" block.
std::string serve_report(const ServeResult& result);

}  // namespace deepinfer::bench
