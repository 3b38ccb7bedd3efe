// ThreadPool: a fixed set of worker threads that run one data-parallel loop at
// a time, for the CPU backend's ops (matmuls, attention heads).
//
//   ThreadPool pool(/*num_threads=*/2);
//   pool.ParallelFor(rows, /*grain=*/4, [&](int64_t begin, int64_t end) { ... });
//
// ParallelFor splits [0, n) into chunks of at least `grain` items, runs them on
// the workers and on the calling thread, and returns when every chunk is done.
// Workers spin briefly (about 50 us) between jobs before sleeping on a
// condition variable, since a forward pass issues hundreds of short loops.
// Ownership: the pool owns its threads; the destructor joins them.
// Thread-safety: ParallelFor may be called from one thread at a time (calls
// from several threads are serialized by an internal mutex). The body must not
// call ParallelFor on the same pool (that would deadlock). Nothing here fails.
#ifndef BANYAN_MODEL_OPS_THREAD_POOL_H_
#define BANYAN_MODEL_OPS_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace banyan::model::ops {

class ThreadPool {
 public:
  // A pool that runs loops on `num_threads` threads in total (the caller plus
  // num_threads - 1 workers). num_threads <= 0 means the hardware concurrency.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs body(begin, end) over disjoint chunks covering [0, n). grain >= 1 is
  // the smallest chunk worth a thread. Returns after every chunk has run.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

 private:
  void WorkerLoop();
  // Claims and runs chunks of the current job until none is left.
  void RunChunks();

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mu_;  // serializes ParallelFor callers
  std::mutex mu_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stop_ = false;             // guarded by mu_
  // Bumped per job (written under mu_; read without it by spinning workers).
  std::atomic<uint64_t> generation_{0};
  int64_t next_chunk_ = 0;        // guarded by mu_
  int64_t num_chunks_ = 0;        // guarded by mu_
  // Written under mu_; read without it by the spinning caller.
  std::atomic<int64_t> chunks_done_{0};
  int64_t n_ = 0, chunk_ = 0;     // guarded by mu_ (constant during a job)
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;  // guarded by mu_
};

}  // namespace banyan::model::ops

#endif  // BANYAN_MODEL_OPS_THREAD_POOL_H_
