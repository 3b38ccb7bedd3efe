#include "attention/cpu/cpu_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "banyan/status_macros.h"
#include "sdk/base/half.h"

namespace banyan::attention {
namespace {

constexpr int kBlock = 64;  // tokens per softmax block

// Converts `n` elements starting at `index` to float.
void LoadFloats(const void* data, DType dtype, int64_t index, int n, float* dst) {
  switch (dtype) {
    case DType::kF32: std::copy_n(static_cast<const float*>(data) + index, n, dst); break;
    case DType::kBf16: {
      const Bf16* src = static_cast<const Bf16*>(data) + index;
      for (int i = 0; i < n; ++i) dst[i] = Bf16BitsToFloat(src[i].bits);
      break;
    }
    case DType::kF16: {
      const Fp16* src = static_cast<const Fp16*>(data) + index;
      for (int i = 0; i < n; ++i) dst[i] = Fp16BitsToFloat(src[i].bits);
      break;
    }
  }
}

void StoreFloat(void* data, DType dtype, int64_t index, float value) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(data)[index] = value; break;
    case DType::kBf16: static_cast<Bf16*>(data)[index] = Bf16(value); break;
    case DType::kF16: static_cast<Fp16*>(data)[index] = Fp16(value); break;
  }
}

// Per-thread scratch, sized once per call.
struct Scratch {
  std::vector<float> q;       // [group][d]
  std::vector<float> o;       // [group][d]
  std::vector<float> m, l;    // [group] running max and sum
  std::vector<float> k, v;    // [kBlock][d]
  std::vector<float> s;       // [group][kBlock]
};

class RowRunner {
 public:
  RowRunner(const AttentionArgs& args, const std::vector<int32_t>& entry_segment)
      : args_(args), plan_(*args.plan), entry_segment_(entry_segment) {}

  void Run(int32_t row, Scratch& sc) const {
    const int32_t d = args_.head_dim();
    const int32_t group = args_.group_size();
    for (int32_t kvh = 0; kvh < args_.layout.num_kv_heads; ++kvh) {
      const int64_t q_offset = (int64_t{row} * args_.num_q_heads + int64_t{kvh} * group) * d;
      LoadFloats(args_.q, args_.q_dtype, q_offset, group * d, sc.q.data());
      for (float& x : sc.q) x *= args_.scale;
      std::fill(sc.o.begin(), sc.o.end(), 0.0f);
      std::fill(sc.m.begin(), sc.m.end(), -std::numeric_limits<float>::infinity());
      std::fill(sc.l.begin(), sc.l.end(), 0.0f);
      for (int32_t i = plan_.query_entry_indptr[row]; i < plan_.query_entry_indptr[row + 1]; ++i) {
        const int32_t e = plan_.query_entries[i];
        const int32_t seg = entry_segment_[e];
        const int32_t limit = plan_.entry_kv_limit[e];
        for (int32_t t0 = 0; t0 < limit; t0 += kBlock) Block(seg, kvh, t0, std::min(kBlock, limit - t0), sc);
      }
      for (int32_t h = 0; h < group; ++h) {
        const float inv = 1.0f / sc.l[h];
        for (int32_t i = 0; i < d; ++i) StoreFloat(args_.out, args_.out_dtype, q_offset + int64_t{h} * d + i, sc.o[h * d + i] * inv);
        if (args_.lse != nullptr) args_.lse[int64_t{row} * args_.num_q_heads + kvh * group + h] = sc.m[h] + std::log(sc.l[h]);
      }
    }
  }

 private:
  // Folds tokens [t0, t0 + n) of segment `seg` into the running state.
  void Block(int32_t seg, int32_t kvh, int32_t t0, int32_t n, Scratch& sc) const {
    const KvLayout& layout = args_.layout;
    const int32_t d = layout.head_dim;
    const int32_t group = args_.group_size();
    const int32_t* pages = plan_.page_indices.data() + plan_.segment_page_indptr[seg];
    const int32_t first = plan_.segment_first_slot[seg];
    for (int32_t j = 0; j < n; ++j) {
      const int32_t pos = first + t0 + j;
      const int64_t page = pages[pos / layout.page_size];
      const int32_t slot = pos % layout.page_size;
      LoadFloats(args_.kv_pool, args_.kv_dtype, layout.Offset(args_.layer, 0, page, kvh, slot), d, &sc.k[j * d]);
      LoadFloats(args_.kv_pool, args_.kv_dtype, layout.Offset(args_.layer, 1, page, kvh, slot), d, &sc.v[j * d]);
    }
    for (int32_t h = 0; h < group; ++h) {
      const float* qh = &sc.q[h * d];
      float* s = &sc.s[h * kBlock];
      float block_max = -std::numeric_limits<float>::infinity();
      for (int32_t j = 0; j < n; ++j) {
        const float* kj = &sc.k[j * d];
        float dot = 0.0f;
        for (int32_t i = 0; i < d; ++i) dot += qh[i] * kj[i];
        s[j] = dot;
        block_max = std::max(block_max, dot);
      }
      const float new_max = std::max(sc.m[h], block_max);
      const float rescale = std::exp(sc.m[h] - new_max);  // 0 when the state was empty
      float* oh = &sc.o[h * d];
      for (int32_t i = 0; i < d; ++i) oh[i] *= rescale;
      float sum = 0.0f;
      for (int32_t j = 0; j < n; ++j) {
        const float p = std::exp(s[j] - new_max);
        sum += p;
        const float* vj = &sc.v[j * d];
        for (int32_t i = 0; i < d; ++i) oh[i] += p * vj[i];
      }
      sc.l[h] = sc.l[h] * rescale + sum;
      sc.m[h] = new_max;
    }
  }

  const AttentionArgs& args_;
  const AttentionPlan& plan_;
  const std::vector<int32_t>& entry_segment_;
};

}  // namespace

absl::Status CpuAttention(const AttentionArgs& args, int num_threads) {
  BANYAN_RETURN_IF_ERROR(ValidateAttentionArgs(args));
  const AttentionPlan& plan = *args.plan;
  std::vector<int32_t> entry_segment(static_cast<size_t>(plan.num_entries()));
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) entry_segment[e] = s;
  }
  const RowRunner runner(args, entry_segment);
  const int32_t d = args.head_dim();
  const int32_t group = args.group_size();
  auto make_scratch = [&] {
    Scratch sc;
    sc.q.resize(static_cast<size_t>(group) * d);
    sc.o.resize(static_cast<size_t>(group) * d);
    sc.m.resize(group);
    sc.l.resize(group);
    sc.k.resize(static_cast<size_t>(kBlock) * d);
    sc.v.resize(static_cast<size_t>(kBlock) * d);
    sc.s.resize(static_cast<size_t>(group) * kBlock);
    return sc;
  };
  const int threads = std::max(1, std::min(num_threads, plan.num_queries));
  if (threads == 1) {
    Scratch sc = make_scratch();
    for (int32_t r = 0; r < plan.num_queries; ++r) runner.Run(r, sc);
    return absl::OkStatus();
  }
  std::atomic<int32_t> next{0};
  auto work = [&] {
    Scratch sc = make_scratch();
    for (int32_t r = next.fetch_add(1); r < plan.num_queries; r = next.fetch_add(1)) runner.Run(r, sc);
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return absl::OkStatus();
}

}  // namespace banyan::attention
