#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>

#include "core/cpu_timer.h"
#include "core/env.h"
#include "engine/backend_factory.h"
#include "sampling/sampler.h"
#include "sampling/stop_checker.h"
#ifdef DEEPINFER_HAVE_CUDA
#include "backend/cuda/device_info.h"
#endif

namespace deepinfer {

struct SampleOutcome {
  std::optional<sampling::Logprobs> logprobs;
};

struct Engine::Request {
  std::string id;
  SamplingParams params;
  uint64_t seed = 0;
  Sequence* seq = nullptr;
  std::optional<deepseek_v4::SequenceState> state;  // absent until first scheduled / preempted
  std::optional<tokenizer::StreamingDetokenizer> detok;
  std::optional<sampling::StopStringTracker> stops;
  RequestOutput out;
  bool finished = false;
  int64_t pending_row = -1;        // with seq->token_pending: its row in in_flight_
  bool pending_on_device = false;  // ... and whether in_flight_->next_ids holds it

  void reset() {
    id.clear();
    params = SamplingParams();
    seed = 0;
    seq = nullptr;
    state.reset();
    detok.reset();
    stops.reset();
    out = RequestOutput();
    finished = false;
    pending_row = -1;
    pending_on_device = false;
  }
};

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

uint64_t random_seed() {
  static std::mt19937_64 gen{std::random_device{}()};
  return gen();
}

}  // namespace

Engine::Engine(const EngineConfig& config) : config_(config) {
  config_.validate();
  DI_CHECK(config_.engine_type != EngineType::kCompletion, ErrorCode::kUnsupported,
           "engine_type COMPLETION needs state handed over from a PROMPT engine, which is not "
           "built yet");
  int cuda_index = -1;
  backend_ = make_backend(config_.device, &cuda_index);
  sampler_ = make_step_sampler(*backend_);
  zero_overhead_ = env::get_bool("DEEPINFER_ZERO_OVERHEAD_SCHEDULING");
  model_ = deepseek_v4::Model::load(config_.model, *backend_);
  const ModelConfig& mc = model_->config();

  const std::string tok_path = config_.tokenizer.empty() ? config_.model : config_.tokenizer;
  const bool has_tokenizer =
      std::filesystem::is_regular_file(tok_path) ||
      std::filesystem::is_regular_file(std::filesystem::path(tok_path) / "tokenizer.json");
  DI_CHECK(has_tokenizer || config_.tokenizer.empty(), ErrorCode::kNotFound,
           "tokenizer '{}' not found (a tokenizer.json or a directory holding one)", tok_path);
  if (has_tokenizer) tokenizer_ = tokenizer::Tokenizer::from_path(tok_path);

  eos_ids_ = mc.eos_token_ids;
  if (tokenizer_ && tokenizer_->eos_id() &&
      std::find(eos_ids_.begin(), eos_ids_.end(), int32_t(*tokenizer_->eos_id())) == eos_ids_.end())
    eos_ids_.push_back(static_cast<int32_t>(*tokenizer_->eos_id()));

  int64_t state_budget = config_.max_state_bytes > 0 ? config_.max_state_bytes : int64_t{2} << 30;
#ifdef DEEPINFER_HAVE_CUDA
  if (cuda_index >= 0) {
    // gpu_memory_utilization bounds everything on the device; what the weights left, less a
    // tenth for activations of the largest step, holds sequence state.
    size_t free_b = 0, total_b = 0;
    DI_CHECK(cuda::memory_info(cuda_index, &free_b, &total_b), ErrorCode::kInternal,
             "cannot read the memory of cuda:{}", cuda_index);
    const double allowed =
        config_.gpu_memory_utilization * double(total_b) - double(total_b - free_b);
    DI_CHECK(allowed > 0, ErrorCode::kOutOfMemory,
             "gpu_memory_utilization={} leaves no room for state after loading the weights "
             "({:.1f} of {:.1f} GiB in use)",
             config_.gpu_memory_utilization, (total_b - free_b) / 1073741824.0,
             total_b / 1073741824.0);
    state_budget = static_cast<int64_t>(0.9 * allowed);
    if (config_.max_state_bytes > 0) state_budget = std::min(state_budget, config_.max_state_bytes);
  }
#endif
  memory_ = std::make_unique<StateMemory>(
      StateLayout::for_model(mc, sizeof(float), config_.state_page_tokens), state_budget);
  max_model_len_ = config_.max_model_len > 0 ? config_.max_model_len : mc.max_position_embeddings;
  DI_CHECK(max_model_len_ > 0, ErrorCode::kInvalidArgument,
           "max_model_len is unset and the model config has no max_position_embeddings");
  max_model_len_ = std::min(max_model_len_, memory_->max_tokens_per_sequence());

  SchedulerConfig sc;
  sc.max_prefill_tokens = config_.max_prefill_tokens;
  sc.max_decode_seqs = config_.max_num_seqs;
  sc.prefill_attempt_interval =
      static_cast<int>(env::get_int("DEEPINFER_PREFILL_ATTEMPT_INTERVAL"));
  sc.prefill_any_attempt_interval =
      static_cast<int>(env::get_int("DEEPINFER_PREFILL_ANY_ATTEMPT_INTERVAL"));
  sc.engine_type = config_.engine_type;
  scheduler_ = std::make_unique<Scheduler>(sc, *memory_, vote_);
}

