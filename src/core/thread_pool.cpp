#include "core/thread_pool.h"

#include <algorithm>
#include <utility>

#include "core/env.h"

namespace deepinfer {

namespace {
thread_local bool t_inside_pool = false;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(env::get_int("DEEPINFER_NUM_THREADS"));
  if (num_threads <= 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::worker_loop(int) {
  t_inside_pool = true;
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock,
                  [&] { return stop_ || (generation_ != seen && next_chunk_ < job_chunks_); });
    if (stop_) return;
    seen = generation_;
    while (next_chunk_ < job_chunks_) {
      const int c = next_chunk_++;
      const int64_t b = c * job_chunk_, e = std::min(job_n_, b + job_chunk_);
      const auto* fn = job_;
      lock.unlock();
      try {
        (*fn)(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> g(mu_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t max_chunks = std::min<int64_t>((n + grain - 1) / grain, 4 * size());
  if (max_chunks <= 1 || workers_.empty() || t_inside_pool) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = (n + max_chunks - 1) / max_chunks;
  job_chunks_ = static_cast<int>((n + job_chunk_ - 1) / job_chunk_);
  next_chunk_ = 0;
  pending_ = job_chunks_;
  error_ = nullptr;
  ++generation_;
  work_cv_.notify_all();
  // The caller works too.
  t_inside_pool = true;
  while (next_chunk_ < job_chunks_) {
    const int c = next_chunk_++;
    const int64_t b = c * job_chunk_, e = std::min(n, b + job_chunk_);
    lock.unlock();
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!error_) error_ = std::current_exception();
    }
    lock.lock();
    --pending_;
  }
  t_inside_pool = false;
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace deepinfer
