#include "deepinfer/engine_config.h"
#include "core/status.h"

namespace deepinfer {

void EngineConfig::validate() const {
  DI_CHECK(!model.empty(), ErrorCode::kInvalidArgument, "model: no model directory given");
  DI_CHECK(expert_parallel_size == 1, ErrorCode::kUnsupported,
           "expert_parallel_size={}: only 1 is supported until the parallel backend lands",
           expert_parallel_size);
  DI_CHECK(data_parallel_size == 1, ErrorCode::kUnsupported,
           "data_parallel_size={}: only 1 is supported until the parallel backend lands",
           data_parallel_size);
  DI_CHECK(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1, ErrorCode::kInvalidArgument,
           "gpu_memory_utilization={} must be in (0, 1]", gpu_memory_utilization);
  DI_CHECK(max_state_bytes >= 0, ErrorCode::kInvalidArgument,
           "max_state_bytes={} must be >= 0 (0 = automatic)", max_state_bytes);
  DI_CHECK(state_page_tokens >= 0, ErrorCode::kInvalidArgument, "state_page_tokens={} must be >= 0",
           state_page_tokens);
  DI_CHECK(max_num_seqs > 0, ErrorCode::kInvalidArgument, "max_num_seqs={} must be positive",
           max_num_seqs);
  DI_CHECK(max_prefill_tokens > 0, ErrorCode::kInvalidArgument,
           "max_prefill_tokens={} must be positive", max_prefill_tokens);
  DI_CHECK(max_model_len >= 0, ErrorCode::kInvalidArgument, "max_model_len={} must be >= 0",
           max_model_len);
}

}  // namespace deepinfer
