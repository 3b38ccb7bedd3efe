// EngineImpl, recovery from a failed forward pass (engine_impl.h, "If a
// forward pass fails"): the tokens the failed step added keep their place in
// the tree, held by private forks, until a repair pass recomputes their K/V.
// Scheduler thread only.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/logging.h"
#include "sdk/engine/engine_impl.h"

namespace banyan::engine {

absl::Status EngineImpl::ForwardError(const absl::Status& cause) {
  return absl::Status(cause.code(), absl::StrCat("forward pass failed: ", std::string(cause.message())));
}

absl::Status EngineImpl::HoldUnwrittenKv() {
  // Rows that wrote a scratch slot recomputed K/V that already exists; the
  // others wrote tree slots of tokens added this step. In each spec entry
  // those are its last rows (decode: all or none; prefill: all; score: the
  // continuation tokens not reused), which are its branch's last tokens.
  std::vector<std::pair<int32_t, int32_t>> scratch;
  scratch.reserve(scratch_used_);
  for (size_t i = 0; i < scratch_used_; ++i) scratch.push_back({scratch_slots_[i].page, scratch_slots_[i].slot});
  std::sort(scratch.begin(), scratch.end());
  auto is_scratch = [&](kv_tree::KvSlot s) {
    return std::binary_search(scratch.begin(), scratch.end(), std::make_pair(s.page, s.slot));
  };
  size_t row = 0;
  for (const kv_tree::PrefillRows& entry : spec_) {
    int32_t fresh = 0;
    for (int32_t j = 0; j < entry.num_new_tokens; ++j) {
      if (is_scratch(rows_[row + j].write)) {
        if (fresh > 0) return absl::InternalError("a scratch row follows a new token's row");
      } else {
        ++fresh;
      }
    }
    row += static_cast<size_t>(entry.num_new_tokens);
    if (fresh == 0) continue;
    BANYAN_ASSIGN_OR_RETURN(kv_tree::Branch hold, tree_->Fork(entry.branch));
    repairs_.push_back({hold, fresh});
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::RepairKv() {
  for (const Repair& r : repairs_) {
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, tree_->Tokens(r.branch));
    BANYAN_ASSIGN_OR_RETURN(std::vector<kv_tree::KvSlot> slots, tree_->Slots(r.branch));
    spec_.push_back({r.branch, r.tokens});
    for (size_t p = tokens.size() - static_cast<size_t>(r.tokens); p < tokens.size(); ++p) {
      rows_.push_back({tokens[p], static_cast<int32_t>(p), slots[p]});
    }
  }
  const absl::Status run = RunForward();
  spec_.clear();
  rows_.clear();
  counters_ = StepCounters{};
  BANYAN_RETURN_IF_ERROR(run);
  for (const Repair& r : repairs_) (void)tree_->Release(r.branch);
  BANYAN_LOG(INFO) << "engine: recomputed the K/V of " << repairs_.size()
                   << " branch tails left unwritten by a failed forward pass";
  repairs_.clear();
  return absl::OkStatus();
}

}  // namespace banyan::engine
