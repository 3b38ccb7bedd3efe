// Compiled with -O3 -ffp-contract=off -fno-trapping-math (CMakeLists.txt): the loops vectorize,
// and no multiply-add is fused, so the AVX-512, AVX2 and baseline clones give bit-identical
// results (each lane does the same scalar float operations).
#include "model/sampling/row_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

// Sanitizer builds take the baseline code only: GCC's ifunc resolvers run
// before the sanitizer runtimes start (an instrumented resolver crashes TSan
// binaries at load). The clones compute the same bits, so nothing changes.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define BANYAN_ROW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BANYAN_ROW_CLONES
#endif

namespace banyan::model::sampling {
namespace {

constexpr int kLanes = 16;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
constexpr float kExpMin = -87.0f;  // exp below this counts as 0 (2^-125.5: still normal)

// GCC vector types of 8 floats: the AVX2 clone keeps one in a register, the
// baseline in two; every operation is lane-wise IEEE float, so both give the
// same bits as the scalar code.
typedef float V8f __attribute__((vector_size(32)));
typedef int32_t V8i __attribute__((vector_size(32)));
typedef float V16f __attribute__((vector_size(64)));
typedef int32_t V16i __attribute__((vector_size(64)));

// exp(v), Cephes expf's reduction and polynomial; 0 for v < kExpMin (so -inf
// gives 0). F is float (I int32_t) or V8f (I V8i): the same operations.
template <typename F, typename I>
inline __attribute__((always_inline)) F ExpKernel(F v) {
  const F x = v < kExpMin ? F{} + kExpMin : v;
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const F t = x * 1.44269504088896341f + magic;
  const F n = t - magic;
  const I ni = std::bit_cast<I>(t) - std::bit_cast<int32_t>(magic);
  F z = x - n * 0.693359375f;
  z = z - n * -2.12194440e-4f;
  F p = z * 1.9875691500e-4f;
  p = (p + 1.3981999507e-3f) * z;
  p = (p + 8.3334519073e-3f) * z;
  p = (p + 4.1665795894e-2f) * z;
  p = (p + 1.6666665459e-1f) * z;
  p = p + 5.0000001201e-1f;
  const F y = p * (z * z) + z + 1.0f;
  const F scale = std::bit_cast<F>((ni + 127) << 23);
  const F r = y * scale;
  return v < kExpMin ? F{} : r;
}

inline float ExpScalar(float v) { return ExpKernel<float, int32_t>(v); }

// Fixed-order sum of 16 lanes (pairwise), then widened.
inline double LaneSum(const float* lanes) {
  float a[8];
  for (int l = 0; l < 8; ++l) a[l] = lanes[l] + lanes[l + 8];
  for (int l = 0; l < 4; ++l) a[l] = a[l] + a[l + 4];
  a[0] = a[0] + a[2];
  a[1] = a[1] + a[3];
  return static_cast<double>(a[0] + a[1]);
}

inline V8f Load8(const float* x) {
  V8f v;
  std::memcpy(&v, x, sizeof(v));
  return v;
}

// One block of exp-sums: `len` <= kBlock values from x, shifted; element j of
// the block goes to lane j % 16 whether the block is full or not.
template <bool kStore, bool kFloor>
inline __attribute__((always_inline)) double ExpBlock(const float* x, size_t len, float shift, float floor,
                                                      float* e) {
  V16f acc = {};
  size_t j = 0;
  for (; j + kLanes <= len; j += kLanes) {
    V16f v;
    std::memcpy(&v, x + j, sizeof(v));
    V16f ev = ExpKernel<V16f, V16i>(v - shift);
    if constexpr (kFloor) ev = ev < floor ? V16f{} : ev;
    if constexpr (kStore) std::memcpy(e + j, &ev, sizeof(ev));
    acc += ev;
  }
  float lanes[kLanes];
  std::memcpy(lanes, &acc, sizeof(lanes));
  for (int l = 0; j + l < len; ++l) {
    float ev = ExpScalar(x[j + l] - shift);
    if constexpr (kFloor) ev = ev < floor ? 0.0f : ev;
    if constexpr (kStore) e[j + l] = ev;
    lanes[l] += ev;
  }
  return LaneSum(lanes);
}

template <bool kStore, bool kFloor>
BANYAN_ROW_CLONES double ExpSumImpl(const float* x, size_t n, float shift, float floor, float* e,
                                    std::vector<double>* block_sums) {
  double total = 0;
  if (block_sums != nullptr) block_sums->resize((n + kBlock - 1) / kBlock);
  for (size_t b = 0, i = 0; i < n; ++b, i += kBlock) {
    const size_t len = std::min(kBlock, n - i);
    const double s = ExpBlock<kStore, kFloor>(x + i, len, shift, floor, kStore ? e + i : nullptr);
    if (block_sums != nullptr) (*block_sums)[b] = s;
    total += s;
  }
  return total;
}

inline float MaxOf(V8f a, V8f b, float r) {
  const V8f m = a > b ? a : b;
  for (int l = 0; l < 8; ++l) r = m[l] > r ? m[l] : r;
  return r;
}

// Max of x[0, len) (NaN-free input assumed; callers scan first).
BANYAN_ROW_CLONES float BlockMax(const float* x, size_t len) {
  V8f m0 = {}, m1 = {};
  m0 = m0 + kNegInf;
  m1 = m1 + kNegInf;
  size_t j = 0;
  for (; j + 16 <= len; j += 16) {
    const V8f a = Load8(x + j), b = Load8(x + j + 8);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  float r = kNegInf;
  for (; j < len; ++j) r = x[j] > r ? x[j] : r;
  return MaxOf(m0, m1, r);
}

BANYAN_ROW_CLONES void ScanImpl(const float* x, size_t n, float* max_out, bool* bad_out) {
  V8f m0 = {}, m1 = {};
  m0 = m0 + kNegInf;
  m1 = m1 + kNegInf;
  V8i bad = {};
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const V8f a = Load8(x + j), b = Load8(x + j + 8);
    bad |= (a != a) | (b != b) | (a == kPosInf) | (b == kPosInf);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
  }
  float r = kNegInf;
  int32_t any_bad = 0;
  for (; j < n; ++j) {
    any_bad |= static_cast<int32_t>(!(x[j] == x[j]) || x[j] == kPosInf);
    r = x[j] > r ? x[j] : r;
  }
  for (int l = 0; l < 8; ++l) any_bad |= bad[l];
  *max_out = MaxOf(m0, m1, r);
  *bad_out = any_bad != 0;
}

BANYAN_ROW_CLONES void DivideImpl(const float* src, size_t n, float divisor, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] / divisor;
}

// Heap order: "a is more likely than b"; the heap's front is the least likely.
struct MoreLikely {
  bool operator()(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) const {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  }
};

}  // namespace

