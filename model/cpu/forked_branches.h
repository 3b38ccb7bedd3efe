// ForkedBranches: the page bookkeeping and attention plans for one prompt
// forked into N branches that share the prompt's KV pages: the simple tree
// behind `banyan generate`, the CPU benchmark and the paged-decode tests
// (kv_tree/ is the general structure; this covers one fork level).
//
//   ForkedBranches fb(/*page_size=*/16, /*num_pages=*/1024);
//   BANYAN_RETURN_IF_ERROR(fb.SetPrompt(prompt_tokens));
//   Step s = fb.PrefillStep();                 // rows = the prompt, causal
//   ... backend->Forward(s.batch(), kv, logits) ...
//   BANYAN_ASSIGN_OR_RETURN(auto copies, fb.Fork(n));
//   for (auto [src, dst] : copies) CopyKvPage(kv, src, dst);  // copy on write
//   BANYAN_ASSIGN_OR_RETURN(Step d, fb.DecodeStep(next_tokens));  // rows = branches
//
// Layout: the prompt's full pages form one shared segment that every branch
// attends; the partly filled last prompt page (if any) is copied into each
// branch's first private page, so each branch's private segment starts at
// slot 0 with those prompt tokens, followed by its own tokens.
// Errors: kResourceExhausted when pages run out, kInvalidArgument for an empty
// prompt, a second prompt, a fork before the prompt, n < 1, or a token count
// that does not match the branches. Thread-compatible.
#ifndef BANYAN_MODEL_CPU_FORKED_BRANCHES_H_
#define BANYAN_MODEL_CPU_FORKED_BRANCHES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/attention_plan.h"
#include "model/forward.h"

namespace banyan::model {

// The arrays of one forward pass; batch() views them (valid while the Step lives).
struct Step {
  std::vector<int32_t> tokens, positions, kv_pages, kv_slots, logit_rows;
  attention::AttentionPlan plan;
  ForwardBatch batch() const;
};

class ForkedBranches {
 public:
  ForkedBranches(int32_t page_size, int64_t num_pages);

  // Allocates the prompt's pages. REQUIRES (else kInvalidArgument): not empty,
  // called once. kResourceExhausted when the pool is too small.
  [[nodiscard]] absl::Status SetPrompt(absl::Span<const int32_t> prompt);
  // One causal pass over the whole prompt; logits for the last row only
  // (`all_logits`: for every row).
  Step PrefillStep(bool all_logits = false) const;

  // Creates n branches; returns the (source page, destination page) copies
  // the caller must make in the KV pool (at most one per branch).
  [[nodiscard]] absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> Fork(int32_t n);

  // Appends next_tokens[b] to every active branch b (active_branches() in
  // order) and returns the decode pass: one row per active branch, logits for
  // every row. kResourceExhausted when a new page is needed and none is left.
  [[nodiscard]] absl::StatusOr<Step> DecodeStep(absl::Span<const int32_t> next_tokens);

  // Stops decoding branch b (it keeps its pages). REQUIRES: b < num_branches().
  void Finish(int32_t b) { active_[b] = false; }
  std::vector<int32_t> active_branches() const;
  int32_t num_branches() const { return static_cast<int32_t>(branch_pages_.size()); }
  int64_t prompt_length() const { return static_cast<int64_t>(prompt_.size()); }
  int64_t pages_used() const { return next_page_; }

 private:
  absl::StatusOr<int32_t> AllocatePage();

  int32_t page_size_;
  int64_t num_pages_;
  int64_t next_page_ = 0;
  std::vector<int32_t> prompt_;
  std::vector<int32_t> prompt_pages_;
  std::vector<std::vector<int32_t>> branch_pages_;
  std::vector<int32_t> branch_length_;  // tokens in the private segment (copied prompt tail + own)
  std::vector<bool> active_;
};

// Copies one page (every layer, K and V) inside a host KV pool.
// REQUIRES: both pages < kv.layout.num_pages, host memory.
void CopyKvPage(const KvCache& kv, int32_t src, int32_t dst);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_CPU_FORKED_BRANCHES_H_