Engine::~Engine() = default;

std::string Engine::add_request(EngineRequest req) {
  const ModelConfig& mc = model_->config();
  req.params.validate(mc.vocab_size);
  std::vector<int32_t> ids;
  if (req.prompt) {
    DI_CHECK(tokenizer_.has_value(), ErrorCode::kInvalidArgument,
             "prompt: text prompts need a tokenizer, and the model directory '{}' has none; pass "
             "prompt_token_ids or a tokenizer",
             config_.model);
    for (uint32_t id : tokenizer_->encode(*req.prompt, /*add_special_tokens=*/true))
      ids.push_back(static_cast<int32_t>(id));
  } else {
    ids = std::move(req.prompt_token_ids);
  }
  DI_CHECK(!ids.empty(), ErrorCode::kInvalidArgument, "prompt: the prompt is empty");
  for (size_t i = 0; i < ids.size(); ++i)
    DI_CHECK(ids[i] >= 0 && ids[i] < mc.vocab_size, ErrorCode::kInvalidArgument,
             "prompt_token_ids: id {} at index {} is outside the vocabulary [0, {})", ids[i], i,
             mc.vocab_size);
  DI_CHECK(static_cast<int64_t>(ids.size()) < max_model_len_, ErrorCode::kInvalidArgument,
           "prompt: {} tokens leave no room to generate within the context of {} tokens "
           "(max_model_len)",
           ids.size(), max_model_len_);
  std::string id = req.request_id.empty() ? std::to_string(next_request_++) : req.request_id;
  DI_CHECK(!requests_.count(id), ErrorCode::kInvalidArgument, "request_id '{}' is already in use",
           id);

  Request* r = request_pool_.acquire();
  r->id = id;
  r->params = std::move(req.params);
  r->seed = r->params.seq_seed.value_or(random_seed());
  r->out.request_id = id;
  r->out.prompt = req.prompt.value_or("");
  r->out.prompt_token_ids = ids;
  r->out.outputs.resize(1);
  if (r->params.logprobs) r->out.outputs[0].logprobs.emplace();
  r->out.metrics.arrival_time = now_seconds();
  if (tokenizer_) r->detok.emplace(*tokenizer_, r->params.skip_special_tokens);
  r->stops.emplace(r->params);

  Sequence* seq = seq_pool_.acquire();
  seq->id = ++next_seq_id_;
  seq->tokens = std::move(ids);
  seq->num_prompt_tokens = seq->num_tokens();
  r->seq = seq;
  scheduler_->add(seq);
  requests_[id] = r;
  by_seq_[seq->id] = r;
  return id;
}

void Engine::abort_request(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end() || it->second->finished) return;
  finish(*it->second, "abort");
}

void Engine::finish(Request& r, const char* reason) {
  r.finished = true;
  r.out.finished = true;
  r.out.outputs[0].finish_reason = reason;
  r.out.metrics.finished_time = now_seconds();
  scheduler_->finish(r.seq);
}

void Engine::recycle(Request* r) {
  if (in_flight_)
    for (Request*& q : in_flight_->reqs)
      if (q == r) q = nullptr;
  by_seq_.erase(r->seq->id);
  requests_.erase(r->id);
  seq_pool_.release(r->seq);
  request_pool_.release(r);
}

