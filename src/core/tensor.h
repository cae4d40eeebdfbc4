// Tensors: a non-owning view (pointer, dtype, device, shape, strides in elements) and an owning
// Tensor that keeps its aligned storage alive. Ops take views; owners decide lifetimes.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace deepinfer {

enum class Device : uint8_t { kCpu, kCuda };

inline constexpr int kMaxDims = 6;

class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape,
             Device device = Device::kCpu);
  TensorView(void* data, DType dtype, const int64_t* shape, int ndim, Device device = Device::kCpu);

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t dim(int i) const { return shape_[i < 0 ? i + ndim_ : i]; }
  int64_t stride(int i) const { return strides_[i < 0 ? i + ndim_ : i]; }
  int64_t numel() const;
  size_t nbytes() const { return storage_bytes(dtype_, numel()); }
  bool is_contiguous() const;
  bool empty() const { return data_ == nullptr; }

  // Sub-view of rows [begin, end) along dim 0.
  TensorView slice_rows(int64_t begin, int64_t end) const;
  // Same storage, new contiguous shape with the same element count.
  TensorView reshape(std::initializer_list<int64_t> shape) const;
  std::string shape_str() const;

 private:
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> strides_{};
  void set_contiguous_strides();
};

// Aligned host allocation (64 bytes: a cache line, and enough for AVX-512 loads).
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Owning tensor: shared storage + a view over it. empty()/zeros() allocate on the host; backends
// wrap their own device allocations with from_storage().
class Tensor {
 public:
  Tensor() = default;
  // Takes shared ownership of `owner` (whose deleter frees the memory) and views `data` with
  // the given shape on `device`.
  static Tensor from_storage(std::shared_ptr<void> owner, void* data, DType dtype,
                             const int64_t* shape, int ndim, Device device);
  static Tensor empty(std::initializer_list<int64_t> shape, DType dtype = DType::kF32);
  static Tensor empty(const int64_t* shape, int ndim, DType dtype = DType::kF32);
  static Tensor zeros(std::initializer_list<int64_t> shape, DType dtype = DType::kF32);

  const TensorView& view() const { return view_; }
  operator const TensorView&() const { return view_; }
  template <typename T>
  T* data_as() const {
    return view_.data_as<T>();
  }
  int64_t dim(int i) const { return view_.dim(i); }
  int ndim() const { return view_.ndim(); }
  int64_t numel() const { return view_.numel(); }
  DType dtype() const { return view_.dtype(); }
  bool defined() const { return storage_ != nullptr; }
  std::string shape_str() const { return view_.shape_str(); }
  // Keeps the storage, changes the (contiguous) shape.
  Tensor reshaped(std::initializer_list<int64_t> shape) const;
  // Keeps the storage, views `v` (which the caller takes from this tensor's memory, e.g. a
  // slice of view()).
  Tensor with_view(const TensorView& v) const;

 private:
  std::shared_ptr<void> storage_;
  TensorView view_;
};

}  // namespace deepinfer
