#include "model/ops/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BANYAN_CPU_RELAX() _mm_pause()
#else
#define BANYAN_CPU_RELAX() ((void)0)
#endif

namespace banyan::model::ops {
namespace {

// Spins up to ~50 us until done() holds; returns whether it did.
template <typename Done>
bool SpinUntil(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  while (true) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      BANYAN_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(num_threads > 0 ? num_threads
                                   : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::RunChunks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (next_chunk_ < num_chunks_) {
    const int64_t c = next_chunk_++;
    const int64_t begin = c * chunk_;
    const int64_t end = std::min(n_, begin + chunk_);
    const auto* body = body_;
    lock.unlock();
    (*body)(begin, end);
    lock.lock();
    if (chunks_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_chunks_) done_.notify_all();
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_relaxed) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_relaxed);
    }
    RunChunks();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  // A few chunks per thread balance uneven chunk costs.
  const int64_t max_chunks = std::max<int64_t>(1, std::min<int64_t>((n + grain - 1) / grain,
                                                                    int64_t{num_threads_} * 4));
  if (num_threads_ == 1 || max_chunks == 1) {
    body(0, n);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    chunk_ = (n + max_chunks - 1) / max_chunks;
    num_chunks_ = (n + chunk_ - 1) / chunk_;
    next_chunk_ = 0;
    chunks_done_.store(0, std::memory_order_relaxed);
    body_ = &body;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  RunChunks();
  const int64_t total = num_chunks_;  // constant during the job; only this caller changes it
  SpinUntil([&] { return chunks_done_.load(std::memory_order_acquire) == total; });
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return chunks_done_.load(std::memory_order_relaxed) == num_chunks_; });
  body_ = nullptr;
}

}  // namespace banyan::model::ops
