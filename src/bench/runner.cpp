#include "bench/runner.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include <fmt/format.h>

#include "bench/stats.h"
#include "core/cpu_timer.h"
#include "core/status.h"
#include "engine/step_sampler.h"

namespace deepinfer::bench {

using json = nlohmann::json;
using deepseek_v4::Model;
using deepseek_v4::SequenceState;

BenchRunner::BenchRunner(Model& model, const BenchSetup& setup)
    : model_(model), setup_(setup), timer_(make_step_timer(model.backend())), rng_(setup.seed) {}

std::vector<int32_t> BenchRunner::random_ids(int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  const auto vocab = static_cast<uint64_t>(model_.config().vocab_size);
  for (int32_t& id : ids) id = rng_.token(vocab);
  return ids;
}

void BenchRunner::fill_context(std::vector<SequenceState>& states, int64_t context,
                               int64_t reserve) {
  if (context <= 0 || states.empty()) return;
  if (setup_.synthetic_context) {
    Backend& b = model_.backend();
    for (SequenceState& st : states)
      st.fill_synthetic(model_.config(), b, context,
                        setup_.seed * 0x100000001B3ull + synthetic_fills_++, reserve);
    // The fills are queued on the device: wait for them (a download synchronises) so that the
    // fill time is complete and no fill work overlaps a timed step.
    const TensorView row = states.back().layers.at(0).ring.view().slice_rows(0, 1);
    std::vector<float> probe(static_cast<size_t>(row.numel()));
    b.download(row, probe.data());
    return;
  }
  const int64_t budget = std::max<int64_t>(1, setup_.fill_chunk_tokens);
  const int64_t chunk = std::min(context, budget);
  const auto group = static_cast<size_t>(std::max<int64_t>(1, budget / chunk));
  for (int64_t off = 0; off < context; off += chunk) {
    const int64_t n = std::min(chunk, context - off);
    for (size_t g0 = 0; g0 < states.size(); g0 += group) {
      const size_t g1 = std::min(states.size(), g0 + group);
      std::vector<std::vector<int32_t>> ids;
      std::vector<Model::BatchItem> items;
      for (size_t i = g0; i < g1; ++i) ids.push_back(random_ids(n));
      for (size_t i = g0; i < g1; ++i) items.push_back({ids[i - g0], &states[i]});
      model_.forward_batch(items);
    }
  }
}

Tensor BenchRunner::timed_forward(std::span<const Model::BatchItem> items, double* issue_seconds,
                                  double* seconds) {
  Backend& b = model_.backend();
  timer_->start();
  const auto t0 = std::chrono::steady_clock::now();
  Tensor logits = model_.forward_batch_on_device(items);
  *issue_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The step ends with the logits on the device (the engine samples there and downloads only
  // tokens); the download for the next ids is not timed.
  *seconds = timer_->stop();
  if (b.device() != Device::kCpu && logits.numel() > 0) {
    Tensor host = Tensor::empty({logits.dim(0), logits.dim(1)});
    b.download(logits, host.view().data());
    logits = std::move(host);
  }
  return logits;
}

RunResult BenchRunner::run_prefill(int64_t prefill_tokens, int64_t num_seqs, int64_t context_length,
                                   int warmup_steps, int num_steps) {
  DI_CHECK(prefill_tokens > 0, ErrorCode::kInvalidArgument,
           "--prefill-batch-size must be positive (got {})", prefill_tokens);
  DI_CHECK(num_seqs > 0 && num_seqs <= prefill_tokens, ErrorCode::kInvalidArgument,
           "--prefill-seqs must be in [1, prefill batch size {}] (got {})", prefill_tokens,
           num_seqs);
  DI_CHECK(context_length >= 0 && warmup_steps >= 0 && num_steps > 0, ErrorCode::kInvalidArgument,
           "prefill: context length and warm-up must be >= 0 and steps > 0");
  RunResult r;
  r.spec = {"prefill",    num_seqs, prefill_tokens / num_seqs, prefill_tokens, context_length,
            warmup_steps, num_steps};
  r.synthetic_context = setup_.synthetic_context && context_length > 0;
  const ModelConfig& c = model_.config();
  for (int s = 0; s < warmup_steps + num_steps; ++s) {
    std::vector<SequenceState> states;
    for (int64_t i = 0; i < num_seqs; ++i) states.push_back(model_.new_state());
    const auto t0 = std::chrono::steady_clock::now();
    fill_context(states, context_length, prefill_tokens / num_seqs + 1);
    r.fill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<std::vector<int32_t>> ids;
    std::vector<Model::BatchItem> items;
    std::vector<SeqStep> shape;
    for (int64_t i = 0; i < num_seqs; ++i) {
      const int64_t n = prefill_tokens / num_seqs + (i < prefill_tokens % num_seqs ? 1 : 0);
      ids.push_back(random_ids(n));
      shape.push_back({context_length, n});
    }
    for (int64_t i = 0; i < num_seqs; ++i) items.push_back({ids[i], &states[i]});
    double secs = 0, issue = 0;
    if (s == warmup_steps) timer_->profile(true);
    timed_forward(items, &issue, &secs);
    if (s + 1 == warmup_steps) CpuTimers::reset();  // the table covers the logged steps
    if (s < warmup_steps) continue;
    StepRecord rec;
    rec.index = s - warmup_steps;
    rec.seconds = secs;
    rec.issue_seconds = issue;
    rec.tokens = prefill_tokens;
    rec.num_seqs = num_seqs;
    rec.mean_context = static_cast<double>(context_length);
    rec.cost = step_cost(c, shape, setup_.dtypes);
    r.steps.push_back(rec);
  }
  timer_->profile(false);
  return r;
}

namespace {

// A logged decode step: one token for each of `seqs` sequences holding `context` tokens.
StepRecord decode_record(const ModelConfig& c, const RooflineDtypes& dtypes, int index,
                         int64_t seqs, int64_t context, double seconds, double issue_seconds) {
  StepRecord rec;
  rec.index = index;
  rec.seconds = seconds;
  rec.issue_seconds = issue_seconds;
  rec.tokens = seqs;
  rec.num_seqs = seqs;
  rec.mean_context = static_cast<double>(context);
  rec.cost = step_cost(c, seqs, 1, context, dtypes);
  return rec;
}

}  // namespace

RunResult BenchRunner::run_decode(int64_t num_requests, int64_t context_length, int warmup_steps,
                                  int num_steps, bool overlap) {
  DI_CHECK(num_requests > 0, ErrorCode::kInvalidArgument,
           "--decode-num-requests must be positive (got {})", num_requests);
  DI_CHECK(context_length >= 0 && warmup_steps >= 0 && num_steps > 0, ErrorCode::kInvalidArgument,
           "decode: context length and warm-up must be >= 0 and steps > 0");
  RunResult r;
  r.spec = {"decode", num_requests, 1, 0, context_length, warmup_steps, num_steps, overlap};
  r.synthetic_context = setup_.synthetic_context && context_length > 0;
  const ModelConfig& c = model_.config();
  std::vector<SequenceState> states;
  for (int64_t i = 0; i < num_requests; ++i) states.push_back(model_.new_state());
  const auto t0 = std::chrono::steady_clock::now();
  fill_context(states, context_length, warmup_steps + num_steps);
  r.fill_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<int32_t> next = random_ids(num_requests);
  if (overlap) {
    run_decode_overlapped(r, states, next, warmup_steps, num_steps);
    return r;
  }
  const int64_t V = c.vocab_size;
  for (int s = 0; s < warmup_steps + num_steps; ++s) {
    std::vector<Model::BatchItem> items;
    for (int64_t i = 0; i < num_requests; ++i)
      items.push_back({std::span<const int32_t>(&next[i], 1), &states[i]});
    const int64_t context = states[0].num_tokens;
    double secs = 0, issue = 0;
    if (s == warmup_steps) timer_->profile(true);
    const Tensor logits = timed_forward(items, &issue, &secs);
    const float* l = logits.data_as<float>();
    for (int64_t i = 0; i < num_requests; ++i)
      next[i] = static_cast<int32_t>(std::max_element(l + i * V, l + (i + 1) * V) - (l + i * V));
    if (s + 1 == warmup_steps) CpuTimers::reset();
    if (s < warmup_steps) continue;
    r.steps.push_back(
        decode_record(c, setup_.dtypes, s - warmup_steps, num_requests, context, secs, issue));
  }
  timer_->profile(false);
  return r;
}

void BenchRunner::run_decode_overlapped(RunResult& r, std::vector<SequenceState>& states,
                                        const std::vector<int32_t>& first_ids, int warmup_steps,
                                        int num_steps) {
  Backend& b = model_.backend();
  const ModelConfig& c = model_.config();
  const auto B = static_cast<int64_t>(states.size());
  // As the engine runs with zero-overhead scheduling: the step's greedy tokens are sampled on
  // the device into next_ids, the next forward reads them there (BatchItem::last_id) and is
  // queued before this step's tokens are collected, so the host records step s + 1 while the
  // device runs step s.
  const std::unique_ptr<StepSampler> sampler = make_step_sampler(b);
  SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<sampling::SampleRow> rows(static_cast<size_t>(B));
  for (sampling::SampleRow& row : rows) row.params = &greedy;
  Tensor next_ids = b.empty({B}, DType::kI32);
  b.upload(first_ids.data(), next_ids);
  Tensor logits_in_flight;
  bool sampling = false;
  const std::vector<int32_t> placeholder(static_cast<size_t>(B), 0);
  for (int s = 0; s < warmup_steps + num_steps; ++s) {
    std::vector<Model::BatchItem> items;
    for (int64_t i = 0; i < B; ++i) {
      Model::BatchItem item{std::span<const int32_t>(&placeholder[i], 1), &states[i]};
      item.last_id = next_ids.view().slice_rows(i, i + 1);
      items.push_back(item);
    }
    const int64_t context = states[0].num_tokens;
    if (s == warmup_steps) {
      CpuTimers::reset();  // the table covers the logged steps
      timer_->profile(true);
      timer_->start();
    }
    const auto t0 = std::chrono::steady_clock::now();
    Tensor logits = model_.forward_batch_on_device(items);
    if (sampling) sampler->collect();  // the last step's tokens, behind this forward
    Tensor ids = b.empty({B}, DType::kI32);
    for (int64_t i = 0; i < B; ++i) rows[i].position = context + 1;
    sampler->launch(logits, rows, ids.view());
    sampling = true;
    next_ids = std::move(ids);
    logits_in_flight = std::move(logits);
    const double issue =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < warmup_steps) continue;
    r.steps.push_back(decode_record(c, setup_.dtypes, s - warmup_steps, B, context, 0, issue));
  }
  // One device interval over all logged steps: each step is credited its mean.
  const double per_step = timer_->stop() / num_steps;
  if (sampling) sampler->collect();
  timer_->profile(false);
  for (StepRecord& rec : r.steps) rec.seconds = per_step;
}

namespace {

struct Totals {
  double seconds = 0, tokens = 0, bytes = 0, weight_bytes = 0, state_bytes = 0, flops = 0;
  double roofline = 0, experts = 0;
  std::vector<double> step_seconds, issue_seconds;
};

Totals totals(const RunResult& r, const MachinePeaks& peaks) {
  Totals t;
  for (const StepRecord& s : r.steps) {
    t.seconds += s.seconds;
    t.tokens += static_cast<double>(s.tokens);
    t.bytes += s.cost.bytes();
    t.weight_bytes += s.cost.weight_bytes();
    t.state_bytes += s.cost.state_bytes();
    t.flops += s.cost.flops();
    t.roofline += roofline_seconds(s.cost, peaks);
    t.experts += s.cost.experts_touched;
    t.step_seconds.push_back(s.seconds);
    t.issue_seconds.push_back(s.issue_seconds);
  }
  return t;
}

}  // namespace

json step_json(const StepRecord& s, const MachinePeaks& peaks) {
  const double roof = roofline_seconds(s.cost, peaks);
  const double tps = s.seconds > 0 ? s.tokens / s.seconds : 0;
  return json{
      {"step", s.index},
      {"time_s", s.seconds},
      {"issue_s", s.issue_seconds},
      {"tokens", s.tokens},
      {"num_seqs", s.num_seqs},
      {"context", s.mean_context},
      {"tokens_per_s", tps},
      {"tokens_per_s_per_user", tps / static_cast<double>(std::max<int64_t>(1, s.num_seqs))},
      {"weight_bytes", s.cost.weight_bytes()},
      {"state_read_bytes", s.cost.state_read_bytes},
      {"state_write_bytes", s.cost.state_write_bytes},
      {"bytes", s.cost.bytes()},
      {"flops", s.cost.flops()},
      {"experts_touched_per_layer", s.cost.experts_touched},
      {"achieved_gbs", s.seconds > 0 ? s.cost.bytes() / s.seconds / 1e9 : 0},
      {"achieved_tflops", s.seconds > 0 ? s.cost.flops() / s.seconds / 1e12 : 0},
      {"roofline_s", roof},
      {"roofline_fraction", s.seconds > 0 ? roof / s.seconds : 0},
      {"bound", roofline_bound(s.cost, peaks)},
  };
}

json run_summary_json(const RunResult& r, const MachinePeaks& peaks) {
  const Totals t = totals(r, peaks);
  const double n = static_cast<double>(std::max<size_t>(1, r.steps.size()));
  const double tps = t.seconds > 0 ? t.tokens / t.seconds : 0;
  StepCost mean_cost;  // bound of the average step
  if (!r.steps.empty()) mean_cost = r.steps[r.steps.size() / 2].cost;
  return json{
      {"steps", r.steps.size()},
      {"median_step_s", percentile(t.step_seconds, 50)},
      {"median_issue_s", percentile(t.issue_seconds, 50)},
      {"mean_step_s", t.seconds / n},
      {"min_step_s", t.step_seconds.empty()
                         ? 0.0
                         : *std::min_element(t.step_seconds.begin(), t.step_seconds.end())},
      {"p90_step_s", percentile(t.step_seconds, 90)},
      {"tokens_per_step", t.tokens / n},
      {"tokens_per_s", tps},
      {"tokens_per_s_per_user", tps / static_cast<double>(std::max<int64_t>(1, r.spec.num_seqs))},
      {"mean_bytes_per_step", t.bytes / n},
      {"mean_weight_bytes_per_step", t.weight_bytes / n},
      {"mean_state_bytes_per_step", t.state_bytes / n},
      {"mean_flops_per_step", t.flops / n},
      {"experts_touched_per_layer", t.experts / n},
      {"achieved_gbs", t.seconds > 0 ? t.bytes / t.seconds / 1e9 : 0},
      {"achieved_tflops", t.seconds > 0 ? t.flops / t.seconds / 1e12 : 0},
      {"roofline_step_s", t.roofline / n},
      {"roofline_fraction", t.seconds > 0 ? t.roofline / t.seconds : 0},
      {"bound", roofline_bound(mean_cost, peaks)},
      {"context_first", r.steps.empty() ? 0.0 : r.steps.front().mean_context},
      {"context_last", r.steps.empty() ? 0.0 : r.steps.back().mean_context},
  };
}

json run_json(const RunResult& r, const MachinePeaks& peaks, bool with_steps) {
  json j{{"mode", r.spec.mode},
         {"num_seqs", r.spec.num_seqs},
         {"tokens_per_seq", r.spec.tokens_per_seq},
         {"prefill_tokens", r.spec.prefill_tokens},
         {"context_length", r.spec.context_length},
         {"warmup_steps", r.spec.warmup_steps},
         {"num_steps", r.spec.num_steps},
         {"overlap", r.spec.overlap},
         {"fill_s", r.fill_seconds},
         {"synthetic_context", r.synthetic_context},
         {"summary", run_summary_json(r, peaks)}};
  if (with_steps) {
    json steps = json::array();
    for (const StepRecord& s : r.steps) steps.push_back(step_json(s, peaks));
    j["steps"] = std::move(steps);
  }
  return j;
}

std::string summary_table(const std::vector<RunResult>& runs, const MachinePeaks& peaks) {
  std::string out = fmt::format(
      "{:<8} {:>6} {:>8} {:>8} {:>5} {:>10} {:>9} {:>10} {:>11} {:>8} {:>9} {:>10} {:>7} "
      "{:>8}\n",
      "mode", "seqs", "tok/step", "context", "ctx", "step ms", "issue ms", "tok/s", "tok/s/user",
      "GB/s", "TFLOP/s", "roof ms", "%roof", "bound");
  for (const RunResult& r : runs) {
    const json s = run_summary_json(r, peaks);
    out += fmt::format(
        "{:<8} {:>6} {:>8.0f} {:>8.0f} {:>5} {:>10.3f} {:>9.3f} {:>10.1f} {:>11.2f} {:>8.2f} "
        "{:>9.4f} {:>10.3f} {:>6.1f}% {:>8}\n",
        r.spec.overlap ? r.spec.mode + "/o" : r.spec.mode, r.spec.num_seqs,
        s["tokens_per_step"].get<double>(), s["context_first"].get<double>(),
        r.spec.context_length == 0 ? "-"
        : r.synthetic_context      ? "synth"
                                   : "real",
        1e3 * s["median_step_s"].get<double>(), 1e3 * s["median_issue_s"].get<double>(),
        s["tokens_per_s"].get<double>(), s["tokens_per_s_per_user"].get<double>(),
        s["achieved_gbs"].get<double>(), s["achieved_tflops"].get<double>(),
        1e3 * s["roofline_step_s"].get<double>(), 100 * s["roofline_fraction"].get<double>(),
        s["bound"].get<std::string>());
  }
  return out;
}

std::string steps_table(const RunResult& run, const MachinePeaks& peaks) {
  std::string out = fmt::format("{:>5} {:>10} {:>7} {:>8} {:>10} {:>11} {:>8} {:>9} {:>9} {:>7}\n",
                                "step", "ms", "tokens", "context", "tok/s", "tok/s/user", "GB/s",
                                "GFLOP/s", "roof ms", "%roof");
  for (const StepRecord& s : run.steps) {
    const json j = step_json(s, peaks);
    out += fmt::format(
        "{:>5} {:>10.3f} {:>7} {:>8.0f} {:>10.1f} {:>11.2f} {:>8.2f} {:>9.2f} {:>9.3f} {:>6.1f}%\n",
        s.index, 1e3 * s.seconds, s.tokens, s.mean_context, j["tokens_per_s"].get<double>(),
        j["tokens_per_s_per_user"].get<double>(), j["achieved_gbs"].get<double>(),
        1e3 * j["achieved_tflops"].get<double>(), 1e3 * j["roofline_s"].get<double>(),
        100 * j["roofline_fraction"].get<double>());
  }
  return out;
}

}  // namespace deepinfer::bench