float FastExp(float v) { return ExpScalar(v); }

RowScan ScanRow(absl::Span<const float> x) {
  RowScan s;
  ScanImpl(x.data(), x.size(), &s.max, &s.bad);
  if (s.bad) return s;
  // First index of the max: skip 64-value blocks that cannot hold it.
  constexpr size_t kStep = 64;
  for (size_t i = 0; i < x.size(); i += kStep) {
    const size_t len = std::min(kStep, x.size() - i);
    if (BlockMax(x.data() + i, len) < s.max) continue;
    for (size_t j = i; j < i + len; ++j) {
      if (x[j] == s.max) {
        s.argmax = static_cast<int32_t>(j);
        return s;
      }
    }
  }
  return s;
}

double ExpSum(absl::Span<const float> x, float shift, float* e, std::vector<double>* block_sums, float floor) {
  if (e != nullptr) {
    return floor > 0 ? ExpSumImpl<true, true>(x.data(), x.size(), shift, floor, e, block_sums)
                     : ExpSumImpl<true, false>(x.data(), x.size(), shift, floor, e, block_sums);
  }
  return floor > 0 ? ExpSumImpl<false, true>(x.data(), x.size(), shift, floor, nullptr, block_sums)
                   : ExpSumImpl<false, false>(x.data(), x.size(), shift, floor, nullptr, block_sums);
}

