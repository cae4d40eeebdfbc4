// Offline step benchmarks over the model forward (`deepinfer bench --mode prefill|decode`), in
// the spirit of DeepInfer's examples/benchmark.py: the model is driven directly (no scheduler),
// untimed warm-up steps are skipped, then every logged step is timed and set against the
// roofline of exactly the work it did.
//
// prefill: every step feeds `prefill_batch_size` new tokens, split over `prefill_seqs` fresh
//   sequences, each holding `context_length` tokens of state filled (untimed) before the step.
// decode: `num_requests` sequences hold `context_length` tokens of state (filled untimed in
//   large batched chunks), then every step feeds one token per sequence (the previous step's
//   greedy token), so the context grows by one per step. Each step waits for its logits (the
//   greedy pick is made on the host). With `overlap`, as the engine runs under zero-overhead
//   scheduling, the greedy pick is made by the device sampler and read there by the next step,
//   so step s + 1 is queued (or recorded as a CUDA graph) while the device runs step s; steps
//   then get the mean of one device interval over all of them.
// Tokens are random ids from a SplitMix64 stream of the seed, drawn in a fixed order (the fill
// chunk by chunk, sequence by sequence, then the first decode tokens; prefill: per step the fill,
// then each sequence's chunk), which bench/transformers_baseline.py reproduces. Accounting counts
// the real tokens of each step only.
//
// Synthetic context (BenchSetup::synthetic_context, `--synthetic-context`): instead of the
// untimed fill forwards, every sequence's state is set directly to `context_length` tokens
// (SequenceState::fill_synthetic: full ring, entries / indexer keys of the closed windows,
// pending rows, random values of realistic scale), which takes milliseconds at 64k tokens. The
// timed steps do the same work on it as on a prefilled state, so the roofline is unchanged; no
// token ids are drawn for the fill (the prompt stream then differs from the prefilled run's).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "bench/roofline.h"
#include "bench/splitmix.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer::bench {

struct StepRecord {
  int index = 0;  // logged step number, from 0
  double seconds = 0;
  // Host time until the forward had queued all its work (on a GPU the device runs behind; when
  // this is close to `seconds` the step is launch-bound). Equals `seconds` on the CPU.
  double issue_seconds = 0;
  int64_t tokens = 0;  // new tokens fed (all sequences)
  int64_t num_seqs = 0;
  double mean_context = 0;  // tokens of state per sequence before the step
  StepCost cost;
};

struct RunSpec {
  std::string mode;  // "prefill" or "decode"
  int64_t num_seqs = 1;
  int64_t tokens_per_seq = 1;  // prefill: per sequence per step (the first ones get the remainder)
  int64_t prefill_tokens = 0;  // prefill: tokens per step over all sequences
  int64_t context_length = 0;
  int warmup_steps = 0;
  int num_steps = 60;
  bool overlap = false;  // decode: steps queued behind each other (see the top)
};

struct RunResult {
  RunSpec spec;
  std::vector<StepRecord> steps;
  double fill_seconds = 0;         // untimed context fill (prefill: over all steps)
  bool synthetic_context = false;  // the context was set by fill_synthetic, not prefilled
};

struct BenchSetup {
  MachinePeaks peaks;
  RooflineDtypes dtypes;
  uint64_t seed = 0;
  int64_t fill_chunk_tokens = 8192;  // tokens per untimed context-fill forward
  bool synthetic_context = false;    // set states directly instead of the fill forwards
};

class BenchRunner {
 public:
  BenchRunner(deepseek_v4::Model& model, const BenchSetup& setup);
  RunResult run_prefill(int64_t prefill_tokens, int64_t num_seqs, int64_t context_length,
                        int warmup_steps, int num_steps);
  RunResult run_decode(int64_t num_requests, int64_t context_length, int warmup_steps,
                       int num_steps, bool overlap = false);

  const BenchSetup& setup() const { return setup_; }
  const StepTimer& timer() const { return *timer_; }

 private:
  // Feeds `context` random tokens into each state, batching sequences into chunked forwards;
  // or, synthetic, sets each state to `context` tokens with room for `reserve` more.
  // One timed forward: the logits come back on the host; issue_seconds = host time until the
  // forward had queued its work, seconds = until the logits are ready on the device (timer_;
  // their download for the next ids is not timed).
  Tensor timed_forward(std::span<const deepseek_v4::Model::BatchItem> items, double* issue_seconds,
                       double* seconds);
  void run_decode_overlapped(RunResult& r, std::vector<deepseek_v4::SequenceState>& states,
                             const std::vector<int32_t>& first_ids, int warmup_steps,
                             int num_steps);
  void fill_context(std::vector<deepseek_v4::SequenceState>& states, int64_t context,
                    int64_t reserve);
  std::vector<int32_t> random_ids(int64_t n);

  deepseek_v4::Model& model_;
  BenchSetup setup_;
  std::unique_ptr<StepTimer> timer_;
  SplitMix64 rng_;
  uint64_t synthetic_fills_ = 0;  // states filled synthetically so far (each gets its own seed)
};

// Per-step and summary numbers of a run as JSON (what --json-out holds per run).
nlohmann::json step_json(const StepRecord& s, const MachinePeaks& peaks);
nlohmann::json run_summary_json(const RunResult& r, const MachinePeaks& peaks);
nlohmann::json run_json(const RunResult& r, const MachinePeaks& peaks, bool with_steps = true);

// Readable tables: one line per run (summary), or one per step of a run.
std::string summary_table(const std::vector<RunResult>& runs, const MachinePeaks& peaks);
std::string steps_table(const RunResult& run, const MachinePeaks& peaks);

}  // namespace deepinfer::bench
