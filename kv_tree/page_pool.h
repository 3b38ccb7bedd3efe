// PagePool: bookkeeping of the fixed-size KV pages of one KvStorage. O(1)
// allocation from a free list, a reference count per page (one per tree node
// that holds the page) and a fill mark per page.
//
// Fill mark: the slots of a page are written in order, from slot 0 up. filled(p)
// is the number of slots [0, filled) that hold written K/V. Every holder of a
// page uses only slots below its fill mark, so the next token may be written at
// slot s of page p without disturbing anyone iff s == filled(p) (nobody owns a
// slot at or beyond it) or p has a single holder (who may rewind the mark). Any
// other write is a copy on write: see KvTree.
//
//   PagePool pool(num_pages);
//   int32_t p = pool.Allocate();      // -1 when no page is free
//   pool.AddRef(p);  pool.Unref(p);  pool.Unref(p);  // back on the free list
//
// Thread-compatible: KvTree serializes all calls under its lock.
#ifndef BANYAN_KV_TREE_PAGE_POOL_H_
#define BANYAN_KV_TREE_PAGE_POOL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace banyan::kv_tree {

class PagePool {
 public:
  // A pool of `num_pages` free pages. REQUIRES: 0 <= num_pages < 2^31.
  explicit PagePool(int32_t num_pages);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int32_t capacity() const { return static_cast<int32_t>(ref_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return capacity() - num_free(); }

  // Takes a free page with reference count 1 and fill mark 0; returns -1 when
  // none is free (the caller evicts first). O(1).
  int32_t Allocate() {
    if (free_.empty()) return -1;
    const int32_t page = free_.back();
    free_.pop_back();
    ref_[page] = 1;
    filled_[page] = 0;
    return page;
  }

  // REQUIRES: ref(page) >= 1.
  void AddRef(int32_t page) { ++ref_[page]; }
  // Drops one reference; the page returns to the free list at zero.
  // REQUIRES: ref(page) >= 1.
  void Unref(int32_t page) {
    if (--ref_[page] == 0) free_.push_back(page);
  }

  int32_t ref(int32_t page) const { return ref_[page]; }
  int32_t filled(int32_t page) const { return filled_[page]; }
  void set_filled(int32_t page, int32_t slots) { filled_[page] = slots; }

  // True when the next token may be written at `slot` of `page` in place.
  bool CanClaim(int32_t page, int32_t slot) const {
    return ref_[page] == 1 || filled_[page] == slot;
  }

  // Checks the free list against the reference counts: every page is either
  // free (ref 0, listed once) or referenced. `expected_refs[p]` is the number
  // of holders recomputed by the caller; empty string when consistent.
  std::string Check(const std::vector<int32_t>& expected_refs) const;

 private:
  std::vector<int32_t> ref_;
  std::vector<int32_t> filled_;
  std::vector<int32_t> free_;
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_PAGE_POOL_H_
