#include "kv/state_memory.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/status.h"
#include "model/deepseek_v4/state.h"

namespace deepinfer {

StateLayout StateLayout::for_model(const ModelConfig& c, int elem_bytes, int64_t page_tokens) {
  StateLayout s;
  int64_t lcm = 1;
  for (int l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_types[l] != AttnType::kSliding) lcm = std::lcm(lcm, int64_t{c.compress_rate(l)});
  s.page_tokens = page_tokens > 0 ? page_tokens : std::max<int64_t>(lcm, 256);
  DI_CHECK(s.page_tokens % lcm == 0, ErrorCode::kInvalidArgument,
           "state page of {} tokens is not a multiple of the compress rates (lcm {})",
           s.page_tokens, lcm);
  const int64_t ring_rows = deepseek_v4::ring_capacity(c);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    s.slot_bytes += ring_rows * c.head_dim * elem_bytes;
    const AttnType t = c.layer_types[l];
    if (t == AttnType::kSliding) continue;
    const int64_t m = c.compress_rate(l);
    // Pending tokens (kv + gate per series) and, for CSA, the carried window (kv + gate).
    const int series = t == AttnType::kCSA ? 2 : 1;
    s.slot_bytes += m * c.head_dim * elem_bytes * 2 * series;
    int64_t width = c.head_dim;
    if (t == AttnType::kCSA) {
      s.slot_bytes += m * c.head_dim * elem_bytes * 2;
      s.slot_bytes += m * c.index_head_dim * elem_bytes * 2 * 3;  // indexer: 2 series + carry
      width += c.index_head_dim;
    }
    s.page_bytes += s.page_tokens / m * width * elem_bytes;
  }
  return s;
}

StateMemory::StateMemory(StateLayout layout, int64_t budget_bytes)
    : layout_(layout), budget_(budget_bytes) {
  DI_CHECK(
      budget_bytes > layout.slot_bytes + layout.page_bytes, ErrorCode::kInvalidArgument,
      "state memory budget of {} bytes cannot hold even one sequence (slot {} + page {} bytes)",
      budget_bytes, layout.slot_bytes, layout.page_bytes);
}

int64_t StateMemory::pages_for(int64_t tokens) const {
  if (layout_.page_bytes == 0) return 0;
  return (tokens + layout_.page_tokens - 1) / layout_.page_tokens;
}

int64_t StateMemory::bytes_for(int64_t tokens) const {
  return layout_.slot_bytes + pages_for(tokens) * layout_.page_bytes;
}

bool StateMemory::can_allocate(int64_t tokens) const {
  return used_bytes() + bytes_for(tokens) <= budget_;
}

bool StateMemory::allocate(uint64_t seq_id, int64_t tokens) {
  DI_ASSERT(!holds(seq_id));
  if (!can_allocate(tokens)) return false;
  const int64_t pages = pages_for(tokens);
  seqs_[seq_id] = pages;
  used_slots_ += 1;
  used_pages_ += pages;
  return true;
}

bool StateMemory::grow(uint64_t seq_id, int64_t tokens) {
  auto it = seqs_.find(seq_id);
  DI_ASSERT(it != seqs_.end());
  const int64_t extra = pages_for(tokens) - it->second;
  if (extra <= 0) return true;
  if (used_bytes() + extra * layout_.page_bytes > budget_) return false;
  it->second += extra;
  used_pages_ += extra;
  return true;
}

void StateMemory::free(uint64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  used_slots_ -= 1;
  used_pages_ -= it->second;
  seqs_.erase(it);
}

int64_t StateMemory::max_tokens_per_sequence() const {
  if (layout_.page_bytes == 0) return INT64_MAX;
  return (budget_ - layout_.slot_bytes) / layout_.page_bytes * layout_.page_tokens;
}

std::string StateMemory::summary() const {
  return fmt::format(
      "state memory: budget {:.1f} MiB, used {:.1f} MiB ({} sequences x {:.1f} KiB slot, {} pages "
      "x {:.1f} KiB of {} tokens)",
      budget_ / 1048576.0, used_bytes() / 1048576.0, used_slots_, layout_.slot_bytes / 1024.0,
      used_pages_, layout_.page_bytes / 1024.0, layout_.page_tokens);
}

}  // namespace deepinfer
