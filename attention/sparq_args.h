// SparqArgs: one SparQ attention call (sparq-attention 4, Algorithm 1):
// approximate decode attention for long contexts that reads a fraction of the
// KV cache. Per sequence and KV head, for the query heads of its group:
//
//   1. components: the `r` largest entries of sum over the group's heads of
//      |q_h| (the GQA variant of argtopk(|q|, r)); ties go to the lower index.
//   2. approximate scores, per head h and token t:
//        s_hat[h][t] = softmax over t of (q_h[i1] . k_t[i1]) * scale / c_h,
//        c_h = sqrt(||q_h[i1]||_1 / ||q_h||_1)  (1 when ||q_h||_1 = 0),
//      i.e. the paper's temperature tau = sqrt(d * ||q[i1]||_1 / ||q||_1)
//      with the model's scale in place of 1 / sqrt(d).
//   3. selection: the last `local_window` tokens always; the other
//      k - local_window positions are the tokens with the largest
//      sum over h of s_hat[h][t] (ties to the lower position). k is clamped to
//      the sequence length (then every token is selected).
//   4. alpha_h = sum of s_hat[h][t] over the selected tokens.
//   5. out_h = alpha_h * softmax(scale * q_h . k_t over the selected t) . v_t
//              + (1 - alpha_h) * v_mean           (reallocate_mean)
//      out_h = softmax(scale * q_h . k_t over the selected t) . v_t   (otherwise)
//      where v_mean is the mean of V over all of the sequence's tokens.
// With k >= length every token is selected, alpha_h = 1 and the result is
// exact dense attention.
//
// Memory: K and V are read from the paged pool (kv_layout.h). Step 2 reads r
// of the head_dim columns of K for every token; to make that a contiguous
// read, the GPU path reads a second copy of K stored component-major
// (`k_transposed`, KvTransposedOffset below). v_mean is kept by
// the caller (one running mean per sequence and KV head).
//
// Ownership: every pointer is borrowed for the call (for CUDA calls, until the
// stream has run it). Host memory for the reference, device memory for CUDA,
// except where a field says otherwise. Thread-compatible value type.
#ifndef BANYAN_ATTENTION_SPARQ_ARGS_H_
#define BANYAN_ATTENTION_SPARQ_ARGS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "attention/kv_layout.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention {

struct SparqConfig {
  int32_t r = 16;               // query components for the approximate scores, 1..head_dim
  int32_t k = 64;               // tokens attended exactly per sequence and KV head, >= 1
  int32_t local_window = 16;    // the last tokens always attended, 0..k
  bool reallocate_mean = true;  // step 5's mean-value term
};

struct SparqArgs {
  KvLayout layout;
  DType kv_dtype = DType::kBf16;
  const void* kv_pool = nullptr;       // K and V, layout.TotalBytes() bytes
  const void* k_transposed = nullptr;  // the second K copy (KvTransposedOffset); GPU path only
  int32_t layer = 0;
  int32_t num_seqs = 0;
  // Sequence s holds seq_length[s] tokens starting at slot 0 of its first
  // page: pages page_indices[seq_page_indptr[s] .. seq_page_indptr[s + 1]).
  const int32_t* seq_page_indptr = nullptr;  // [num_seqs + 1]
  const int32_t* page_indices = nullptr;
  const int32_t* seq_length = nullptr;  // [num_seqs], each >= 1
  int32_t max_length = 0;               // >= every seq_length (sizes the GPU path's scratch)
  const float* v_mean = nullptr;        // [num_seqs][num_kv_heads][head_dim]
  const void* q = nullptr;              // [num_seqs][num_q_heads][head_dim]
  DType q_dtype = DType::kBf16;
  int32_t num_q_heads = 0;
  float scale = 0.0f;  // softmax scale, usually 1 / sqrt(head_dim)
  SparqConfig config;
  void* out = nullptr;  // [num_seqs][num_q_heads][head_dim]
  DType out_dtype = DType::kBf16;

  int32_t head_dim() const { return layout.head_dim; }
  int32_t group_size() const { return num_q_heads / layout.num_kv_heads; }
};

// Element offset of component `dim` of token slot `slot` of `page` for one
// layer and KV head in the second K copy: per (layer, head, dim) one row over
// every slot of the pool in page order ([layer][head][dim][page][slot]), so
// that a component of a sequence on consecutive pages is one contiguous run.
// The copy has the K plane's size (layout.TotalBytes() / 2 bytes).
constexpr int64_t KvTransposedOffset(const KvLayout& layout, int32_t layer, int64_t page, int32_t head, int32_t dim,
                                     int32_t slot) {
  return ((int64_t{layer} * layout.num_kv_heads + head) * layout.head_dim + dim) * layout.num_pages * layout.page_size +
         page * layout.page_size + slot;
}

// Checks what every SparQ path relies on, with host-readable plan arrays
// (seq_page_indptr, page_indices, seq_length) when `plan_on_host`: head_dim
// 64 or 128, num_q_heads a positive multiple of num_kv_heads, dtype sizes,
// 0 <= layer < num_layers, a finite positive scale, 1 <= r <= head_dim,
// k >= 1, 0 <= local_window <= k, non-null pointers, and (plan_on_host) every
// sequence's length in [1, max_length] covered by its pages, page ids in
// range. Returns kInvalidArgument naming the first violation; OK otherwise.
[[nodiscard]] absl::Status ValidateSparqArgs(const SparqArgs& args, bool plan_on_host);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_SPARQ_ARGS_H_