std::vector<RequestOutput> Engine::step() {
  StepPlan plan;
  {
    ScopedCpuTimer t("schedule");
    plan = scheduler_->schedule();
  }
  // Finished sequences were released by the scheduler: drop their state and recycle them.
  for (Sequence* seq : plan.freed) recycle(by_seq_.at(seq->id));
  // Preempted ones lose their state; their next prefill rebuilds it from their tokens.
  for (Sequence* seq : plan.preempted) by_seq_.at(seq->id)->state.reset();
  num_preemptions_ += plan.preempted.size();
  std::vector<RequestOutput> outputs;
  if (plan.kind != StepKind::kPrefill && plan.kind != StepKind::kDecode) {
    collect_sampling(outputs);
    return outputs;
  }
  // Without the overlap, or when a token the plan feeds exists only on the host (a logprobs
  // row, sampled there), the last step's tokens come in first.
  if (in_flight_ && !(zero_overhead_ && pending_tokens_on_device(plan))) collect_sampling(outputs);

  std::vector<deepseek_v4::Model::BatchItem> items;
  std::vector<Request*> reqs;
  {
    ScopedCpuTimer t("prepare inputs");
    const double now = now_seconds();
    for (const ScheduledSeq& s : plan.seqs) {
      Request* r = by_seq_.at(s.seq->id);
      if (!r->state) r->state.emplace(model_->new_state());
      if (r->out.metrics.first_scheduled_time == 0) r->out.metrics.first_scheduled_time = now;
      // Only chunks that end in a sample need logits (the head is the largest matrix).
      deepseek_v4::Model::BatchItem item{
          std::span<const int32_t>(s.seq->tokens.data() + s.begin, s.count), &*r->state,
          s.sample ? deepseek_v4::Model::BatchItem::Logits::kLast
                   : deepseek_v4::Model::BatchItem::Logits::kNone};
      if (s.seq->token_pending && s.begin + s.count == s.seq->num_tokens()) {
        DI_ASSERT(in_flight_ && r->pending_on_device);
        item.last_id = in_flight_->next_ids.view().slice_rows(r->pending_row, r->pending_row + 1);
      }
      items.push_back(item);
      reqs.push_back(r);
    }
  }
  Tensor logits;
  {
    ScopedCpuTimer t("forward");
    logits = sampler_->wants_device_logits() ? model_->forward_batch_on_device(items)
                                             : model_->forward_batch(items);
  }
  // The last step's tokens, while this one runs on the device (they may end some of the
  // sequences just queued: their rows are dropped).
  collect_sampling(outputs);
  launch_sampling(plan, reqs, std::move(logits));
  if (!zero_overhead_) collect_sampling(outputs);
  return outputs;
}

bool Engine::pending_tokens_on_device(const StepPlan& plan) const {
  for (const ScheduledSeq& s : plan.seqs) {
    if (!s.seq->token_pending || s.begin + s.count < s.seq->num_tokens()) continue;
    if (!by_seq_.at(s.seq->id)->pending_on_device) return false;
  }
  return true;
}

void Engine::launch_sampling(const StepPlan& plan, const std::vector<Request*>& reqs,
                             Tensor logits) {
  // Row k of `logits` belongs to the k-th scheduled sequence that samples (its chunk ends its
  // prompt, or a decode); the sampler processes it in place.
  std::vector<sampling::SampleRow> rows;
  InFlight f;
  {
    ScopedCpuTimer t("sample");
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      if (!plan.seqs[i].sample) continue;
      Request* r = reqs[i];
      const Sequence* seq = r->seq;
      sampling::SampleRow row;
      row.params = &r->params;
      row.seq_seed = r->seed;
      row.position = seq->num_tokens();
      row.context.prompt_token_ids =
          std::span<const int32_t>(seq->tokens.data(), seq->num_prompt_tokens);
      row.context.output_token_ids = std::span<const int32_t>(
          seq->tokens.data() + seq->num_prompt_tokens, seq->num_generated());
      row.context.eos_token_ids = eos_ids_;
      rows.push_back(row);
      // A request that finished while this step was queued (its last token came in above)
      // still has its row sampled; the token is dropped.
      f.reqs.push_back(r->finished ? nullptr : r);
    }
  }
  DI_ASSERT(logits.dim(0) == static_cast<int64_t>(rows.size()));
  if (rows.empty()) return;
  ScopedCpuTimer t("sample");
  const int64_t R = static_cast<int64_t>(rows.size());
  std::vector<bool> on_device;
  {
    // Queued behind the forward: nothing here may wait for the device.
    const SyncFreeRegion sync_free(*backend_, "the sampling launch");
    f.next_ids = backend_->empty({R}, DType::kI32);
    on_device = sampler_->launch(logits, rows, f.next_ids.view());
  }
  f.logits = std::move(logits);
  for (int64_t k = 0; k < R; ++k) {
    Request* r = f.reqs[k];
    if (!r) continue;
    Sequence& seq = *r->seq;
    seq.tokens.push_back(0);  // the placeholder; collect_sampling writes the token
    seq.token_pending = true;
    r->pending_row = k;
    r->pending_on_device = on_device[k];
    const int64_t n_out = seq.num_generated();
    const auto& max_tokens = r->params.max_tokens;
    seq.final_token_pending = config_.engine_type == EngineType::kPrompt ||
                              seq.num_tokens() >= max_model_len_ ||
                              (max_tokens && n_out >= *max_tokens && n_out >= r->params.min_tokens);
  }
  in_flight_ = std::move(f);
}

