// PagePool: bookkeeping of the fixed-size KV pages of one KvStorage: which
// pages are free (a bitmap), a reference count per page (one per tree node
// that holds the page) and a fill mark per page.
//
// Placement: the attention kernels load a run of pages with consecutive ids
// as one box (attention/kv_tensor_map.h: a whole 64-token tile when its pages
// are consecutive, else one box per page, measurably slower), so Allocate
// keeps a node's pages consecutive where it can: a page that starts a run at
// the start of a free aligned run of run_pages() pages, the others right
// after the node's last page, else the lowest free page. A fresh pool hands
// out 0, 1, 2, ...
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
//   pool.AddRef(p);  pool.Unref(p);  pool.Unref(p);  // free again
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
  // A pool of `num_pages` free pages. `run_pages`: pages of one run (a power
  // of two <= 64; anything else means 1, no runs). REQUIRES: 0 <= num_pages < 2^31.
  explicit PagePool(int32_t num_pages, int32_t run_pages = 1);

  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  int32_t capacity() const { return static_cast<int32_t>(ref_.size()); }
  int32_t num_free() const { return num_free_; }
  int32_t num_used() const { return capacity() - num_free(); }
  int32_t run_pages() const { return run_; }
  // REQUIRES: 0 <= page < capacity().
  bool is_free(int32_t page) const { return (free_bits_[page >> 6] >> (page & 63)) & 1u; }

  // Takes a free page with reference count 1 and fill mark 0; returns -1 when
  // none is free (the caller evicts first). Which one: with `start_run` (the
  // page opens a new run) the first page of the lowest free run of
  // run_pages() pages starting at a multiple of run_pages(), where the pool
  // has one; else `after` + 1 when `after` >= 0 and that page is free (a
  // node's next page after its last); else the lowest free page. O(1)
  // amortized for `after` + 1; a run or lowest-page search scans a summary
  // bitmap (one bit per 64 pages) from the lowest word that may hold one.
  int32_t Allocate(int32_t after = -1, bool start_run = false);

  // REQUIRES: ref(page) >= 1.
  void AddRef(int32_t page) { ++ref_[page]; }
  // Drops one reference; the page is free again at zero.
  // REQUIRES: ref(page) >= 1.
  void Unref(int32_t page) {
    if (--ref_[page] == 0) Free(page);
  }

  int32_t ref(int32_t page) const { return ref_[page]; }
  int32_t filled(int32_t page) const { return filled_[page]; }
  void set_filled(int32_t page, int32_t slots) { filled_[page] = slots; }

  // True when the next token may be written at `slot` of `page` in place.
  bool CanClaim(int32_t page, int32_t slot) const {
    return ref_[page] == 1 || filled_[page] == slot;
  }

  // Checks the free set against the reference counts: every page is either
  // free (ref 0, its bit set) or referenced, num_free() counts the free ones
  // and the run summary matches the free set. `expected_refs[p]` is the
  // number of holders recomputed by the caller; empty string when consistent.
  std::string Check(const std::vector<int32_t>& expected_refs) const;

 private:
  void Free(int32_t page);
  // Bit i of the result: pages [64 w + i, 64 w + i + run_) all free, i a multiple of run_.
  uint64_t RunStartsIn(size_t w) const;
  void UpdateRunBit(size_t w);
  int32_t FindFreeRun();
  int32_t LowestFree();

  std::vector<int32_t> ref_;
  std::vector<int32_t> filled_;
  std::vector<uint64_t> free_bits_;  // bit p % 64 of word p / 64: page p is free
  std::vector<uint64_t> run_bits_;   // bit w % 64 of word w / 64: word w of free_bits_ holds a free run
  int32_t run_ = 1;
  uint64_t run_starts_ = 0;  // bits at the multiples of run_
  int32_t num_free_ = 0;
  int32_t low_word_ = 0;      // no free page below free_bits_ word low_word_
  int32_t low_run_word_ = 0;  // no set bit below run_bits_ word low_run_word_
};

}  // namespace banyan::kv_tree

#endif  // BANYAN_KV_TREE_PAGE_POOL_H_
