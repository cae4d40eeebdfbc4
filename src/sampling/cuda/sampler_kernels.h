// Launchers of the device sampler's kernels: plain C++17 (no C++20 deepinfer headers), raw
// device pointers and POD rows, so the .cu file compiles under nvcc's C++17 while DeviceSampler
// (C++20, device_sampler.h) builds the rows. Every launcher enqueues on `stream`, never
// synchronises, and returns the launch status.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::sampling::cuda {

// One row sampled on the device (host-validated: 0 <= row < R, temperature > 0 unless greedy).
struct RowParams {
  int64_t row;  // logits row index
  uint64_t seed;
  int64_t position;
  float temperature;
  float min_p;
  float repetition_penalty;
  float frequency_penalty;
  float presence_penalty;
  int32_t top_k;     // applied when 0 < top_k < number of candidates
  uint32_t top_p_q;  // lround(top_p * 2^24) when top_p < 1, else kTopPOff
  int32_t greedy;    // 1: argmax of the processed logits
};
static_assert(sizeof(RowParams) == 56, "RowParams is shared by g++ and nvcc");

inline constexpr uint32_t kTopPOff = 1u << 24;

// One logit of one row edited by the processors, in their order: mask (min_tokens), + bias,
// repetition penalty, frequency * count + presence. (slot, token) pairs are unique.
enum : uint32_t {
  kEditMask = 1,
  kEditBias = 2,
  kEditRepetition = 4,
  kEditFrequency = 8,  // frequency and presence penalties, count > 0
};
struct LogitEdit {
  int32_t slot;   // index into the RowParams array
  int32_t token;  // 0 <= token < V
  int32_t count;  // occurrences in the output (kEditFrequency)
  uint32_t flags;
  float bias;  // kEditBias
};
static_assert(sizeof(LogitEdit) == 20, "LogitEdit is shared by g++ and nvcc");

// Per-row outcome written by launch_sample_rows.
enum : int32_t {
  kRowOk = 0,
  kRowAllMasked = 1,  // every logit -inf / NaN after processing
  kRowInternal = 2,   // a broken invariant of the selection (a bug)
};

// Applies `edits` to logits [R, V] (row stride V) in place.
cudaError_t launch_apply_edits(float* logits, int64_t V, const RowParams* rows,
                               const LogitEdit* edits, int64_t n_edits, cudaStream_t stream);

// Samples one token for each of rows[0, n_rows) from its (processed) logits row: tokens[i] and
// status[i], and, when next_ids is given, next_ids[rows[i].row] = the token, or 0 for a row
// that failed (the next step's input ids, kept on the device). One block per row; logits are
// only read.
cudaError_t launch_sample_rows(const float* logits, int64_t V, const RowParams* rows,
                               int64_t n_rows, int32_t* tokens, int32_t* status, int32_t* next_ids,
                               cudaStream_t stream);

}  // namespace deepinfer::sampling::cuda
