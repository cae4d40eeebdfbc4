// The engine: requests in, RequestOutputs out, one step at a time. Owns the model, the
// tokenizer, the scheduler and the state memory; the offline LLM, the CLI and the server drive it.
//
//   step():  schedule -> prepare inputs -> batched forward -> sample -> output processing
//
// On a GPU the forward only queues work and the sampler runs on the device too: the step's one
// host wait is the download of its sampled tokens. With zero-overhead scheduling
// (DEEPINFER_ZERO_OVERHEAD_SCHEDULING, default on) that wait moves a step later: step N+1 is
// planned and queued while the device still runs step N (the sequences' last tokens are
// placeholders, read by the forward from the device), then step N's tokens are collected and
// processed, and step() returns them. A sequence that stopped at N has its N+1 row dropped.
//
// A request's tokens depend only on its prompt, its SamplingParams and its seq_seed: sampling is
// keyed by (seq_seed, position), every sequence's rows are computed independently of its batch
// companions, and preemption recomputes exactly what was there.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/object_pool.h"
#include "deepinfer/engine_config.h"
#include "deepinfer/request_output.h"
#include "deepinfer/sampling_params.h"
#include "engine/prefill_vote.h"
#include "engine/scheduler.h"
#include "engine/step_sampler.h"
#include "kv/state_memory.h"
#include "model/deepseek_v4/model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

struct EngineRequest {
  std::string request_id;  // empty: the engine assigns one
  std::optional<std::string> prompt;
  std::vector<int32_t> prompt_token_ids;  // used when prompt is unset
  SamplingParams params;
};

class Engine {
 public:
  explicit Engine(const EngineConfig& config);
  ~Engine();

  // Validates and queues a request; returns its id. Bad input throws deepinfer::Error naming the
  // problem and leaves the engine and every other request untouched.
  std::string add_request(EngineRequest request);
  // Aborts a request (finish_reason "abort"); unknown ids are ignored.
  void abort_request(const std::string& request_id);
  // Runs one step; returns a copy of the output of every request that advanced or finished.
  std::vector<RequestOutput> step();
  bool has_unfinished_requests() const { return !requests_.empty(); }
  size_t num_unfinished_requests() const { return requests_.size(); }

  const ModelConfig& model_config() const { return model_->config(); }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }
  const StateMemory& state_memory() const { return *memory_; }
  int64_t max_model_len() const { return max_model_len_; }
  uint64_t num_preemptions() const { return num_preemptions_; }

 private:
  struct Request;
  // Appends a sampled token: logprobs, incremental text, stop checks.
  void append_token(Request& r, int32_t token, const struct SampleOutcome& outcome);
  // Ends a request now; its sequence and state are released by the next schedule() call.
  void finish(Request& r, const char* reason);
  void recycle(Request* r);
  // Whether every pending token the plan feeds can be read on the device.
  bool pending_tokens_on_device(const StepPlan& plan) const;
  // Queues sampling of the plan's sampling rows; their sequences get placeholder tokens.
  void launch_sampling(const StepPlan& plan, const std::vector<Request*>& reqs, Tensor logits);
  // Waits for the sampling in flight, if any, and processes its tokens into `outputs`.
  void collect_sampling(std::vector<RequestOutput>& outputs);

  // A step whose sampled tokens have not reached the host yet.
  struct InFlight {
    std::vector<Request*> reqs;  // per sampled row; null: dropped (finished, recycled)
    Tensor logits;               // kept alive until the sampler is done with it
    Tensor next_ids;             // I32 [rows] on the backend: the tokens, for the next forward
  };

  EngineConfig config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<deepseek_v4::Model> model_;
  std::unique_ptr<StepSampler> sampler_;
  std::optional<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<StateMemory> memory_;
  SingleRankVote vote_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<int32_t> eos_ids_;
  int64_t max_model_len_ = 0;
  uint64_t next_request_ = 0;
  uint64_t next_seq_id_ = 0;
  uint64_t num_preemptions_ = 0;
  bool zero_overhead_ = true;
  std::optional<InFlight> in_flight_;
  ObjectPool<Sequence> seq_pool_;
  ObjectPool<Request> request_pool_;
  std::unordered_map<std::string, Request*> requests_;
  std::unordered_map<uint64_t, Request*> by_seq_;
};

}  // namespace deepinfer
