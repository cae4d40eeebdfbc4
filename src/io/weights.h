// Checkpoint weights by canonical name. Canonical names are the official DeepSeek-V4 names
// without a "model." prefix (embed.weight, head.weight, norm.weight, hc_head_fn,
// layers.N.attn.wq_a.weight, layers.N.ffn.experts.E.w1.weight, ...). Files may use the
// official names, transformers' saved names (model. prefix, hc_head.hc_fn) or transformers'
// in-memory names (self_attn.q_a_proj, mlp.experts.gate_up_proj [E, 2I, D], ...): all map to
// one canonical set at open time. Quantised tensors (FP8 e4m3 with 128x128 block scales, MXFP4
// e2m1 with e8m0 scales per 32) are dequantised when read.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace deepinfer {

class SafetensorsFile;

class WeightStore {
 public:
  // dir holds model.safetensors or model.safetensors.index.json (+ shards); a path to one
  // .safetensors file also works. Opening maps the files and validates every header and
  // weight/scale pair; tensor bytes are read (and dequantised) only by get_*. The const readers
  // may run on several threads at once.
  static std::unique_ptr<WeightStore> open(const std::string& dir);
  ~WeightStore();

  bool has(const std::string& canonical_name) const;
  // The tensor converted to fp32 with the given shape; errors name the tensor and the file when
  // it is missing or its shape differs.
  Tensor get_f32(const std::string& canonical_name, std::initializer_list<int64_t> shape) const;
  // Integer tensors (tid2eid): converted to int32, range not checked here.
  Tensor get_i32(const std::string& canonical_name, std::initializer_list<int64_t> shape) const;
  // The same, for shapes built at run time.
  Tensor get_f32(const std::string& canonical_name, const std::vector<int64_t>& shape) const;
  Tensor get_i32(const std::string& canonical_name, const std::vector<int64_t>& shape) const;
  // Where the tensor is stored in MXFP4 (e2m1 pairs, one e8m0 scale per 32 values of a row) and
  // its rows are whole scale blocks: copies its packed bytes ([rows, cols / 2], the low nibble
  // the even column) to `packed` and its scales ([rows, cols / 32]) to `scales` and returns true.
  // Any other storage: false, nothing copied. The shape is checked as get_f32 checks it.
  bool get_mxfp4(const std::string& canonical_name, const std::vector<int64_t>& shape,
                 uint8_t* packed, uint8_t* scales) const;
  std::vector<std::string> canonical_names() const;

  // The shape get_f32 produces (quantised tensors: the dequantised shape; slices of fused
  // expert tensors: one expert's matrix). Throws kNotFound for an unknown name.
  std::vector<int64_t> shape(const std::string& canonical_name) const;
  // Where a canonical name comes from, for messages: "'<on-disk name>' in file '<path>'".
  std::string describe(const std::string& canonical_name) const;
  const std::string& dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  WeightStore();
};

}  // namespace deepinfer
