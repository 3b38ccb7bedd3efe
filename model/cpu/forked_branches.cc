#include "model/cpu/forked_branches.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::model {

ForwardBatch Step::batch() const {
  ForwardBatch b;
  b.tokens = tokens;
  b.positions = positions;
  b.kv_pages = kv_pages;
  b.kv_slots = kv_slots;
  b.plan = &plan;
  b.logit_rows = logit_rows;
  return b;
}

ForkedBranches::ForkedBranches(int32_t page_size, int64_t num_pages)
    : page_size_(page_size), num_pages_(num_pages) {}

absl::StatusOr<int32_t> ForkedBranches::AllocatePage() {
  if (next_page_ >= num_pages_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool of ", num_pages_, " pages is full"));
  }
  return static_cast<int32_t>(next_page_++);
}

absl::Status ForkedBranches::SetPrompt(absl::Span<const int32_t> prompt) {
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  if (!prompt_.empty()) return absl::InvalidArgumentError("prompt already set");
  const int64_t pages = (static_cast<int64_t>(prompt.size()) + page_size_ - 1) / page_size_;
  if (next_page_ + pages > num_pages_) {
    return absl::ResourceExhaustedError(absl::StrCat("prompt needs ", pages, " KV pages, pool has ",
                                                     num_pages_ - next_page_));
  }
  for (int64_t i = 0; i < pages; ++i) prompt_pages_.push_back(static_cast<int32_t>(next_page_++));
  prompt_.assign(prompt.begin(), prompt.end());
  return absl::OkStatus();
}

Step ForkedBranches::PrefillStep(bool all_logits) const {
  Step s;
  const int32_t n = static_cast<int32_t>(prompt_.size());
  s.tokens = prompt_;
  auto& p = s.plan;
  p.num_queries = n;
  p.page_size = page_size_;
  p.page_indices = prompt_pages_;
  p.segment_page_indptr = {0, static_cast<int32_t>(prompt_pages_.size())};
  p.segment_first_slot = {0};
  p.segment_length = {n};
  p.segment_entry_indptr = {0, n};
  for (int32_t r = 0; r < n; ++r) {
    s.positions.push_back(r);
    s.kv_pages.push_back(prompt_pages_[r / page_size_]);
    s.kv_slots.push_back(r % page_size_);
    p.entry_query.push_back(r);
    p.entry_kv_limit.push_back(r + 1);  // causal
    if (all_logits) s.logit_rows.push_back(r);
  }
  if (!all_logits && n > 0) s.logit_rows.push_back(n - 1);
  attention::FillQueryEntries(p);
  return s;
}

absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> ForkedBranches::Fork(int32_t n) {
  if (prompt_.empty()) return absl::InvalidArgumentError("fork before the prompt is set");
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("fork into ", n, " branches"));
  const int32_t partial = static_cast<int32_t>(prompt_.size() % page_size_);
  std::vector<std::pair<int32_t, int32_t>> copies;
  for (int32_t b = 0; b < n; ++b) {
    std::vector<int32_t> pages;
    if (partial > 0) {
      BANYAN_ASSIGN_OR_RETURN(const int32_t page, AllocatePage());
      pages.push_back(page);
      copies.emplace_back(prompt_pages_.back(), page);
    }
    branch_pages_.push_back(std::move(pages));
    branch_length_.push_back(partial);
    active_.push_back(true);
  }
  return copies;
}

std::vector<int32_t> ForkedBranches::active_branches() const {
  std::vector<int32_t> out;
  for (int32_t b = 0; b < num_branches(); ++b) {
    if (active_[b]) out.push_back(b);
  }
  return out;
}

absl::StatusOr<Step> ForkedBranches::DecodeStep(absl::Span<const int32_t> next_tokens) {
  const std::vector<int32_t> active = active_branches();
  if (next_tokens.size() != active.size()) {
    return absl::InvalidArgumentError(absl::StrCat(next_tokens.size(), " tokens for ", active.size(),
                                                   " active branches"));
  }
  const int32_t rows = static_cast<int32_t>(active.size());
  const int32_t full_prompt_pages = static_cast<int32_t>(prompt_.size() / page_size_);
  // Make room first, so a failure leaves every branch unchanged.
  int64_t pages_needed = 0;
  for (int32_t b : active) pages_needed += (branch_length_[b] % page_size_ == 0) ? 1 : 0;
  if (next_page_ + pages_needed > num_pages_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV pool of ", num_pages_, " pages is full"));
  }
  Step s;
  auto& p = s.plan;
  p.num_queries = rows;
  p.page_size = page_size_;
  if (full_prompt_pages > 0 && rows > 0) {
    p.page_indices.assign(prompt_pages_.begin(), prompt_pages_.begin() + full_prompt_pages);
    p.segment_page_indptr.push_back(full_prompt_pages);
    p.segment_first_slot.push_back(0);
    p.segment_length.push_back(full_prompt_pages * page_size_);
    for (int32_t r = 0; r < rows; ++r) {
      p.entry_query.push_back(r);
      p.entry_kv_limit.push_back(full_prompt_pages * page_size_);
    }
    p.segment_entry_indptr.push_back(rows);
  }
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t b = active[r];
    if (branch_length_[b] % page_size_ == 0) branch_pages_[b].push_back(AllocatePage().value());
    const int32_t slot_index = branch_length_[b]++;
    s.tokens.push_back(next_tokens[r]);
    s.positions.push_back(full_prompt_pages * page_size_ + slot_index);
    s.kv_pages.push_back(branch_pages_[b][slot_index / page_size_]);
    s.kv_slots.push_back(slot_index % page_size_);
    s.logit_rows.push_back(r);
    p.page_indices.insert(p.page_indices.end(), branch_pages_[b].begin(), branch_pages_[b].end());
    p.segment_page_indptr.push_back(static_cast<int32_t>(p.page_indices.size()));
    p.segment_first_slot.push_back(0);
    p.segment_length.push_back(branch_length_[b]);
    p.entry_query.push_back(r);
    p.entry_kv_limit.push_back(branch_length_[b]);
    p.segment_entry_indptr.push_back(static_cast<int32_t>(p.entry_query.size()));
  }
  attention::FillQueryEntries(p);
  return s;
}

void CopyKvPage(const KvCache& kv, int32_t src, int32_t dst) {
  const attention::KvLayout& l = kv.layout;
  const size_t page_bytes = static_cast<size_t>(l.PageElements()) * l.dtype_bytes;
  char* base = static_cast<char*>(kv.data);
  for (int32_t layer = 0; layer < l.num_layers; ++layer) {
    for (int32_t plane = 0; plane < 2; ++plane) {
      const size_t src_off = static_cast<size_t>(l.Offset(layer, plane, src, 0, 0)) * l.dtype_bytes;
      const size_t dst_off = static_cast<size_t>(l.Offset(layer, plane, dst, 0, 0)) * l.dtype_bytes;
      std::memcpy(base + dst_off, base + src_off, page_bytes);
    }
  }
}

}  // namespace banyan::model
