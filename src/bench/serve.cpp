#include "bench/serve.h"

#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "bench/splitmix.h"
#include "bench/stats.h"
#include "core/status.h"

namespace deepinfer::bench {

using json = nlohmann::json;

ServeResult run_serve(Engine& engine, const ServeOptions& o) {
  DI_CHECK(o.num_prompts > 0, ErrorCode::kInvalidArgument, "--num-prompts must be positive");
  DI_CHECK(o.input_len > 0 && o.output_len > 0, ErrorCode::kInvalidArgument,
           "--input-len and --output-len must be positive");
  DI_CHECK(o.request_rate > 0, ErrorCode::kInvalidArgument,
           "--request-rate must be positive (inf: all at once)");
  ServeResult res;
  res.options = o;
  res.requests.resize(static_cast<size_t>(o.num_prompts));
  // Per request: its gap (after the first, finite rates only), then its prompt tokens.
  SplitMix64 rng(o.seed);
  const auto vocab = static_cast<uint64_t>(engine.model_config().vocab_size);
  std::vector<std::vector<int32_t>> prompts(res.requests.size());
  double t = 0;
  for (size_t i = 0; i < res.requests.size(); ++i) {
    if (!std::isinf(o.request_rate) && i > 0) t += rng.exponential(o.request_rate);
    res.requests[i].arrival = t;
    res.requests[i].input_len = o.input_len;
    for (int j = 0; j < o.input_len; ++j) prompts[i].push_back(rng.token(vocab));
  }

  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = o.output_len;
  params.ignore_eos = true;
  const auto t0 = std::chrono::steady_clock::now();
  auto now = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::unordered_map<std::string, size_t> by_id;
  size_t next = 0, done = 0;
  int in_flight = 0;
  while (done < res.requests.size()) {
    const double tnow = now();
    while (next < res.requests.size() && res.requests[next].arrival <= tnow) {
      EngineRequest req;
      req.request_id = fmt::format("bench-{}", next);
      req.prompt_token_ids = prompts[next];
      req.params = params;
      try {
        by_id[engine.add_request(std::move(req))] = next;
        ++in_flight;
      } catch (const Error& e) {
        res.requests[next].error = e.what();
        ++done;
      }
      ++next;
    }
    res.peak_concurrency = std::max(res.peak_concurrency, in_flight);
    if (!engine.has_unfinished_requests()) {
      if (next < res.requests.size())
        std::this_thread::sleep_for(
            std::chrono::duration<double>(std::max(0.0, res.requests[next].arrival - now())));
      continue;
    }
    const std::vector<RequestOutput> outs = engine.step();
    ++res.engine_steps;
    const double stamp = now();
    for (const RequestOutput& out : outs) {
      auto it = by_id.find(out.request_id);
      if (it == by_id.end()) continue;
      RequestTiming& r = res.requests[it->second];
      const size_t have = out.outputs.empty() ? 0 : out.outputs[0].token_ids.size();
      while (r.token_times.size() < have) r.token_times.push_back(stamp);
      if (out.finished) {
        r.ok = out.outputs[0].finish_reason == std::optional<std::string>("length") ||
               out.outputs[0].finish_reason == std::optional<std::string>("stop");
        if (!r.ok) r.error = "finished with reason " + out.outputs[0].finish_reason.value_or("?");
        by_id.erase(it);
        --in_flight;
        ++done;
        res.duration = stamp;
      }
    }
  }
  return res;
}

namespace {

json distribution_ms(const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (double s : seconds) ms.push_back(1e3 * s);
  return json{{"mean", mean(ms)},
              {"median", percentile(ms, 50)},
              {"std", stddev(ms)},
              {"p90", percentile(ms, 90)},
              {"p99", percentile(ms, 99)}};
}

}  // namespace

json serve_json(const ServeResult& r) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, failed = 0, in_tokens = 0, out_tokens = 0;
  std::map<int64_t, int64_t> per_second;  // output tokens per 1 s bucket
  for (const RequestTiming& q : r.requests) {
    if (!q.ok || q.token_times.empty()) {
      ++failed;
      continue;
    }
    ++completed;
    in_tokens += q.input_len;
    const auto n = static_cast<int64_t>(q.token_times.size());
    out_tokens += n;
    const double first = q.token_times.front() - q.arrival;
    const double last = q.token_times.back() - q.arrival;
    ttft.push_back(first);
    e2el.push_back(last);
    if (n > 1) tpot.push_back((last - first) / static_cast<double>(n - 1));
    for (int64_t i = 1; i < n; ++i) itl.push_back(q.token_times[i] - q.token_times[i - 1]);
    for (double t : q.token_times) ++per_second[static_cast<int64_t>(std::floor(t))];
  }
  int64_t peak = 0;
  for (const auto& [sec, n] : per_second) peak = std::max(peak, n);
  const double d = r.duration > 0 ? r.duration : 1e-9;
  return json{
      {"num_prompts", r.options.num_prompts},
      {"request_rate",
       std::isinf(r.options.request_rate) ? json("inf") : json(r.options.request_rate)},
      {"input_len", r.options.input_len},
      {"output_len", r.options.output_len},
      {"completed", completed},
      {"failed", failed},
      {"duration_s", r.duration},
      {"engine_steps", r.engine_steps},
      {"total_input_tokens", in_tokens},
      {"total_output_tokens", out_tokens},
      {"request_throughput", completed / d},
      {"output_throughput", out_tokens / d},
      {"peak_output_throughput", peak},
      {"peak_concurrent_requests", r.peak_concurrency},
      {"total_token_throughput", (in_tokens + out_tokens) / d},
      {"ttft_ms", distribution_ms(ttft)},
      {"tpot_ms", distribution_ms(tpot)},
      {"itl_ms", distribution_ms(itl)},
      {"e2el_ms", distribution_ms(e2el)},
  };
}

