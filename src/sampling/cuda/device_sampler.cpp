#include "sampling/cuda/device_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace deepinfer::sampling {

namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    fail(ErrorCode::kInternal, "CUDA error in the device sampler ({}): {}", what,
         cudaGetErrorString(err));
}

// Capacity for n, with headroom so that slowly growing batches do not reallocate every call.
size_t grown(size_t n) {
  return std::max<size_t>(n + n / 2, 64);
}

}  // namespace

DeviceSampler::DeviceSampler(cudaStream_t stream) : stream_(stream) {
  check_cuda(cudaEventCreateWithFlags(&tokens_ready_, cudaEventDisableTiming), "cudaEventCreate");
}

DeviceSampler::~DeviceSampler() {
  // Errors are ignored here: a destructor cannot report them, and a failed device is reported
  // by whatever runs next. Buffers a queued launch may still use are freed after it.
  if (launched_) cudaEventSynchronize(tokens_ready_);
  cudaEventDestroy(tokens_ready_);
  for (void* p : retired_host_) cudaFreeHost(p);
  for (void* p : retired_device_) cudaFree(p);
  cudaFreeHost(h_in_);
  cudaFree(d_in_);
  cudaFreeHost(h_out_);
  cudaFree(d_out_);
  cudaFreeHost(h_rows_);
}

void DeviceSampler::reserve(size_t in_bytes, size_t out_rows, size_t cpu_floats) {
  // Grown buffers are retired, not freed: cudaFree / cudaFreeHost would wait for the device,
  // and launch() must not (the engine queues it behind a running forward). Growth is
  // geometric, so the retired ones add up to less than the live ones.
  if (in_bytes > in_capacity_) {
    retired_host_.push_back(h_in_);
    retired_device_.push_back(d_in_);
    h_in_ = d_in_ = nullptr;
    in_capacity_ = 0;
    const size_t cap = grown(in_bytes);
    check_cuda(cudaMallocHost(&h_in_, cap), "cudaMallocHost");
    check_cuda(cudaMalloc(&d_in_, cap), "cudaMalloc");
    in_capacity_ = cap;
  }
  if (out_rows > out_capacity_) {
    retired_host_.push_back(h_out_);
    retired_device_.push_back(d_out_);
    h_out_ = d_out_ = nullptr;
    out_capacity_ = 0;
    const size_t cap = grown(out_rows);
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&h_out_), 2 * cap * sizeof(int32_t)),
               "cudaMallocHost");
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&d_out_), 2 * cap * sizeof(int32_t)),
               "cudaMalloc");
    out_capacity_ = cap;
  }
  if (cpu_floats > rows_capacity_) {
    retired_host_.push_back(h_rows_);
    h_rows_ = nullptr;
    rows_capacity_ = 0;
    const size_t cap = grown(cpu_floats);
    check_cuda(cudaMallocHost(reinterpret_cast<void**>(&h_rows_), cap * sizeof(float)),
               "cudaMallocHost");
    rows_capacity_ = cap;
  }
}

std::vector<DeviceSampleResult> DeviceSampler::sample(float* logits, int64_t R, int64_t V,
                                                      std::span<const SampleRow> rows,
                                                      LogprobsMode mode) {
  launch(logits, R, V, rows, nullptr, mode);
  return collect();
}

