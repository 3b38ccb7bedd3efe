// One block per draw; every pass rereads the row (from L2). The passes that
// need no order stride the row over the block (coalesced); the last one,
// which ranks ties and walks the kept tokens by id, gives each warp a
// contiguous segment that its lanes read 32 ids at a time.
#include "model/sampling/sample_cuda.h"

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "model/sampling/row_stats.cuh"
#include "sdk/gpu/cuda_status.h"

namespace banyan::model::sampling {
namespace {

using u64 = unsigned long long;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBuckets = 2048;  // the widest radix pass: 11 bits
constexpr int kBucketsPerThread = kBuckets / kThreads;
constexpr float kMassScale = 1099511627776.0f;  // 2^40
constexpr double kMassUnit = 1.0 / 1099511627776.0;
constexpr unsigned kFull = 0xffffffffu;

// After the value bins (Dist::BinDigit), radix passes over the 32-bit key:
// bits 31-21, 20-10, 9-0.
__device__ __forceinline__ int PassShift(int pass) { return pass == 1 ? 21 : pass == 2 ? 10 : 0; }
__device__ __forceinline__ uint32_t PassMask(int pass) { return pass == 3 ? 0x3ffu : 0x7ffu; }

struct Shared {
  uint32_t count[kBuckets];
  u64 mass[kBuckets];
  u64 warp_u64[kWarps];
  int32_t warp_index[kWarps];
  RowStatsShared<kWarps> row;
  int32_t found_bucket;
  u64 found_count;
  u64 found_mass;
};

// An ascending unsigned key with the float order (-0 taken as +0).
__device__ __forceinline__ uint32_t OrderKey(float v) {
  const uint32_t b = __float_as_uint(v + 0.0f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float KeyValue(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// The processed distribution of one draw: v = logit * (1 / temperature),
// e = exp(v - vmax), mass = e as a 2^-40 fixed-point integer.
struct Dist {
  float inv_temperature;
  float vmax;
  float bin_scale = 0.0f;  // (kBuckets - 2) / (vmax - the smallest finite v), or 0
  // Rounded operations (no fused multiply-add): a token's v must be the same
  // float wherever it is computed (its key, its mass and vmax agree).
  __device__ float Value(float logit) const { return __fmul_rn(logit, inv_temperature); }
  __device__ float Exp(float v) const { return expf(__fsub_rn(v, vmax)); }
  __device__ u64 Mass(float e) const { return __float2ull_rn(e * kMassScale); }
  // A first radix digit spread by value (float bits would crowd most of a row
  // into a dozen buckets, and their shared-memory atomics): linear bins below
  // the max, larger values in larger digits, -inf in digit 0. Monotone in v,
  // so equal values share a digit and each digit is an interval of the order.
  __device__ uint32_t BinDigit(float v) const {
    if (v == -INFINITY) return 0;
    const float bin =
        fminf(__fmul_rn(__fsub_rn(vmax, v), bin_scale), static_cast<float>(kBuckets - 2));
    return static_cast<uint32_t>(kBuckets - 1) - static_cast<uint32_t>(bin);
  }
};

// The tokens a cut keeps: every key above `key`, plus the first `ties` (by
// id) of those equal to it. key 0 (no token has it) keeps everything.
struct Cut {
  uint32_t key = 0;
  u64 ties = ~0ull;
  u64 above_mass = 0;  // of the tokens with a larger key (Select fills it)
};
__device__ __forceinline__ Cut Shorter(Cut a, Cut b) {
  if (a.key != b.key) return a.key > b.key ? a : b;
  return a.ties < b.ties ? a : b;
}

// Exclusive prefix sum over the threads in order; *total gets the sum.
__device__ __forceinline__ u64 ExclusiveScan(u64 x, u64* total, Shared& sh) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  u64 inclusive = x;
  for (int off = 1; off < 32; off *= 2) {
    const u64 y = __shfl_up_sync(kFull, inclusive, off);
    if (lane >= off) inclusive += y;
  }
  if (lane == 31) sh.warp_u64[warp] = inclusive;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const u64 s = sh.warp_u64[w];
    before += w < warp ? s : 0;
    all += s;
  }
  __syncthreads();
  *total = all;
  return before + inclusive - x;
}

// Where the running count (by_mass false) or mass of the tokens, in the
// order (value descending, id ascending), first reaches `need` (>= 1, and at
// most the total; with fraction > 0, need = ceil(fraction x the row's mass)):
// the key of the token that reaches it and how many tokens of that key the
// prefix ends with. Pass 0 bins every token by value; passes 1-3 select by
// the key's bits among the tokens of the bin found (few: those passes are
// cheap).
__device__ Cut Select(const float* x, int32_t vocab, const Dist& dist, u64 need, bool by_mass,
                      float fraction, Shared& sh) {
  uint32_t bin = 0, prefix = 0, prefix_mask = 0;
  u64 before_mass = 0;
  int32_t bucket = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = PassShift(pass);
    const uint32_t mask = PassMask(pass);
    for (int b = threadIdx.x; b < kBuckets; b += kThreads) {
      sh.count[b] = 0;
      sh.mass[b] = 0;
    }
    __syncthreads();
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float v = dist.Value(x[i]);
      const uint32_t digit = dist.BinDigit(v);
      uint32_t b = digit;
      if (pass > 0) {
        const uint32_t key = OrderKey(v);
        if (digit != bin || (key & prefix_mask) != prefix) continue;
        b = (key >> shift) & mask;
      }
      atomicAdd(&sh.count[b], 1u);
      const u64 m = dist.Mass(dist.Exp(v));
      if (m != 0) atomicAdd(&sh.mass[b], m);
    }
    __syncthreads();
    // Thread t owns buckets top - 4t .. top - 4t - 3 (from larger keys down).
    const int top = kBuckets - 1 - kBucketsPerThread * threadIdx.x;
    u64 my_count = 0, my_mass = 0;
    for (int j = 0; j < kBucketsPerThread; ++j) {
      my_count += sh.count[top - j];
      my_mass += sh.mass[top - j];
    }
    u64 total;
    u64 count_above = ExclusiveScan(my_count, &total, sh);
    u64 mass_above = ExclusiveScan(my_mass, &total, sh);
    if (pass == 0 && fraction > 0.0f) {  // total: the whole row's mass
      const double want = ceil(static_cast<double>(fraction) * static_cast<double>(total));
      need = max(1ull, min(total, static_cast<u64>(want)));
    }
    for (int j = 0; j < kBucketsPerThread; ++j) {
      const int b = top - j;
      const u64 c = sh.count[b], m = sh.mass[b];
      const u64 reached = by_mass ? mass_above : count_above;
      const u64 in_bucket = by_mass ? m : c;
      if (reached < need && need <= reached + in_bucket) {
        sh.found_bucket = b;
        sh.found_count = count_above;
        sh.found_mass = mass_above;
      }
      count_above += c;
      mass_above += m;
    }
    __syncthreads();
    bucket = sh.found_bucket;
    before_mass += sh.found_mass;
    need -= by_mass ? sh.found_mass : sh.found_count;
    if (pass == 0) {
      bin = static_cast<uint32_t>(bucket);
    } else {
      prefix |= static_cast<uint32_t>(bucket) << shift;
      prefix_mask |= mask << shift;
    }
    if (pass == 3) break;  // sh.count[bucket] is read below
    __syncthreads();       // every thread has read found_* before the next pass
  }
  Cut cut;
  cut.key = prefix;
  cut.above_mass = before_mass;
  const u64 ties = sh.count[bucket];
  if (by_mass) {
    const u64 tie_mass =
        dist.Mass(dist.Exp(KeyValue(prefix)));  // > 0: the bucket held the crossing
    cut.ties = min(ties, (need + tie_mass - 1) / tie_mass);
  } else {
    cut.ties = need;
  }
  __syncthreads();
  return cut;
}

__global__ void __launch_bounds__(kThreads)
    SampleRowsKernel(const float* __restrict__ logits, int32_t rows, int32_t vocab,
                     const DeviceDraw* __restrict__ draws, DrawResult* __restrict__ results) {
  __shared__ Shared sh;
  const DeviceDraw d = draws[blockIdx.x];
  DrawResult* out = results + blockIdx.x;
  if (d.row < 0 || d.row >= rows) {
    if (threadIdx.x == 0) *out = DrawResult{-1, NAN, NAN};
    return;
  }
  const float* x = logits + static_cast<int64_t>(d.row) * vocab;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // Pass 1: the first maximum, bad values, the smallest finite value and the
  // raw sum of exp(logit - max) (row_stats.cuh).
  const RowStats raw = ScanRowBlock<kThreads>(x, vocab, sh.row);
  if (raw.unusable()) {
    if (threadIdx.x == 0) *out = DrawResult{-1, NAN, NAN};
    return;
  }
  const float best = raw.max;
  const int32_t best_i = raw.argmax;
  const double raw_total = raw.sum;
  const double raw_lse = static_cast<double>(best) + log(raw_total);
  const bool greedy = d.temperature == 0.0f;
  Dist dist{greedy ? 1.0f : 1.0f / d.temperature, 0.0f};
  dist.vmax = dist.Value(best);
  const bool overflow = !isfinite(dist.vmax) || !isfinite(dist.inv_temperature);
  const float range = dist.vmax - dist.Value(raw.least);
  if (range > 0.0f && isfinite(range)) dist.bin_scale = static_cast<float>(kBuckets - 2) / range;
  if (greedy || overflow) {
    if (threadIdx.x == 0) {
      const float lp = static_cast<float>(-log(raw_total));
      *out = DrawResult{best_i, greedy ? lp : 0.0f, lp};
    }
    return;
  }

  // The cuts, each a prefix of the order (value descending, id ascending).
  const bool top_k = d.top_k > 0 && d.top_k < vocab;
  const bool top_p = d.top_p < 1.0f;
  Cut cut;
  if (top_k) cut = Select(x, vocab, dist, static_cast<u64>(d.top_k), /*by_mass=*/false, 0.0f, sh);
  if (top_p && top_k) {
    // Over the top-k set: its mass is the larger keys' plus its ties'.
    const u64 set_mass = cut.above_mass + cut.ties * dist.Mass(dist.Exp(KeyValue(cut.key)));
    const double want = ceil(static_cast<double>(d.top_p) * static_cast<double>(set_mass));
    const u64 need = max(1ull, min(set_mass, static_cast<u64>(want)));
    cut = Shorter(cut, Select(x, vocab, dist, need, /*by_mass=*/true, 0.0f, sh));
  } else if (top_p) {
    cut = Select(x, vocab, dist, 0, /*by_mass=*/true, d.top_p, sh);
  }

  // The kept mass per warp segment; ties of the cut's key are kept by rank
  // (token id), and all ties have one mass and one min-p outcome.
  const float tie_e = dist.Exp(KeyValue(cut.key));
  const bool tie_passes_min_p = cut.key != 0 && tie_e >= d.min_p;
  const u64 tie_mass = dist.Mass(tie_e);
  const int32_t segment = ((vocab + kWarps - 1) / kWarps + 31) / 32 * 32;
  const int32_t seg_begin = min(vocab, warp * segment);
  const int32_t seg_end = min(vocab, seg_begin + segment);
  u64 lane_mass = 0;
  uint32_t ties = 0;
  for (int32_t first = seg_begin; first < seg_end; first += 32) {
    const int32_t i = first + lane;
    const float v = i < seg_end ? dist.Value(x[i]) : -INFINITY;
    const uint32_t key = i < seg_end ? OrderKey(v) : 0;
    ties += __popc(__ballot_sync(kFull, key == cut.key && i < seg_end));
    if (key > cut.key) {
      const float e = dist.Exp(v);
      if (e >= d.min_p) lane_mass += dist.Mass(e);
    }
  }
  for (int off = 16; off > 0; off /= 2) lane_mass += __shfl_xor_sync(kFull, lane_mass, off);
  if (lane == 0) {
    sh.warp_u64[warp] = lane_mass;
    sh.warp_index[warp] = static_cast<int32_t>(ties);
  }
  __syncthreads();
  // Every thread: the segments' tie ranks, kept masses and bases.
  u64 kept_mass = 0, base = 0, my_kept = 0, tie_base = 0, ties_before = 0;
  for (int w = 0; w < kWarps; ++w) {
    const u64 w_ties = static_cast<u64>(sh.warp_index[w]);
    const u64 kept_ties = cut.ties > ties_before ? min(w_ties, cut.ties - ties_before) : 0;
    const u64 w_mass = sh.warp_u64[w] + (tie_passes_min_p ? kept_ties * tie_mass : 0);
    if (w == warp) {
      base = kept_mass;
      my_kept = w_mass;
      tie_base = ties_before;
    }
    kept_mass += w_mass;
    ties_before += w_ties;
  }
  // kept_mass >= 1: the first maximum is kept by every cut (min_p <= 1 = its e).
  const u64 target =
      min(kept_mass - 1, static_cast<u64>(d.uniform * static_cast<double>(kept_mass)));
  if (!(base <= target && target < base + my_kept)) return;  // warp-uniform
  // The owning warp walks its segment 32 ids at a time.
  const unsigned lower_lanes = (1u << lane) - 1u;
  u64 cumulative = base, rank = tie_base;
  for (int32_t first = seg_begin; first < seg_end; first += 32) {
    const int32_t i = first + lane;
    const float v = i < seg_end ? dist.Value(x[i]) : -INFINITY;
    const uint32_t key = i < seg_end ? OrderKey(v) : 0;
    const float e = dist.Exp(v);
    const bool tie = key == cut.key && i < seg_end;
    const unsigned tie_lanes = __ballot_sync(kFull, tie);
    bool kept = key > cut.key && e >= d.min_p;
    if (tie) kept = tie_passes_min_p && rank + __popc(tie_lanes & lower_lanes) < cut.ties;
    rank += __popc(tie_lanes);
    u64 inclusive = kept ? dist.Mass(e) : 0;
    for (int off = 1; off < 32; off *= 2) {
      const u64 y = __shfl_up_sync(kFull, inclusive, off);
      if (lane >= off) inclusive += y;
    }
    const unsigned crossed = __ballot_sync(kFull, cumulative + inclusive > target);
    if (crossed != 0) {
      if (lane == __ffs(crossed) - 1) {
        const double log_kept = log(static_cast<double>(kept_mass) * kMassUnit);
        *out = DrawResult{i, static_cast<float>(static_cast<double>(v - dist.vmax) - log_kept),
                          static_cast<float>(static_cast<double>(x[i]) - raw_lse)};
      }
      return;
    }
    cumulative += __shfl_sync(kFull, inclusive, 31);
  }
}

}  // namespace

absl::Status LaunchSampleRows(const SampleRowsArgs& a, cudaStream_t stream) {
  if (a.logits == nullptr || a.draws == nullptr || a.results == nullptr) {
    return absl::InvalidArgumentError("sample rows: null pointer");
  }
  if (a.rows < 1 || a.vocab < 1 || a.num_draws < 0) {
    return absl::InvalidArgumentError("sample rows: rows and vocab must be >= 1, num_draws >= 0");
  }
  if (a.num_draws == 0) return absl::OkStatus();
  SampleRowsKernel<<<a.num_draws, kThreads, 0, stream>>>(a.logits, a.rows, a.vocab, a.draws,
                                                         a.results);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace banyan::model::sampling
