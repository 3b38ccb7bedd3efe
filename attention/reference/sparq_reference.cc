#include "attention/reference/sparq_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::attention {
namespace {

// The pages and length of one sequence.
struct SeqTokens {
  absl::Span<const int32_t> pages;
  int32_t length = 0;
};

SeqTokens TokensOf(const SparqArgs& args, int32_t seq) {
  const int32_t begin = args.seq_page_indptr[seq];
  const int32_t end = args.seq_page_indptr[seq + 1];
  return {absl::Span<const int32_t>(args.page_indices + begin, static_cast<size_t>(end - begin)), args.seq_length[seq]};
}

// Element offset of token `t`'s K (kv = 0) or V (kv = 1) row.
int64_t RowOffset(const SparqArgs& args, const SeqTokens& tokens, int32_t kv, int32_t kv_head, int32_t t) {
  const int32_t page_size = args.layout.page_size;
  return args.layout.Offset(args.layer, kv, tokens.pages[t / page_size], kv_head, t % page_size);
}

// The query vectors of the group's heads, [group_size][head_dim].
std::vector<std::vector<double>> GroupQueries(const SparqArgs& args, int32_t seq, int32_t kv_head) {
  const int32_t d = args.head_dim();
  const int32_t group = args.group_size();
  std::vector<std::vector<double>> q(static_cast<size_t>(group), std::vector<double>(static_cast<size_t>(d)));
  for (int32_t j = 0; j < group; ++j) {
    const int64_t base = (int64_t{seq} * args.num_q_heads + int64_t{kv_head} * group + j) * d;
    for (int32_t i = 0; i < d; ++i) q[j][i] = LoadAsDouble(args.q, args.q_dtype, base + i);
  }
  return q;
}

// Step 1: the r components with the largest summed |q_h|, ties to the lower
// index, returned ascending.
std::vector<int32_t> TopComponents(const std::vector<std::vector<double>>& q, int32_t r) {
  const size_t d = q.front().size();
  std::vector<double> magnitude(d, 0.0);
  for (const std::vector<double>& qh : q) {
    for (size_t i = 0; i < d; ++i) magnitude[i] += std::abs(qh[i]);
  }
  std::vector<int32_t> order(d);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return magnitude[a] != magnitude[b] ? magnitude[a] > magnitude[b] : a < b; });
  order.resize(static_cast<size_t>(r));
  std::sort(order.begin(), order.end());
  return order;
}

// In place: x <- softmax(x).
void Softmax(std::vector<double>& x) {
  double max_value = -std::numeric_limits<double>::infinity();
  for (double v : x) max_value = std::max(max_value, v);
  double sum = 0.0;
  for (double& v : x) {
    v = std::exp(v - max_value);
    sum += v;
  }
  for (double& v : x) v /= sum;
}

}  // namespace

SparqSelection ReferenceSparqSelect(const SparqArgs& args, int32_t seq, int32_t kv_head) {
  const SeqTokens tokens = TokensOf(args, seq);
  const int32_t length = tokens.length;
  const std::vector<std::vector<double>> q = GroupQueries(args, seq, kv_head);
  SparqSelection sel;
  sel.components = TopComponents(q, args.config.r);

  // Step 2: s_hat[j][t] per head, and their sum over the group.
  std::vector<std::vector<double>> s_hat(q.size(), std::vector<double>(static_cast<size_t>(length)));
  std::vector<double> group_score(static_cast<size_t>(length), 0.0);
  for (size_t j = 0; j < q.size(); ++j) {
    double l1_all = 0.0;
    double l1_selected = 0.0;
    for (double v : q[j]) l1_all += std::abs(v);
    for (int32_t i : sel.components) l1_selected += std::abs(q[j][i]);
    const double c = l1_selected > 0.0 ? std::sqrt(l1_selected / l1_all) : 1.0;
    for (int32_t t = 0; t < length; ++t) {
      const int64_t k_row = RowOffset(args, tokens, 0, kv_head, t);
      double dot = 0.0;
      for (int32_t i : sel.components) dot += q[j][i] * LoadAsDouble(args.kv_pool, args.kv_dtype, k_row + i);
      s_hat[j][t] = dot * args.scale / c;
    }
    Softmax(s_hat[j]);
    for (int32_t t = 0; t < length; ++t) group_score[t] += s_hat[j][t];
  }

  // Step 3: the local window, then the best of the rest.
  const int32_t k = std::min(args.config.k, length);
  const int32_t window = std::min(args.config.local_window, length);
  std::vector<int32_t> rest(static_cast<size_t>(length - window));
  std::iota(rest.begin(), rest.end(), 0);
  std::sort(rest.begin(), rest.end(), [&](int32_t a, int32_t b) {
    return group_score[a] != group_score[b] ? group_score[a] > group_score[b] : a < b;
  });
  sel.positions.assign(rest.begin(), rest.begin() + (k - window));
  for (int32_t t = length - window; t < length; ++t) sel.positions.push_back(t);
  std::sort(sel.positions.begin(), sel.positions.end());

  // Step 4.
  sel.alpha.assign(q.size(), 0.0);
  for (size_t j = 0; j < q.size(); ++j) {
    for (int32_t t : sel.positions) sel.alpha[j] += s_hat[j][t];
  }
  return sel;
}

