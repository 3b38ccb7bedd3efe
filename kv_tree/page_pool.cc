#include "kv_tree/page_pool.h"

#include "absl/strings/str_cat.h"

namespace banyan::kv_tree {

PagePool::PagePool(int32_t num_pages) : ref_(num_pages, 0), filled_(num_pages, 0) {
  free_.reserve(num_pages);
  // Hand out low page ids first (pop from the back).
  for (int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

std::string PagePool::Check(const std::vector<int32_t>& expected_refs) const {
  if (expected_refs.size() != ref_.size()) return "page count mismatch";
  std::vector<char> listed(ref_.size(), 0);
  for (int32_t p : free_) {
    if (p < 0 || p >= capacity()) return absl::StrCat("free list holds bad page ", p);
    if (listed[p]++) return absl::StrCat("page ", p, " listed free twice");
    if (ref_[p] != 0) return absl::StrCat("free page ", p, " has ref ", ref_[p]);
  }
  for (int32_t p = 0; p < capacity(); ++p) {
    if (ref_[p] != expected_refs[p]) {
      return absl::StrCat("page ", p, " ref ", ref_[p], " but ", expected_refs[p], " holders");
    }
    if (ref_[p] == 0 && !listed[p]) return absl::StrCat("page ", p, " leaked (ref 0, not free)");
    if (ref_[p] < 0) return absl::StrCat("page ", p, " negative ref");
  }
  return "";
}

}  // namespace banyan::kv_tree