void DivideRow(absl::Span<const float> src, float divisor, float* dst) {
  DivideImpl(src.data(), src.size(), divisor, dst);
}

bool CollectAtLeast(absl::Span<const float> x, float threshold, std::vector<int32_t>* ids, size_t limit) {
  constexpr size_t kStep = 64;
  const size_t start = ids->size();
  for (size_t i = 0; i < x.size(); i += kStep) {
    const size_t len = std::min(kStep, x.size() - i);
    if (BlockMax(x.data() + i, len) < threshold) continue;
    // Branch-free compaction into room for the whole block.
    size_t n = ids->size();
    ids->resize(n + len);
    int32_t* out = ids->data();
    for (size_t j = i; j < i + len; ++j) {
      out[n] = static_cast<int32_t>(j);
      n += x[j] >= threshold ? 1 : 0;
    }
    ids->resize(n);
    if (n - start > limit) return false;
  }
  return true;
}

BANYAN_ROW_CLONES void BinIndices(absl::Span<const float> x, const float* e, float max, float scale, int32_t top,
                                  int32_t* bins) {
  const float* p = x.data();
  const size_t n = x.size();
  const float limit = static_cast<float>(top);
  for (size_t i = 0; i < n; ++i) {
    const float d = (max - p[i]) * scale;
    const int32_t b = static_cast<int32_t>(d < limit ? d : limit);
    bins[i] = e[i] > 0.0f ? b : top + 1;
  }
}

BANYAN_ROW_CLONES float MinAtLeast(absl::Span<const float> x, float floor) {
  const float* p = x.data();
  const size_t n = x.size();
  V8f m0 = {}, m1 = {};
  m0 = m0 + kPosInf;
  m1 = m1 + kPosInf;
  size_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const V8f a = Load8(p + j), b = Load8(p + j + 8);
    m0 = ((a >= floor) & (a < m0)) ? a : m0;
    m1 = ((b >= floor) & (b < m1)) ? b : m1;
  }
  float r = kPosInf;
  for (; j < n; ++j) r = (p[j] >= floor && p[j] < r) ? p[j] : r;
  for (int l = 0; l < 8; ++l) {
    r = m0[l] < r ? m0[l] : r;
    r = m1[l] < r ? m1[l] : r;
  }
  return r;
}

void TopK(absl::Span<const float> x, int32_t k, const std::vector<int32_t>* subset, std::vector<int32_t>* out) {
  out->clear();
  if (k <= 0) return;
  std::vector<std::pair<float, int32_t>> heap;
  heap.reserve(static_cast<size_t>(k));
  const MoreLikely more;
  auto offer = [&](int32_t id) {
    const float v = x[id];
    if (v == kNegInf) return;
    if (heap.size() < static_cast<size_t>(k)) {
      heap.emplace_back(v, id);
      std::push_heap(heap.begin(), heap.end(), more);
    } else if (more({v, id}, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), more);
      heap.back() = {v, id};
      std::push_heap(heap.begin(), heap.end(), more);
    }
  };
  if (subset != nullptr) {
    for (int32_t id : *subset) offer(id);
  } else {
    // In index order, a value equal to the heap's worst never enters (its
    // index is higher), so a block whose max is <= the worst is skipped.
    constexpr size_t kStep = 64;
    for (size_t i = 0; i < x.size(); i += kStep) {
      const size_t len = std::min(kStep, x.size() - i);
      if (heap.size() == static_cast<size_t>(k) && BlockMax(x.data() + i, len) <= heap.front().first) continue;
      for (size_t j = i; j < i + len; ++j) offer(static_cast<int32_t>(j));
    }
  }
  std::sort_heap(heap.begin(), heap.end(), more);
  out->reserve(heap.size());
  for (const auto& [v, id] : heap) out->push_back(id);
}

}  // namespace banyan::model::sampling
