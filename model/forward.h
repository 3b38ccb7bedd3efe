// Backend: the backend-neutral forward pass of a Llama-family model. One call
// runs any number of query rows through every layer: decode rows of many
// branches at once (one row per active leaf) and prefill rows of a node's new
// tokens (causal inside the node), as described by an attention::AttentionPlan.
//
//   std::unique_ptr<Backend> cpu = ...CreateCpuBackend(weights, options)...;
//   KvCache kv{layout, DType::kF32, pool_memory};   // memory owned by the caller
//   ForwardBatch batch;
//   batch.tokens = ids; batch.positions = pos;      // one per query row
//   batch.kv_pages = pages; batch.kv_slots = slots; // where each row's K/V is written
//   batch.plan = &plan;                             // rows = batch rows, in order
//   batch.logit_rows = rows_wanting_logits;
//   std::vector<float> logits(rows_wanting_logits.size() * vocab);
//   BANYAN_RETURN_IF_ERROR(cpu->Forward(batch, kv, absl::MakeSpan(logits)));
//
// Per layer, a backend first writes every row's new K (after RoPE) and V into
// the pool at (kv_pages[r], kv_slots[r]) in the pool's dtype, then runs
// attention over the plan, which therefore must already include those tokens
// (a row sees its own token). Rows are independent except through the plan.
//
// Errors (ValidateForwardBatch, shared by every backend; nothing is written to
// the pool or logits when it fails):
//   kOutOfRange      a token id outside [0, vocab), a page id outside
//                    [0, num_pages) (in kv_pages or the plan), a slot outside
//                    [0, page_size), a logit row outside [0, rows).
//   kInvalidArgument spans of different lengths, a negative position, a null
//                    or invalid plan (AttentionPlan::Validate), a plan whose
//                    num_queries differs from the rows, a KV layout or dtype
//                    that does not match the model, a null pool, two rows
//                    writing the same (page, slot), a logits span too small.
// A backend may add its own (e.g. kUnavailable without a device, attention's
// kInvalidArgument for an unsupported head_dim).
//
// Thread-safety: a Backend is thread-compatible: Forward mutates scratch
// buffers, so one call at a time per Backend. Ownership: batch spans, the
// plan, the pool and logits are borrowed for the call.
#ifndef BANYAN_MODEL_FORWARD_H_
#define BANYAN_MODEL_FORWARD_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "attention/attention_plan.h"
#include "attention/kv_layout.h"
#include "model/model_config.h"
#include "model/sampling/device_draw.h"
#include "sdk/base/tensor_view.h"

namespace banyan::model {

// The paged KV pool a forward pass reads and writes. `data` holds
// layout.TotalBytes() bytes in `dtype` (host memory for the CPU backend,
// device memory for CUDA); kv_tree's page pool owns it.
struct KvCache {
  attention::KvLayout layout;
  DType dtype = DType::kF32;
  void* data = nullptr;
};

// One forward pass over `rows` = tokens.size() query rows.
struct ForwardBatch {
  absl::Span<const int32_t> tokens;     // [rows] token ids
  absl::Span<const int32_t> positions;  // [rows] RoPE positions (index in the sequence)
  absl::Span<const int32_t> kv_pages;   // [rows] page that receives the row's K/V
  absl::Span<const int32_t> kv_slots;   // [rows] slot in that page
  const attention::AttentionPlan* plan = nullptr;  // num_queries == rows
  absl::Span<const int32_t> logit_rows;  // rows whose logits are wanted, any order
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string_view name() const = 0;
  virtual const ModelConfig& config() const = 0;
  // Where KvCache::data must live for this backend.
  virtual MemorySpace kv_memory_space() const = 0;

  // Runs the batch; on success logits[i * vocab + v] is the logit of token v
  // for row logit_rows[i] (fp32, host memory). On failure (see the top of this
  // file) returns the error; validation errors leave the pool and logits
  // untouched. REQUIRES: logits.size() >= logit_rows.size() * vocab.
  [[nodiscard]] virtual absl::Status Forward(const ForwardBatch& batch, const KvCache& kv,
                                             absl::Span<float> logits) = 0;

  // Optional greedy path (added for the engine's greedy steps): the same pass
  // as Forward, but instead of the logits it returns, for row logit_rows[i],
  // tokens[i] = the first maximum of its logits and logprobs[i] = that
  // token's log-softmax (model::SampleGreedy's result within float rounding),
  // computed where the logits are: a device backend then copies 8 bytes per
  // row instead of vocab x 4. A row with a NaN, +inf or no finite logit gets
  // tokens[i] = -1 (the caller's kInvalidArgument for that row). Errors: as
  // Forward, plus kInvalidArgument when tokens or logprobs hold fewer than
  // logit_rows.size() entries. Backends without the path keep these defaults.
  virtual bool supports_greedy() const { return false; }
  [[nodiscard]] virtual absl::Status ForwardGreedy(const ForwardBatch& batch, const KvCache& kv,
                                                   absl::Span<int32_t> tokens, absl::Span<float> logprobs) {
    (void)batch;
    (void)kv;
    (void)tokens;
    (void)logprobs;
    return absl::UnimplementedError(absl::StrCat(std::string(name()), " backend: no greedy path"));
  }