std::string serve_report(const ServeResult& r) {
  const json j = serve_json(r);
  std::string s = fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  auto line = [&](const std::string& k, const std::string& v) {
    s += fmt::format("{:<40}{:>10}\n", k, v);
  };
  auto num = [](double v, int prec) { return fmt::format("{:.{}f}", v, prec); };
  line("Successful requests:", std::to_string(j["completed"].get<int64_t>()));
  line("Failed requests:", std::to_string(j["failed"].get<int64_t>()));
  line("Request rate configured (RPS):",
       std::isinf(r.options.request_rate) ? "inf" : num(r.options.request_rate, 2));
  line("Benchmark duration (s):", num(j["duration_s"].get<double>(), 2));
  line("Total input tokens:", std::to_string(j["total_input_tokens"].get<int64_t>()));
  line("Total generated tokens:", std::to_string(j["total_output_tokens"].get<int64_t>()));
  line("Request throughput (req/s):", num(j["request_throughput"].get<double>(), 2));
  line("Output token throughput (tok/s):", num(j["output_throughput"].get<double>(), 2));
  line("Peak output token throughput (tok/s):",
       num(static_cast<double>(j["peak_output_throughput"].get<int64_t>()), 2));
  line("Peak concurrent requests:", std::to_string(j["peak_concurrent_requests"].get<int>()));
  line("Total Token throughput (tok/s):", num(j["total_token_throughput"].get<double>(), 2));
  const std::pair<const char*, const char*> blocks[] = {
      {"ttft_ms", "Time to First Token"},
      {"tpot_ms", "Time per Output Token (excl. 1st token)"},
      {"itl_ms", "Inter-token Latency"},
      {"e2el_ms", "End-to-end Latency"}};
  const std::pair<const char*, const char*> abbrev[] = {
      {"ttft_ms", "TTFT"}, {"tpot_ms", "TPOT"}, {"itl_ms", "ITL"}, {"e2el_ms", "E2EL"}};
  for (size_t b = 0; b < 4; ++b) {
    const auto& [key, title] = blocks[b];
    s += fmt::format("{:-^50}\n", std::string(" ") + title + " ");
    const json& m = j[key];
    const std::string a = abbrev[b].second;
    line("Mean " + a + " (ms):", num(m["mean"].get<double>(), 2));
    line("Median " + a + " (ms):", num(m["median"].get<double>(), 2));
    line("P99 " + a + " (ms):", num(m["p99"].get<double>(), 2));
  }
  s += std::string(50, '=') + "\n";
  return s;
}

}  // namespace deepinfer::bench
