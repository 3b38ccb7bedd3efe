// StableVector: a growable array whose elements never move. Storage is a
// table of fixed chunks of 2^kChunkBits elements, so references and pointers
// to elements stay valid while it grows (as with std::deque), and an index
// is a shift and a mask: two loads, the first from a small, hot chunk table.
// KvTree keeps its nodes in one: std::deque<Node>'s operator[] (blocks of two
// nodes, iterator arithmetic per access) was ~15% of the engine's host step
// instructions at 1,024 branches (callgrind, attention/PERF_NOTES.md session
// 17).
//
// Elements are default-constructed a chunk at a time, when the first of them
// is appended; there is no erase (KvTree recycles indices itself). Not
// thread-safe: the owner synchronizes (KvTree: its mutex).
#ifndef BANYAN_KV_TREE_STABLE_VECTOR_H_
#define BANYAN_KV_TREE_STABLE_VECTOR_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace banyan::kv_tree {

template <typename T, int kChunkBits = 8>
class StableVector {
 public:
  static constexpr size_t kChunk = size_t{1} << kChunkBits;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // REQUIRES: i < size().
  T& operator[](size_t i) { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  // Appends a default-constructed element and returns it. Never moves the
  // elements already there.
  T& emplace_back() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_STABLE_VECTOR_H_
