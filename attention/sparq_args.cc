#include "attention/sparq_args.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace banyan::attention {
namespace {

// kInvalidArgument with "sparq: " and the pieces of the message.
template <typename... Pieces>
absl::Status Invalid(const Pieces&... pieces) {
  return absl::InvalidArgumentError(absl::StrCat("sparq: ", pieces...));
}

// The plan arrays, read on the host: CSR page lists, lengths, page ids.
absl::Status ValidatePlan(const SparqArgs& args) {
  const KvLayout& layout = args.layout;
  if (args.num_seqs > 0 && args.seq_page_indptr[0] < 0) {
    return Invalid("seq_page_indptr[0] = ", args.seq_page_indptr[0], " is negative");
  }
  for (int32_t s = 0; s < args.num_seqs; ++s) {
    const int32_t begin = args.seq_page_indptr[s];
    const int32_t end = args.seq_page_indptr[s + 1];
    if (end < begin) {
      return Invalid("seq_page_indptr[", s + 1, "] = ", end, " < seq_page_indptr[", s, "]");
    }
    const int32_t length = args.seq_length[s];
    if (length < 1 || length > args.max_length) {
      return Invalid("seq_length[", s, "] = ", length, " outside [1, max_length = ", args.max_length, "]");
    }
    const int64_t capacity = int64_t{end - begin} * layout.page_size;
    if (capacity < length) {
      return Invalid("seq_length[", s, "] = ", length, " exceeds its ", end - begin, " pages of ", layout.page_size,
                     " slots");
    }
    for (int32_t i = begin; i < end; ++i) {
      const int32_t page = args.page_indices[i];
      if (page < 0 || page >= layout.num_pages) {
        return Invalid("page_indices[", i, "] = ", page, " outside [0, num_pages = ", layout.num_pages, ")");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSparqArgs(const SparqArgs& args, bool plan_on_host) {
  const KvLayout& layout = args.layout;
  if (layout.head_dim != 64 && layout.head_dim != 128) return Invalid("head_dim = ", layout.head_dim, " not 64 or 128");
  if (layout.num_kv_heads <= 0 || args.num_q_heads <= 0 || args.num_q_heads % layout.num_kv_heads != 0) {
    return Invalid("num_q_heads = ", args.num_q_heads,
                   " not a positive multiple of num_kv_heads = ", layout.num_kv_heads);
  }
  if (layout.dtype_bytes != static_cast<int32_t>(DTypeSize(args.kv_dtype))) {
    return Invalid("layout dtype_bytes = ", layout.dtype_bytes, " does not match kv_dtype ",
                   std::string(DTypeName(args.kv_dtype)));
  }
  if (layout.page_size <= 0) return Invalid("page_size = ", layout.page_size, " not positive");
  if (args.layer < 0 || args.layer >= layout.num_layers) {
    return Invalid("layer = ", args.layer, " outside [0, ", layout.num_layers, ")");
  }
  if (!std::isfinite(args.scale) || args.scale <= 0.0f) {
    return Invalid("scale = ", args.scale, " not finite and positive");
  }
  const SparqConfig& config = args.config;
  if (config.r < 1 || config.r > layout.head_dim) {
    return Invalid("r = ", config.r, " outside [1, ", layout.head_dim, "]");
  }
  if (config.k < 1) return Invalid("k = ", config.k, " < 1");
  if (config.local_window < 0 || config.local_window > config.k) {
    return Invalid("local_window = ", config.local_window, " outside [0, k = ", config.k, "]");
  }
  if (args.num_seqs < 0) return Invalid("num_seqs = ", args.num_seqs, " is negative");
  if (args.num_seqs > 0 && args.max_length < 1) return Invalid("max_length = ", args.max_length, " < 1");
  const auto null_pointer = [](const char* name) { return Invalid(name, " is null"); };
  if (args.kv_pool == nullptr) return null_pointer("kv_pool");
  if (args.seq_page_indptr == nullptr) return null_pointer("seq_page_indptr");
  if (args.page_indices == nullptr) return null_pointer("page_indices");
  if (args.seq_length == nullptr) return null_pointer("seq_length");
  if (config.reallocate_mean && args.v_mean == nullptr) return null_pointer("v_mean (reallocate_mean)");
  if (args.q == nullptr) return null_pointer("q");
  if (args.out == nullptr) return null_pointer("out");
  if (plan_on_host) return ValidatePlan(args);
  return absl::OkStatus();
}

}  // namespace banyan::attention