  // Optional sampled path (for the engine's sampled steps): the same pass as
  // Forward, then for each draw (model/sampling/device_draw.h: a logits row,
  // temperature / top-k / top-p / min-p and a uniform number) results[i] =
  // the token that draw lands on with its processed and raw log-probabilities
  // (sampling::ReferenceDraw's result within float rounding), computed where
  // the logits are: a device backend copies 12 bytes per draw instead of
  // vocab x 4 per row. A draw whose row has a NaN, +inf or no finite logit
  // gets token -1. Errors: as Forward, plus kInvalidArgument when results
  // hold fewer entries than draws or a draw's row is outside logit_rows
  // (nothing is run then). Backends without the path keep these defaults.
  virtual bool supports_sampling() const { return false; }
  [[nodiscard]] virtual absl::Status ForwardSample(const ForwardBatch& batch, const KvCache& kv,
                                                   absl::Span<const sampling::DeviceDraw> draws,
                                                   absl::Span<sampling::DrawResult> results) {
    (void)batch;
    (void)kv;
    (void)draws;
    (void)results;
    return absl::UnimplementedError(absl::StrCat(std::string(name()), " backend: no sampled path"));
  }
};

// The KvLayout a model needs for `num_pages` pages of `page_size` tokens.
inline attention::KvLayout KvLayoutFor(const ModelConfig& config, int64_t num_pages, int32_t page_size,
                                       DType dtype) {
  attention::KvLayout layout;
  layout.num_layers = config.num_layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.page_size = page_size;
  layout.num_pages = num_pages;
  layout.dtype_bytes = static_cast<int32_t>(DTypeSize(dtype));
  return layout;
}

namespace forward_internal {

// The batch's spans, the layout and the plan's row count and page size.
[[nodiscard]] inline absl::Status ValidateHeader(const ModelConfig& config, const ForwardBatch& batch,
                                                 const KvCache& kv) {
  const size_t rows = batch.tokens.size();
  if (batch.positions.size() != rows || batch.kv_pages.size() != rows || batch.kv_slots.size() != rows) {
    return absl::InvalidArgumentError(absl::StrCat("forward batch: ", rows, " tokens but ",
                                                   batch.positions.size(), " positions, ",
                                                   batch.kv_pages.size(), " kv_pages, ",
                                                   batch.kv_slots.size(), " kv_slots"));
  }
  const attention::KvLayout& l = kv.layout;
  if (l.num_layers != config.num_layers || l.num_kv_heads != config.num_kv_heads ||
      l.head_dim != config.head_dim || l.page_size <= 0 || l.num_pages < 0 ||
      l.dtype_bytes != static_cast<int32_t>(DTypeSize(kv.dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "forward batch: KV layout (layers ", l.num_layers, ", kv heads ", l.num_kv_heads, ", head_dim ",
        l.head_dim, ", page_size ", l.page_size, ", dtype bytes ", l.dtype_bytes,
        ") does not match the model (layers ", config.num_layers, ", kv heads ", config.num_kv_heads,
        ", head_dim ", config.head_dim, ") and dtype ", std::string(DTypeName(kv.dtype))));
  }
  if (rows > 0 && kv.data == nullptr) return absl::InvalidArgumentError("forward batch: null KV pool");
  if (batch.plan == nullptr) return absl::InvalidArgumentError("forward batch: null attention plan");
  const attention::AttentionPlan& plan = *batch.plan;
  if (plan.num_queries < 0 || static_cast<size_t>(plan.num_queries) != rows) {
    return absl::InvalidArgumentError(absl::StrCat("forward batch: plan has ", plan.num_queries,
                                                   " query rows, batch has ", rows));
  }
  if (plan.page_size != l.page_size) {
    return absl::InvalidArgumentError(absl::StrCat("forward batch: plan page_size ", plan.page_size,
                                                   " != KV page_size ", l.page_size));
  }
  return absl::OkStatus();
}

// Every row's token, position and write slot, the logit rows and the logits
// span. REQUIRES: ValidateHeader passed.
[[nodiscard]] inline absl::Status ValidateRowArrays(const ModelConfig& config, const ForwardBatch& batch,
                                                    const KvCache& kv, size_t logits_size) {
  const size_t rows = batch.tokens.size();
  const attention::KvLayout& l = kv.layout;
  std::vector<int64_t> written;
  written.reserve(rows);
  for (size_t r = 0; r < rows; ++r) {
    if (batch.tokens[r] < 0 || batch.tokens[r] >= config.vocab_size) {
      return absl::OutOfRangeError(absl::StrCat("forward batch: token id ", batch.tokens[r], " at row ", r,
                                                " outside the vocabulary [0, ", config.vocab_size, ")"));
    }
    if (batch.positions[r] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("forward batch: negative position at row ", r));
    }
    if (batch.kv_pages[r] < 0 || batch.kv_pages[r] >= l.num_pages) {
      return absl::OutOfRangeError(absl::StrCat("forward batch: kv page ", batch.kv_pages[r], " at row ", r,
                                                " outside [0, ", l.num_pages, ")"));
    }
    if (batch.kv_slots[r] < 0 || batch.kv_slots[r] >= l.page_size) {
      return absl::OutOfRangeError(absl::StrCat("forward batch: kv slot ", batch.kv_slots[r], " at row ", r,
                                                " outside [0, ", l.page_size, ")"));
    }
    written.push_back(int64_t{batch.kv_pages[r]} * l.page_size + batch.kv_slots[r]);
  }
  std::sort(written.begin(), written.end());
  if (std::adjacent_find(written.begin(), written.end()) != written.end()) {
    return absl::InvalidArgumentError("forward batch: two rows write the same KV (page, slot)");
  }
  for (int32_t r : batch.logit_rows) {
    if (r < 0 || static_cast<size_t>(r) >= rows) {
      return absl::OutOfRangeError(absl::StrCat("forward batch: logit row ", r, " outside [0, ", rows, ")"));
    }
  }
  if (logits_size < batch.logit_rows.size() * static_cast<size_t>(config.vocab_size)) {
    return absl::InvalidArgumentError(absl::StrCat("forward batch: logits span of ", logits_size,
                                                   " floats, need ", batch.logit_rows.size(), " x ",
                                                   config.vocab_size));
  }
  return absl::OkStatus();
}

}  // namespace forward_internal

