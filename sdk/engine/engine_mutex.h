// EngineMutex: the engine's lock, a std::mutex carrying Abseil's thread-safety
// annotations (so ABSL_GUARDED_BY is checked by clang), with waits on a
// std::condition_variable.
//
// Why not absl::Mutex: Debian's Abseil is built without ThreadSanitizer
// annotations, so TSan cannot see absl::Mutex's happens-before edges and
// reports false races (kv_tree/tree_mutex.h made the same switch). pthread
// mutexes and condition variables are intercepted by TSan, which makes the
// engine's concurrency tests meaningful under -DBANYAN_SANITIZE=thread.
//
// Unlike absl::Mutex::Await, a condition variable wakes nobody by itself:
// whoever changes what a waiter's predicate reads notifies its condition
// variable (engine_impl.h says which one).
//
// Thread-safe by definition.
#ifndef BANYAN_SDK_ENGINE_ENGINE_MUTEX_H_
#define BANYAN_SDK_ENGINE_ENGINE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace banyan::engine {

class ABSL_LOCKABLE EngineMutex {
 public:
  EngineMutex() = default;
  EngineMutex(const EngineMutex&) = delete;
  EngineMutex& operator=(const EngineMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the thread-safety analysis that the caller holds the lock (in a
  // callback that runs under it); checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Blocks until `ready()` is true, releasing the mutex while it sleeps on
  // `cv`; `ready` runs with the mutex held. REQUIRES: the caller holds *this.
  template <typename Predicate>
  void Wait(std::condition_variable& cv, Predicate ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    cv.wait(lock, ready);
    lock.release();  // still held: the caller's scope unlocks it
  }

 private:
  std::mutex mu_;
};

// Scoped exclusive lock.
class ABSL_SCOPED_LOCKABLE EngineLock {
 public:
  explicit EngineLock(EngineMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~EngineLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;

 private:
  EngineMutex* mu_;
};

}  // namespace banyan::engine

#endif  // BANYAN_SDK_ENGINE_ENGINE_MUTEX_H_
