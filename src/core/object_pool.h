// A free list of heap objects recycled step to step, so the hot loop does not allocate. Objects
// keep their capacity (vectors, strings) between uses; acquire() hands one out after reset().
#pragma once

#include <memory>
#include <vector>

namespace deepinfer {

template <typename T>
class ObjectPool {
 public:
  // T must have reset(), which returns it to its default state but may keep capacity.
  T* acquire() {
    if (free_.empty()) {
      all_.push_back(std::make_unique<T>());
      return all_.back().get();
    }
    T* obj = free_.back();
    free_.pop_back();
    obj->reset();
    return obj;
  }
  void release(T* obj) { free_.push_back(obj); }
  size_t allocated() const { return all_.size(); }
  size_t available() const { return free_.size(); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace deepinfer
