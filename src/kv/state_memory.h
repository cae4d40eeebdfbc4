// State memory for DeepSeek-V4 sequences, sized from a byte budget. Each running sequence holds
// one fixed-size slot (its sliding-window rings and compressor buffers, the same size for every
// sequence) plus pages of compressed entries (each page covers `page_tokens` consecutive tokens
// of every CSA / HCA layer and the CSA indexer keys), taken from a shared pool as the sequence
// grows. The scheduler asks here before it admits, grows or preempts a sequence.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/model_config.h"

namespace deepinfer {

struct StateLayout {
  int64_t slot_bytes = 0;   // rings + compressor pending buffers + CSA overlap carry
  int64_t page_bytes = 0;   // compressed entries of `page_tokens` tokens over all layers
  int64_t page_tokens = 0;  // a multiple of every compress rate

  // Computed from the config for element size `elem_bytes` (4 on the CPU, 2 for bf16).
  static StateLayout for_model(const ModelConfig& config, int elem_bytes, int64_t page_tokens = 0);
};

class StateMemory {
 public:
  StateMemory(StateLayout layout, int64_t budget_bytes);

  const StateLayout& layout() const { return layout_; }
  int64_t pages_for(int64_t tokens) const;
  // Bytes a sequence of `tokens` tokens holds.
  int64_t bytes_for(int64_t tokens) const;

  // True if a sequence of `tokens` tokens fits next to what is allocated now.
  bool can_allocate(int64_t tokens) const;
  // Takes a slot and the pages for `tokens`; false (and nothing taken) if they do not fit.
  bool allocate(uint64_t seq_id, int64_t tokens);
  // Grows an allocated sequence to `tokens`; false (and nothing taken) if the pages do not fit.
  bool grow(uint64_t seq_id, int64_t tokens);
  void free(uint64_t seq_id);
  bool holds(uint64_t seq_id) const { return seqs_.count(seq_id) != 0; }

  int64_t budget_bytes() const { return budget_; }
  int64_t used_bytes() const {
    return used_slots_ * layout_.slot_bytes + used_pages_ * layout_.page_bytes;
  }
  int64_t used_pages() const { return used_pages_; }
  int64_t used_slots() const { return used_slots_; }
  // The largest single sequence (in tokens) that fits in an otherwise empty budget.
  int64_t max_tokens_per_sequence() const;
  // One line per quantity, for logs and `DEEPINFER_CPU_TIMER`-style reports.
  std::string summary() const;

 private:
  StateLayout layout_;
  int64_t budget_;
  int64_t used_slots_ = 0, used_pages_ = 0;
  std::unordered_map<uint64_t, int64_t> seqs_;  // seq id -> pages held
};

}  // namespace deepinfer
