#include "kv_tree/page_pool.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace banyan::kv_tree {
namespace {

// Bits at the multiples of `run` (a power of two <= 64) in a 64-bit word.
uint64_t RunStarts(int32_t run) {
  uint64_t mask = 0;
  for (int32_t i = 0; i < 64; i += run) mask |= uint64_t{1} << i;
  return mask;
}

}  // namespace

PagePool::PagePool(int32_t num_pages, int32_t run_pages)
    : ref_(num_pages, 0),
      filled_(num_pages, 0),
      free_bits_((static_cast<size_t>(num_pages) + 63) / 64, 0),
      run_bits_((free_bits_.size() + 63) / 64, 0) {
  run_ = run_pages >= 2 && run_pages <= 64 && (run_pages & (run_pages - 1)) == 0 ? run_pages : 1;
  run_starts_ = run_ >= 2 ? RunStarts(run_) : 0;
  for (int32_t p = 0; p < num_pages; ++p) free_bits_[p >> 6] |= uint64_t{1} << (p & 63);
  for (size_t w = 0; w < free_bits_.size(); ++w) UpdateRunBit(w);
  num_free_ = num_pages;
}

uint64_t PagePool::RunStartsIn(size_t w) const {
  uint64_t m = free_bits_[w];
  for (int32_t s = 1; s < run_; s *= 2) m &= m >> s;  // bit i: pages i .. i + run_ - 1 of the word all free
  return m & run_starts_;
}

void PagePool::UpdateRunBit(size_t w) {
  if (run_ < 2) return;
  const uint64_t bit = uint64_t{1} << (w & 63);
  if (RunStartsIn(w) != 0) {
    run_bits_[w >> 6] |= bit;
    if (static_cast<int32_t>(w >> 6) < low_run_word_) low_run_word_ = static_cast<int32_t>(w >> 6);
  } else {
    run_bits_[w >> 6] &= ~bit;
  }
}

void PagePool::Free(int32_t page) {
  free_bits_[page >> 6] |= uint64_t{1} << (page & 63);
  ++num_free_;
  if ((page >> 6) < low_word_) low_word_ = page >> 6;
  UpdateRunBit(static_cast<size_t>(page >> 6));
}

int32_t PagePool::Allocate(int32_t after, bool start_run) {
  if (num_free_ == 0) return -1;
  int32_t page = start_run && run_ >= 2 ? FindFreeRun() : -1;
  if (page < 0 && after >= 0 && after + 1 < capacity() && is_free(after + 1)) page = after + 1;
  if (page < 0) page = LowestFree();
  free_bits_[page >> 6] &= ~(uint64_t{1} << (page & 63));
  UpdateRunBit(static_cast<size_t>(page >> 6));
  --num_free_;
  ref_[page] = 1;
  filled_[page] = 0;
  return page;
}

int32_t PagePool::LowestFree() {
  while (free_bits_[low_word_] == 0) ++low_word_;  // num_free_ > 0: a set bit exists at or above it
  return low_word_ * 64 + std::countr_zero(free_bits_[low_word_]);
}

int32_t PagePool::FindFreeRun() {
  const int32_t n = static_cast<int32_t>(run_bits_.size());
  while (low_run_word_ < n && run_bits_[low_run_word_] == 0) ++low_run_word_;
  if (low_run_word_ == n) return -1;
  const size_t w = static_cast<size_t>(low_run_word_) * 64 + std::countr_zero(run_bits_[low_run_word_]);
  return static_cast<int32_t>(w * 64) + std::countr_zero(RunStartsIn(w));
}

std::string PagePool::Check(const std::vector<int32_t>& expected_refs) const {
  if (expected_refs.size() != ref_.size()) return "page count mismatch";
  if (free_bits_.size() != (ref_.size() + 63) / 64 || run_bits_.size() != (free_bits_.size() + 63) / 64) {
    return "free set size mismatch";
  }
  int32_t free = 0;
  for (size_t w = 0; w < free_bits_.size(); ++w) {
    for (int b = 0; b < 64; ++b) {
      if (!((free_bits_[w] >> b) & 1u)) continue;
      const int64_t p = static_cast<int64_t>(w) * 64 + b;
      if (p >= capacity()) return absl::StrCat("free set holds bad page ", p);
      if (w < static_cast<size_t>(low_word_)) return absl::StrCat("free page ", p, " below the scan start");
      if (ref_[p] != 0) return absl::StrCat("free page ", p, " has ref ", ref_[p]);
      ++free;
    }
    const bool has_run = run_ >= 2 && RunStartsIn(w) != 0;
    if (has_run != (((run_bits_[w >> 6] >> (w & 63)) & 1u) != 0)) return absl::StrCat("run summary wrong at word ", w);
    if (has_run && static_cast<int32_t>(w >> 6) < low_run_word_) return absl::StrCat("run below the scan start ", w);
  }
  if (free != num_free_) return absl::StrCat(free, " pages free but num_free ", num_free_);
  for (int32_t p = 0; p < capacity(); ++p) {
    if (ref_[p] != expected_refs[p]) {
      return absl::StrCat("page ", p, " ref ", ref_[p], " but ", expected_refs[p], " holders");
    }
    if (ref_[p] == 0 && !is_free(p)) return absl::StrCat("page ", p, " leaked (ref 0, not free)");
    if (ref_[p] < 0) return absl::StrCat("page ", p, " negative ref");
  }
  return "";
}

}  // namespace banyan::kv_tree