void Engine::collect_sampling(std::vector<RequestOutput>& outputs) {
  if (!in_flight_) return;
  InFlight f = std::move(*in_flight_);
  in_flight_.reset();
  std::vector<StepSample> samples;
  {
    ScopedCpuTimer t("sample");
    samples = sampler_->collect();
  }
  DI_ASSERT(samples.size() == f.reqs.size());
  ScopedCpuTimer t("output processing");
  for (size_t k = 0; k < f.reqs.size(); ++k) {
    Request* r = f.reqs[k];
    if (!r) continue;
    Sequence& seq = *r->seq;
    if (r->finished) {  // aborted while it ran
      seq.token_pending = false;
      continue;
    }
    if (samples[k].error) {
      // A request whose logits cannot be sampled fails alone.
      seq.tokens.pop_back();
      seq.token_pending = false;
      finish(*r, "abort");
      outputs.push_back(r->out);
      continue;
    }
    append_token(*r, samples[k].token, SampleOutcome{std::move(samples[k].logprobs)});
    outputs.push_back(r->out);
  }
}

void Engine::append_token(Request& r, int32_t token, const SampleOutcome& outcome) {
  Sequence& seq = *r.seq;
  if (seq.token_pending) {
    seq.tokens.back() = token;
    seq.token_pending = false;
  } else {
    seq.tokens.push_back(token);
  }
  CompletionOutput& c = r.out.outputs[0];
  c.token_ids.push_back(token);
  if (r.out.metrics.first_token_time == 0) r.out.metrics.first_token_time = now_seconds();
  if (outcome.logprobs) {
    const sampling::Logprobs& lp = *outcome.logprobs;
    c.cumulative_logprob += lp.sampled.logprob;
    TokenLogprobs entry;
    auto decoded = [&](int32_t id) {
      return tokenizer_ ? tokenizer_->decode(std::vector<uint32_t>{uint32_t(id)}) : std::string();
    };
    for (const auto& t : lp.top)
      entry[t.token] = Logprob{t.logprob, static_cast<int>(t.rank), decoded(t.token)};
    entry[lp.sampled.token] =
        Logprob{lp.sampled.logprob, static_cast<int>(lp.sampled.rank), decoded(lp.sampled.token)};
    c.logprobs->push_back(std::move(entry));
  }

  // Text so far, then stop strings (which may end inside the new text). The output text is
  // the tracker's: truncated at a stop string.
  const int64_t n_out = seq.num_generated();
  if (r.detok) {
    const auto update = r.stops->append(r.detok->push(static_cast<uint32_t>(token)), n_out);
    c.text = r.stops->text();
    if (update.stop_string) {
      c.stop_reason = *update.stop_string;
      finish(r, "stop");
      return;
    }
  }
  auto f = sampling::check_token_stop(r.params, eos_ids_, token, n_out, seq.num_tokens(),
                                      max_model_len_);
  // A PROMPT engine only prefills: its requests end with their first token (the point where a
  // COMPLETION engine would take the state over).
  if (!f && config_.engine_type == EngineType::kPrompt)
    f = sampling::Finish{sampling::FinishReason::kLength, {}};
  if (f) {
    if (r.detok) {
      r.stops->append(r.detok->finish(), n_out);
      r.stops->flush();
      c.text = r.stops->text();
    }
    if (const int32_t* id = std::get_if<int32_t>(&f->stop_reason)) c.stop_reason = *id;
    finish(r, sampling::finish_reason_name(f->reason));
  }
}

}  // namespace deepinfer