std::vector<bool> DeviceSampler::launch(float* logits, int64_t R, int64_t V,
                                        std::span<const SampleRow> rows, int32_t* next_ids,
                                        LogprobsMode mode) {
  DI_CHECK(!launched_, ErrorCode::kInternal, "device sampler: launch before the last collect");
  DI_CHECK(V > 0, ErrorCode::kInvalidArgument, "vocab_size must be > 0, got {}", V);
  // sampler.cpp's limit (total weights below 2^64).
  DI_CHECK(V < (int64_t{1} << 23), ErrorCode::kInvalidArgument,
           "vocabulary of {} tokens is too large to sample from", V);
  DI_CHECK(R >= 0 && static_cast<size_t>(R) == rows.size(), ErrorCode::kInvalidArgument,
           "{} logits rows but {} sample rows", R, rows.size());
  std::vector<DeviceSampleResult> out(rows.size());
  std::vector<bool> in_next(rows.size(), false);
  DI_CHECK(R == 0 || logits != nullptr, ErrorCode::kInvalidArgument, "logits is null");

  stager_.clear(V);
  std::vector<int64_t> device_rows, cpu_rows;
  for (int64_t i = 0; i < R; ++i) {
    const SampleRow& r = rows[i];
    if (r.params == nullptr) {
      out[i].error = Error(ErrorCode::kInvalidArgument, fmt::format("row {} has no params", i));
    } else if (r.params->logprobs.has_value()) {
      cpu_rows.push_back(i);
    } else {
      try {
        stager_.add(i, r);
        device_rows.push_back(i);
        in_next[i] = next_ids != nullptr;
      } catch (const Error& e) {
        out[i].error = e;
      }
    }
  }

  const std::vector<cuda::RowParams>& params = stager_.params();
  const std::vector<cuda::LogitEdit>& edits = stager_.edits();
  const size_t n = params.size();
  const size_t params_bytes = n * sizeof(cuda::RowParams);
  const size_t in_bytes = params_bytes + edits.size() * sizeof(cuda::LogitEdit);
  reserve(in_bytes, n, cpu_rows.size() * static_cast<size_t>(V));

  // Raw rows for the CPU first (the device never touches them).
  for (size_t k = 0; k < cpu_rows.size(); ++k) {
    check_cuda(cudaMemcpyAsync(h_rows_ + k * V, logits + cpu_rows[k] * V, V * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_),
               "download of a logprobs row");
  }
  if (n > 0) {
    auto* h = static_cast<unsigned char*>(h_in_);
    std::memcpy(h, params.data(), params_bytes);
    if (!edits.empty())
      std::memcpy(h + params_bytes, edits.data(), edits.size() * sizeof(cuda::LogitEdit));
    check_cuda(cudaMemcpyAsync(d_in_, h_in_, in_bytes, cudaMemcpyHostToDevice, stream_),
               "upload of the row parameters");
    const auto* d_params = static_cast<const cuda::RowParams*>(d_in_);
    const auto* d_edits = reinterpret_cast<const cuda::LogitEdit*>(
        static_cast<const unsigned char*>(d_in_) + params_bytes);
    check_cuda(cuda::launch_apply_edits(logits, V, d_params, d_edits,
                                        static_cast<int64_t>(edits.size()), stream_),
               "logits processors kernel");
    check_cuda(cuda::launch_sample_rows(logits, V, d_params, static_cast<int64_t>(n), d_out_,
                                        d_out_ + n, next_ids, stream_),
               "sampling kernel");
    check_cuda(
        cudaMemcpyAsync(h_out_, d_out_, 2 * n * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_),
        "download of the tokens");
  }
  check_cuda(cudaEventRecord(tokens_ready_, stream_), "cudaEventRecord");

  // Logprobs rows are sampled on the host by collect(), from copies of what they need (the
  // caller's rows and contexts may change before then).
  host_rows_.clear();
  for (const int64_t i : cpu_rows) {
    const SampleRow& r = rows[i];
    host_rows_.push_back({i,
                          *r.params,
                          r.seq_seed,
                          r.position,
                          {r.context.prompt_token_ids.begin(), r.context.prompt_token_ids.end()},
                          {r.context.output_token_ids.begin(), r.context.output_token_ids.end()},
                          {r.context.eos_token_ids.begin(), r.context.eos_token_ids.end()}});
  }
  mode_ = mode;
  pending_ = std::move(out);
  device_rows_ = std::move(device_rows);
  vocab_ = V;
  launched_ = true;
  return in_next;
}

std::vector<DeviceSampleResult> DeviceSampler::collect() {
  DI_CHECK(launched_, ErrorCode::kInternal, "device sampler: collect without a launch");
  launched_ = false;
  check_cuda(cudaEventSynchronize(tokens_ready_), "synchronisation");
  std::vector<DeviceSampleResult> out = std::move(pending_);
  const size_t n = device_rows_.size();
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = device_rows_[k];
    const int32_t token = h_out_[k], status = h_out_[n + k];
    if (status == cuda::kRowOk && token >= 0 && token < vocab_) {
      out[i].token = token;
    } else if (status == cuda::kRowAllMasked) {
      out[i].error =
          Error(ErrorCode::kInvalidArgument,
                "cannot sample: every logit is -inf or NaN after processing (all tokens masked)");
    } else {
      out[i].error = Error(ErrorCode::kInternal,
                           fmt::format("device sampler: no token selected for row {} (status "
                                       "{}, token {})",
                                       i, status, token));
    }
  }
  for (size_t k = 0; k < host_rows_.size(); ++k) {
    const HostRow& h = host_rows_[k];
    TokenContext ctx;
    ctx.prompt_token_ids = h.prompt;
    ctx.output_token_ids = h.output;
    ctx.eos_token_ids = h.eos;
    try {
      SampleResult res = sample_row(std::span<float>(h_rows_ + k * vocab_, vocab_), h.params,
                                    h.seed, h.position, ctx, mode_);
      out[h.row].token = res.token;
      out[h.row].logprobs = std::move(res.logprobs);
    } catch (const Error& e) {
      out[h.row].error = e;
    }
  }
  host_rows_.clear();
  return out;
}

}  // namespace deepinfer::sampling
