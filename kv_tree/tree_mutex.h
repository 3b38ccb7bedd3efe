// TreeMutex: KvTree's reader-writer lock, a std::shared_mutex carrying Abseil's
// thread-safety annotations (so ABSL_GUARDED_BY is checked by clang).
//
// Why not absl::Mutex: Debian's Abseil is built without ThreadSanitizer
// annotations, so TSan cannot see absl::Mutex's happens-before edges and
// reports false races; pthread locks (under std::shared_mutex) are intercepted
// by TSan, which makes the concurrency tests meaningful under
// -DBANYAN_SANITIZE=thread. Thread-safe by definition.
#ifndef BANYAN_KV_TREE_TREE_MUTEX_H_
#define BANYAN_KV_TREE_TREE_MUTEX_H_

#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace banyan::kv_tree {

class ABSL_LOCKABLE TreeMutex {
 public:
  TreeMutex() = default;
  TreeMutex(const TreeMutex&) = delete;
  TreeMutex& operator=(const TreeMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Scoped exclusive lock.
class ABSL_SCOPED_LOCKABLE TreeLock {
 public:
  explicit TreeLock(TreeMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~TreeLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  TreeLock(const TreeLock&) = delete;
  TreeLock& operator=(const TreeLock&) = delete;

 private:
  TreeMutex* mu_;
};

// Scoped shared (reader) lock.
class ABSL_SCOPED_LOCKABLE TreeReaderLock {
 public:
  explicit TreeReaderLock(TreeMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~TreeReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  TreeReaderLock(const TreeReaderLock&) = delete;
  TreeReaderLock& operator=(const TreeReaderLock&) = delete;

 private:
  TreeMutex* mu_;
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_TREE_MUTEX_H_
