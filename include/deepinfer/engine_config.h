// Engine configuration: what the offline LLM, the CLI and (later) the server build an engine from.
#pragma once

#include <cstdint>
#include <string>

namespace deepinfer {

// DeepInfer's engine roles: NORMAL runs prefill and decode; PROMPT only prefills (and hands the
// state to a COMPLETION engine); COMPLETION only decodes.
enum class EngineType { kNormal, kPrompt, kCompletion };

struct EngineConfig {
  std::string model;      // checkpoint directory (HF layout); empty = the embedded default model
  std::string tokenizer;  // tokenizer.json or its directory; empty = the model directory
  std::string device = "cpu";  // "cpu", "cuda" or "cuda:N"
  EngineType engine_type = EngineType::kNormal;
  int expert_parallel_size = 1;
  int data_parallel_size = 1;
  // Fraction of the device memory the engine may use (weights + state + activations); on GPUs
  // it sizes state memory (capped by max_state_bytes when set).
  double gpu_memory_utilization = 0.9;
  // Upper bound on sequence-state memory; 0 = automatic (2 GiB on the CPU, on GPUs what
  // gpu_memory_utilization leaves after the weights).
  int64_t max_state_bytes = 0;
  int64_t state_page_tokens = 0;      // tokens per page of compressed entries; 0 = automatic
  int max_num_seqs = 256;             // sequences per decode step
  int64_t max_prefill_tokens = 8192;  // prompt tokens per prefill step (longer prompts chunk)
  int64_t max_model_len = 0;          // 0 = the model's max_position_embeddings
  bool show_progress = true;          // progress bar on long batches

  void validate() const;  // throws deepinfer::Error naming the field
};

}  // namespace deepinfer