std::vector<double> ReferenceSparqOutput(const SparqArgs& args, int32_t seq, int32_t kv_head,
                                         const SparqSelection& sel) {
  const SeqTokens tokens = TokensOf(args, seq);
  const int32_t d = args.head_dim();
  const std::vector<std::vector<double>> q = GroupQueries(args, seq, kv_head);
  std::vector<double> out(q.size() * static_cast<size_t>(d), 0.0);
  std::vector<double> p(sel.positions.size());
  for (size_t j = 0; j < q.size(); ++j) {
    for (size_t n = 0; n < sel.positions.size(); ++n) {
      const int64_t k_row = RowOffset(args, tokens, 0, kv_head, sel.positions[n]);
      double dot = 0.0;
      for (int32_t i = 0; i < d; ++i) dot += q[j][i] * LoadAsDouble(args.kv_pool, args.kv_dtype, k_row + i);
      p[n] = dot * args.scale;
    }
    Softmax(p);
    double* o = out.data() + j * d;
    for (size_t n = 0; n < sel.positions.size(); ++n) {
      const int64_t v_row = RowOffset(args, tokens, 1, kv_head, sel.positions[n]);
      for (int32_t i = 0; i < d; ++i) o[i] += p[n] * LoadAsDouble(args.kv_pool, args.kv_dtype, v_row + i);
    }
    if (args.config.reallocate_mean) {
      const float* v_mean = args.v_mean + (int64_t{seq} * args.layout.num_kv_heads + kv_head) * d;
      const double alpha = sel.alpha[j];
      for (int32_t i = 0; i < d; ++i) o[i] = alpha * o[i] + (1.0 - alpha) * v_mean[i];
    }
  }
  return out;
}

absl::Status ReferenceSparq(const SparqArgs& args) {
  BANYAN_RETURN_IF_ERROR(ValidateSparqArgs(args, /*plan_on_host=*/true));
  const int32_t d = args.head_dim();
  const int32_t group = args.group_size();
  for (int32_t seq = 0; seq < args.num_seqs; ++seq) {
    for (int32_t kv_head = 0; kv_head < args.layout.num_kv_heads; ++kv_head) {
      const SparqSelection sel = ReferenceSparqSelect(args, seq, kv_head);
      const std::vector<double> out = ReferenceSparqOutput(args, seq, kv_head, sel);
      const int64_t base = (int64_t{seq} * args.num_q_heads + int64_t{kv_head} * group) * d;
      for (size_t i = 0; i < out.size(); ++i) {
        StoreFromDouble(args.out, args.out_dtype, base + static_cast<int64_t>(i), out[i]);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ReferenceValueMean(const KvSource& kv, absl::Span<const int32_t> pages, int32_t length, float* v_mean) {
  const KvLayout& layout = kv.layout;
  if (length < 1 || static_cast<int64_t>(pages.size()) * layout.page_size < length) {
    return absl::InvalidArgumentError(
        absl::StrCat("reference value mean: ", pages.size(), " pages cannot hold ", length, " tokens"));
  }
  const int32_t d = layout.head_dim;
  std::vector<double> sum(static_cast<size_t>(d));
  for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int32_t t = 0; t < length; ++t) {
      const int64_t row = layout.Offset(kv.layer, 1, pages[t / layout.page_size], head, t % layout.page_size);
      for (int32_t i = 0; i < d; ++i) sum[i] += LoadAsDouble(kv.pool, kv.dtype, row + i);
    }
    for (int32_t i = 0; i < d; ++i) v_mean[int64_t{head} * d + i] = static_cast<float>(sum[i] / length);
  }
  return absl::OkStatus();
}

void ReferenceFillKTransposed(const KvLayout& layout, DType dtype, const void* kv_pool, void* k_transposed) {
  const size_t bytes = DTypeSize(dtype);
  const auto* src = static_cast<const uint8_t*>(kv_pool);
  auto* dst = static_cast<uint8_t*>(k_transposed);
  for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
    for (int64_t page = 0; page < layout.num_pages; ++page) {
      for (int32_t head = 0; head < layout.num_kv_heads; ++head) {
        for (int32_t slot = 0; slot < layout.page_size; ++slot) {
          const int64_t row = layout.Offset(layer, 0, page, head, slot);
          for (int32_t dim = 0; dim < layout.head_dim; ++dim) {
            const int64_t to = KvTransposedOffset(layout, layer, page, head, dim, slot);
            std::memcpy(dst + to * bytes, src + (row + dim) * bytes, bytes);
          }
        }
      }
    }
  }
}

}  // namespace banyan::attention
