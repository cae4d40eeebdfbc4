#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace deepinfer {

TensorView::TensorView(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device)
    : TensorView(data, dtype, shape.begin(), static_cast<int>(shape.size()), device) {}

TensorView::TensorView(void* data, DType dtype, const int64_t* shape, int ndim, Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(ndim) {
  DI_CHECK(ndim >= 0 && ndim <= kMaxDims, ErrorCode::kInvalidArgument,
           "tensor rank {} exceeds the supported maximum of {}", ndim, kMaxDims);
  for (int i = 0; i < ndim; ++i) {
    DI_CHECK(shape[i] >= 0, ErrorCode::kInvalidArgument, "negative tensor dimension {}", shape[i]);
    shape_[i] = shape[i];
  }
  set_contiguous_strides();
}

void TensorView::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= shape_[i];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

TensorView TensorView::slice_rows(int64_t begin, int64_t end) const {
  DI_ASSERT(ndim_ >= 1 && begin >= 0 && begin <= end && end <= shape_[0]);
  DI_ASSERT(dtype_size_bits(dtype_) % 8 == 0);
  TensorView v = *this;
  v.shape_[0] = end - begin;
  v.data_ = static_cast<char*>(data_) + begin * strides_[0] * (dtype_size_bits(dtype_) / 8);
  return v;
}

TensorView TensorView::reshape(std::initializer_list<int64_t> shape) const {
  DI_ASSERT(is_contiguous());
  TensorView v(data_, dtype_, shape, device_);
  DI_CHECK(v.numel() == numel(), ErrorCode::kInternal, "reshape {} -> {} changes element count",
           shape_str(), v.shape_str());
  return v;
}

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim_; ++i) s += fmt::format("{}{}", i ? ", " : "", shape_[i]);
  return s + "]";
}

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  DI_CHECK(data_ != nullptr, ErrorCode::kOutOfMemory, "host allocation of {} bytes failed", bytes);
}

HostBuffer::~HostBuffer() {
  std::free(data_);
}

Tensor Tensor::empty(const int64_t* shape, int ndim, DType dtype) {
  TensorView probe(nullptr, dtype, shape, ndim);
  auto buf = std::make_shared<HostBuffer>(probe.nbytes());
  void* data = buf->data();
  return from_storage(std::move(buf), data, dtype, shape, ndim, Device::kCpu);
}

Tensor Tensor::from_storage(std::shared_ptr<void> owner, void* data, DType dtype,
                            const int64_t* shape, int ndim, Device device) {
  Tensor t;
  t.storage_ = std::move(owner);
  t.view_ = TensorView(data, dtype, shape, ndim, device);
  return t;
}

Tensor Tensor::empty(std::initializer_list<int64_t> shape, DType dtype) {
  return empty(shape.begin(), static_cast<int>(shape.size()), dtype);
}

Tensor Tensor::zeros(std::initializer_list<int64_t> shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.view_.data(), 0, t.view_.nbytes());
  return t;
}

Tensor Tensor::with_view(const TensorView& v) const {
  Tensor t = *this;
  t.view_ = v;
  return t;
}

Tensor Tensor::reshaped(std::initializer_list<int64_t> shape) const {
  Tensor t = *this;
  t.view_ = view_.reshape(shape);
  return t;
}

}  // namespace deepinfer