// The plan's arrays (AttentionPlan::Validate and page ids inside the pool).
// O(size of the plan). REQUIRES: a non-null plan with one query row per
// batch row (the first checks of ValidateForwardRows).
[[nodiscard]] inline absl::Status ValidateForwardPlan(const ForwardBatch& batch, const KvCache& kv) {
  const size_t rows = batch.tokens.size();
  const attention::KvLayout& l = kv.layout;
  const attention::AttentionPlan& plan = *batch.plan;
  // Every indptr array non-decreasing inside its target array first:
  // AttentionPlan::Validate() (as of this writing) indexes entries before it
  // has seen a later decrease, which reads out of bounds on such plans.
  const auto indptr_ok = [](const std::vector<int32_t>& indptr, size_t expected_size, size_t target_size) {
    if (indptr.size() != expected_size || indptr.empty() || indptr[0] != 0) return false;
    for (size_t i = 1; i < indptr.size(); ++i) {
      if (indptr[i] < indptr[i - 1] || static_cast<size_t>(indptr[i]) > target_size) return false;
    }
    return true;
  };
  const size_t segments = plan.segment_length.size();
  if (!indptr_ok(plan.segment_page_indptr, segments + 1, plan.page_indices.size()) ||
      !indptr_ok(plan.segment_entry_indptr, segments + 1, plan.entry_query.size()) ||
      !indptr_ok(plan.query_entry_indptr, rows + 1, plan.query_entries.size()) ||
      plan.entry_kv_limit.size() != plan.entry_query.size()) {
    return absl::InvalidArgumentError("forward batch: invalid attention plan: malformed indptr arrays");
  }
  if (const std::string why = plan.Validate(); !why.empty()) {
    return absl::InvalidArgumentError("forward batch: invalid attention plan: " + why);
  }
  for (int32_t p : plan.page_indices) {
    if (p >= l.num_pages) {
      return absl::OutOfRangeError(absl::StrCat("forward batch: plan page ", p, " >= num_pages ", l.num_pages));
    }
  }
  return absl::OkStatus();
}

// Everything but the plan's arrays: ValidateForwardBatch without
// ValidateForwardPlan. O(rows log rows). For a backend that checks the plan
// later, while the device runs work that writes neither the pool nor logits
// (model/cuda: the embedding, layer 0's norm and QKV product), so that the
// O(plan) check overlaps it; the pool still sees no write before both pass.
[[nodiscard]] inline absl::Status ValidateForwardRows(const ModelConfig& config, const ForwardBatch& batch,
                                                      const KvCache& kv, size_t logits_size) {
  if (absl::Status header = forward_internal::ValidateHeader(config, batch, kv); !header.ok()) return header;
  return forward_internal::ValidateRowArrays(config, batch, kv, logits_size);
}

// Checks a batch against the model config and the pool (errors listed at the
// top of this file). O(rows log rows + size of the plan).
[[nodiscard]] inline absl::Status ValidateForwardBatch(const ModelConfig& config, const ForwardBatch& batch,
                                                       const KvCache& kv, size_t logits_size) {
  if (absl::Status header = forward_internal::ValidateHeader(config, batch, kv); !header.ok()) return header;
  if (absl::Status plan = ValidateForwardPlan(batch, kv); !plan.ok()) return plan;
  return forward_internal::ValidateRowArrays(config, batch, kv, logits_size);
}

}  // namespace banyan::model

#endif  // BANYAN_MODEL_FORWARD_H_
