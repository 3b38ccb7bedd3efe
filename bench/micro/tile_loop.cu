// Microbenchmark (session 5, issue 4): the TMA tree kernel's consumer loop
// without its feed. Two warpgroups (64 packed rows each) run, per 64-token KV
// tile, S = Q K^T (8 x m64n64k16, A = q from registers) and P . V of the
// previous tile (4 x m64n128k16), with the online softmax between them,
// using the kernel's own device functions (attention/kernels/wgmma_tile.cuh)
// on tiles that stay in shared memory. Modes:
//   0 kernel   the committed loop (tree_tma.cuh TmaConsume)
//   1 nosoft   the products only (S packed straight into P, no softmax)
//   2 lean     the softmax writes its probabilities into a second array and
//              the wait for P . V sits after it (PERF_NOTES session 4 item 5)
//   3 pp       mode 0 with the two warpgroups taking turns to issue (ping-pong)
//   4 pplean   mode 2 with ping-pong
//   5 softonly the softmax only (no tensor-core work)
//  16 softpure the softmax only, one FFMA of feedback per score (mode 5 adds
//              an integer conversion per score)
//  18 kern     tree_tma.cuh's order: both products retired, then the softmax
//              (also prints the clocks of the two phases)
//  20 kernsync mode 18 with both warpgroups meeting at a barrier every tile
// kernel3wg / kernel4wg / lean3wg: modes 0 and 2 with three or four consumer
// warpgroups (384 / 512 threads: 64 more rows per tile each; compare clocks
// per 64 rows)
// ("kernel+sm": mode 0 with modes 6-13's shared-memory size)
// and, with a producer warpgroup as in the kernel (384 threads, setmaxnreg
// 40 / 232, a ring of 5 stages of 32 KB with full / empty mbarriers; the
// consumers run mode 0's loop on the stage that landed and release the
// previous one after its P . V, as tree_tma.cuh does):
//   6 ring      the protocol only: the producer arrives on `full` without data
//   7 ring+copy each stage filled by two 16 KB bulk copies from an L2-resident
//               8 MB buffer (CTA c starts at tile 7c)
//   8 copy+idle the copies of mode 7 into 3 other stages the math never reads,
//               the math on 2 fixed stages (no waits): writes alone
//   9 arrive    mode 6 without the consumers' `full` wait (their arrivals only)
//  10 wait      mode 6 without the consumers' arrivals (the producer runs
//               ahead without waiting for `empty`: their waits only)
//  11 late      mode 6 with the arrival after the softmax (session 4's order)
//  12 bare      the 384-thread structure alone: the producer exits at once, the
//               consumers run mode 0's loop on 2 fixed stages
//  13 random    mode 7 on random K and V (the running max moves, o rescales)
//  14 nomaxnreg mode 12 without setmaxnreg (every warp keeps the launch's 168)
//  15 early     mode 6 with the next stage's `full` tested (test_wait) while the
//               products run; the blocking wait only when it had not landed
// Prints clocks per tile per CTA (both warpgroups' rows: 4.2 MFLOP, 1,024
// clocks at 4,096 FLOP/clk at D 128; half at D 64) and microseconds per tile
// over the grid.
//   nvcc -O3 -std=c++20 -I. [-DTILE_D=64] -gencode arch=compute_90a,code=sm_90a -o tile_loop bench/micro/tile_loop.cu
// Results (H100, 2026-11-23): bench/RESULTS.md "Session 5: light items spread, ...";
// raw: bench/peers/results/h100_2026-11-23_attention_s5_ab.txt. Modes 16-20
// and D 64: RESULTS "Session 10: lazy rescaling, ..." and PERF_NOTES session 10;
// three and four warpgroups: RESULTS attention "Session 19".
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "attention/kernels/tma.cuh"
#include "attention/kernels/wgmma_tile.cuh"

namespace k = banyan::attention::kernels;
using T = __nv_bfloat16;
#ifndef TILE_D
#define TILE_D 128  // head dim: -DTILE_D=64 for the engine model's tile
#endif
constexpr int D = TILE_D, kKSteps = D / 16;
constexpr int kTileBytes = 64 * D * 2, kStageBytes = 2 * kTileBytes, kStages = 2;

// Waits for P . V inside both arms of a warp-uniform branch (ptxas moves a
// wait to the top of its basic block), then rescales o where a max moved.
__device__ __forceinline__ void RetireAndRescale(float (&o)[D / 2], const float (&factor)[2]) {
  if (__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f)) {
    k::WgmmaWait<0>();
    k::FenceRegs(o);
    k::MultiplyRows(o, factor);
  } else {
    asm volatile("" ::: "memory");
    k::WgmmaWait<0>();
    k::FenceRegs(o);
  }
}

// A consumer's registers before its loop: q fragments (small values from
// the lane), o = 0, the empty softmax state, P = 0.
__device__ __forceinline__ void InitLoop(int lane, uint32_t (&qf)[kKSteps][4], float (&o)[D / 2], float (&m)[2],
                                         float (&l)[2], uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int j = 0; j < 4; ++j) qf[ks][j] = k::PackPair<T>(0.01f * (lane + j), -0.02f * (ks + j));
  }
#pragma unroll
  for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
  m[0] = m[1] = -CUDART_INF_F;
  l[0] = l[1] = 0.0f;
#pragma unroll
  for (int j = 0; j < 16; ++j) pa[j / 4][j % 4] = 0u;
}

// After the loop: the clocks since t0 (by each warpgroup's first thread) and
// a sum of the results, so that nothing is dead code.
__device__ __forceinline__ void Finish(long long t0, int group, bool lead, const float (&o)[D / 2],
                                       const float (&l)[2], const uint32_t (&pa)[4][4], float* sink,
                                       long long* clocks) {
  const long long t1 = clock64();
  float acc = l[0] + l[1];
#pragma unroll
  for (int j = 0; j < D / 2; ++j) acc += o[j];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc += static_cast<float>(pa[j / 4][j % 4] & 1u);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (lead) clocks[blockIdx.x * 4 + group] = t1 - t0;
}

// Modes 18 and 20: per warpgroup of CTA 0, the clocks its first warp spent in
// the products (issue to retire) and in the softmax, summed over the tiles.
__device__ long long g_phase[4];

template <int kMode, int kThreadsN = 256>
__global__ void __launch_bounds__(kThreadsN, 1) TileLoop(int tiles, int opaque_zero, float* sink, long long* clocks) {
#ifdef BANYAN_WGMMA_ENABLED
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  // Small finite K and V values (the products' speed does not depend on them).
  for (int i = threadIdx.x; i < kStages * kStageBytes / 2; i += blockDim.x) {
    reinterpret_cast<T*>(smem)[i] = __float2bfloat16(0.01f * static_cast<float>(i % 13) - 0.06f);
  }
  k::FenceProxyAsync();
  __syncthreads();
  const int group = threadIdx.x / 128, lane = threadIdx.x % 32;
  const float scale = __int_as_float(__float_as_int(0.125f * 1.4426950f) | opaque_zero);
  const uint64_t k_desc0 = k::SmemDescriptor(smem, 16, 1024);
  const uint64_t v_desc0 = k::SmemDescriptor(smem + kTileBytes, 64 * 128, 1024);
  uint32_t qf[kKSteps][4], pa[4][4];
  float o[D / 2], m[2], l[2];
  float neg_m[2] = {-0.0f, -0.0f};  // -SafeMax(m), moved with m (MoveRowMax)
  InitLoop(lane, qf, o, m, l, pa);
  float s[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) s[j] = 0.0f;
  constexpr bool kPp = kMode == 3 || kMode == 4;
  constexpr bool kLean = kMode == 2 || kMode == 4;
  constexpr uint32_t kStageUnits = kStageBytes / 16;
  if (kPp && group == 1) k::NamedBarrierArrive(2, 256);
  const long long t0 = clock64();
  for (int t = 0; t < tiles; ++t) {
    const uint32_t cur = (t % kStages) * kStageUnits, prev = ((t + kStages - 1) % kStages) * kStageUnits;
    if constexpr (kMode == 5) {
      float pr[32], factor[2];
#pragma unroll
      for (int j = 0; j < 32; ++j) s[j] += pr[j % 4] * 0.5f + static_cast<float>(pa[j / 8][j % 4] & 0xff);
      k::SoftmaxTile64To(s, pr, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
      k::PackP<T>(pr, pa);
      continue;
    }
    if constexpr (kMode == 16) {  // the softmax alone, one FFMA of feedback per score
      float factor[2], pr[32];
#pragma unroll
      for (int j = 0; j < 32; ++j) s[j] = fmaf(s[j], 0.5f, l[(j % 4) / 2]);
      k::SoftmaxTile64To(s, pr, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
      k::PackP<T>(pr, pa);
      continue;
    }
    if constexpr (kMode == 18 || kMode == 20) {  // tree_tma.cuh's order: both products retired, then the softmax
      if constexpr (kMode == 20) k::NamedBarrierSync(1, 256);  // both warpgroups start every tile together
      const long long c0 = clock64();
      k::IssueTileProducts<T>(s, qf, k_desc0, cur, o, pa, v_desc0, prev);
      k::WgmmaWait<0>();
      k::FenceRegs(s);
      k::FenceRegs(o);
      const long long c1 = clock64();
      float factor[2];
      k::SoftmaxTile64(s, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
      k::RescaleAndPackP<T>(o, factor, s, pa);
      if (blockIdx.x == 0 && threadIdx.x % 128 == 0) {
        g_phase[group * 2] += c1 - c0;
        g_phase[group * 2 + 1] += clock64() - c1;
      }
      continue;
    }
    if (kPp) k::NamedBarrierSync(2 + group, 256);
    k::IssueTileProducts<T>(s, qf, k_desc0, cur, o, pa, v_desc0, prev, k::NoTensorSums{}, kLean ? opaque_zero : 0);
    if (kPp) k::NamedBarrierArrive(3 - group, 256);
    if constexpr (kMode == 1) {
      k::WgmmaWait<0>();
      k::FenceRegs(s);
      k::FenceRegs(o);
      k::PackP<T>(s, pa);
    } else if constexpr (kLean) {
      k::WgmmaWait<1>();
      k::FenceRegs(s);
      float pr[32], factor[2];
      k::SoftmaxTile64To(s, pr, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
      RetireAndRescale(o, factor);
      k::PackP<T>(pr, pa);
    } else {
      k::WgmmaWait<1>();
      k::FenceRegs(s);
      float factor[2];
      k::SoftmaxTile64(s, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
      k::WgmmaWait<0>();
      k::FenceRegs(o);
      k::RescaleAndPackP<T>(o, factor, s, pa);
    }
  }
  if (kPp && group == 0) k::NamedBarrierSync(2, 256);
  k::WgmmaWait<0>();
  k::FenceRegs(o);
  Finish(t0, group, threadIdx.x % 128 == 0, o, l, pa, sink, clocks);
#endif
}

// Whether the phase of parity `parity` has completed, without waiting (mode 15).
__device__ __forceinline__ bool MbarrierTestWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(k::SmemAddress(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

constexpr int kRingStages = 5, kSourceTiles = 256;  // 8 MB of source tiles

// Values in [-2, 2) from a hash of the index.
__global__ void FillRandom(T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    out[i] = __float2bfloat16(static_cast<float>(h >> 8) / static_cast<float>(1u << 22) - 2.0f);
  }
}

// Modes 6-8 (see the top): warpgroup 0 produces, 1-2 consume.
template <int kMode>
__global__ void __launch_bounds__(384, 1) FedLoop(int tiles, const char* source, float* sink, long long* clocks) {
#ifdef BANYAN_WGMMA_ENABLED
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kRingStages * kStageBytes);
  uint64_t* empty = full + kRingStages;
  for (int i = threadIdx.x; i < kRingStages * kStageBytes / 2; i += blockDim.x) {
    reinterpret_cast<T*>(smem)[i] = __float2bfloat16(0.01f * static_cast<float>(i % 13) - 0.06f);
  }
  if (threadIdx.x == 0) {
    for (int st = 0; st < kRingStages; ++st) {
      k::MbarrierInit(full + st, 1);
      k::MbarrierInit(empty + st, kMode == 8 ? 1 : 8);
    }
    k::FenceMbarrierInit();
  }
  k::FenceProxyAsync();
  __syncthreads();
  if (threadIdx.x < 128) {
    if (kMode != 14) k::ShrinkRegisters<40>();
    if (threadIdx.x != 0 || kMode == 12 || kMode == 14) return;
    // Mode 8 writes stages 2-4 only, reusing one once its copies landed.
    const int first = kMode == 8 ? 2 : 0, count = kMode == 8 ? 3 : kRingStages;
    int st = 0;
    uint32_t phase = 0;
    for (int t = 0; t < tiles; ++t) {
      if (kMode == 8) {
        if (t >= count) k::MbarrierWait(full + first + st, phase ^ 1u);
      } else if (kMode != 10 && kMode != 9) {
        k::MbarrierWait(empty + st, phase ^ 1u);
      }
      uint64_t* bar = full + first + st;
      if (kMode == 6 || kMode == 9 || kMode == 11 || kMode == 15) {
        if (kMode != 9) k::MbarrierArrive(bar);
      } else if (kMode == 10) {
        if (t < kRingStages) k::MbarrierArrive(bar);  // every phase complete once: parity waits alternate
      } else {
        k::MbarrierArriveExpectTx(bar, kStageBytes);
        const char* src = source + static_cast<int64_t>((blockIdx.x * 7 + t) % kSourceTiles) * kStageBytes;
        char* dst = smem + (first + st) * kStageBytes;
        k::BulkCopyToShared(dst, src, kTileBytes, bar);
        k::BulkCopyToShared(dst + kTileBytes, src + kTileBytes, kTileBytes, bar);
      }
      if (++st == count) {
        st = 0;
        phase ^= 1u;
      }
    }
    if (kMode == 8) {  // no copy may still be landing when the CTA exits
      for (int i = 0; i < count; ++i) {
        const int uses = (tiles - i + count - 1) / count;
        if (uses > 0) k::MbarrierWait(full + first + i, static_cast<uint32_t>(uses - 1) & 1u);
      }
    }
    return;
  }
  if (kMode != 14) k::GrowRegisters<232>();
  const int ct = threadIdx.x - 128, group = ct / 128, lane = ct % 32;
  const float scale = 0.125f * 1.4426950f;
  const uint64_t k_desc0 = k::SmemDescriptor(smem, 16, 1024);
  const uint64_t v_desc0 = k::SmemDescriptor(smem + kTileBytes, 64 * 128, 1024);
  uint32_t qf[kKSteps][4], pa[4][4];
  float o[D / 2], m[2], l[2];
  float neg_m[2] = {-0.0f, -0.0f};  // -SafeMax(m), moved with m (MoveRowMax)
  InitLoop(lane, qf, o, m, l, pa);
  constexpr uint32_t kStageUnits = kStageBytes / 16;
  constexpr bool kNoWaits = kMode == 8 || kMode == 12 || kMode == 14;
  const int stages = kNoWaits ? 2 : kRingStages;
  int st = 0, prev = 0;
  uint32_t phase = 0;
  bool landed = false;  // mode 15: the current stage's `full` seen complete already
  const long long t0 = clock64();
  for (int t = 0; t < tiles; ++t) {
    if (!kNoWaits && kMode != 9 && !landed) k::MbarrierWait(full + st, kMode == 10 ? 0u : phase);
    float s[32];
    k::IssueTileProducts<T>(s, qf, k_desc0, st * kStageUnits, o, pa, v_desc0, prev * kStageUnits);
    if (kMode == 15) {
      const bool wrap = st + 1 == stages;
      landed = MbarrierTestWait(full + (wrap ? 0 : st + 1), wrap ? phase ^ 1u : phase);
    }
    k::WgmmaWait<0>();
    k::FenceRegs(s);
    k::FenceRegs(o);
    if (!kNoWaits && kMode != 10 && kMode != 11 && t > 0) {
      __syncwarp();
      if (lane == 0) k::MbarrierArrive(empty + prev);
    }
    float factor[2];
    k::SoftmaxTile64(s, 0, false, 0, {0, 0}, lane % 4, scale, m, neg_m, l, factor);
    if (kMode == 11 && t > 0) {
      __syncwarp();
      if (lane == 0) k::MbarrierArrive(empty + prev);
    }
    k::RescaleAndPackP<T>(o, factor, s, pa);
    prev = st;
    if (++st == stages) {
      st = 0;
      phase ^= 1u;
    }
  }
  k::WgmmaWait<0>();
  k::FenceRegs(o);
  Finish(t0, group, ct % 128 == 0, o, l, pa, sink, clocks);
#endif
}

// Launches `launch(sink, clocks)` once to warm up, then 5 times; prints the
// best event time and CTA 0's clocks per tile.
template <typename Launch>
void Report(const char* name, int ctas, int tiles, int threads, Launch launch) {
  float* sink;
  long long* clocks;
  cudaMalloc(&sink, sizeof(float) * ctas * threads);
  cudaMalloc(&clocks, sizeof(long long) * ctas * 4);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  launch(sink, clocks);
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    launch(sink, clocks);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    best = ms < best ? ms : best;
  }
  long long host[2];
  cudaMemcpy(host, clocks, sizeof(host), cudaMemcpyDeviceToHost);
  const cudaError_t err = cudaGetLastError();
  std::printf("%-9s ctas %3d  clk/tile wg0 %6.0f wg1 %6.0f  us/tile %.3f  %s\n", name, ctas,
              static_cast<double>(host[0]) / tiles, static_cast<double>(host[1]) / tiles, best * 1e3 / tiles,
              err == cudaSuccess ? "" : cudaGetErrorString(err));
  cudaFree(sink);
  cudaFree(clocks);
}

template <int kMode>
void RunFed(const char* name, int ctas, int tiles, const char* source) {
  const int smem = kRingStages * kStageBytes + 2 * kRingStages * 8 + 1024;
  cudaFuncSetAttribute(FedLoop<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  Report(name, ctas, tiles, 384, [&](float* sink, long long* clocks) {
    FedLoop<kMode><<<ctas, 384, smem>>>(tiles, source, sink, clocks);
  });
}

template <int kMode, int kThreadsN = 256>
void Run(const char* name, int ctas, int tiles, int extra_smem = 0) {
  const int smem = kStages * kStageBytes + 1024 + extra_smem;
  cudaFuncSetAttribute(TileLoop<kMode, kThreadsN>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  Report(name, ctas, tiles, kThreadsN, [&](float* sink, long long* clocks) {
    TileLoop<kMode, kThreadsN><<<ctas, kThreadsN, smem>>>(tiles, 0, sink, clocks);
  });
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs, D %d (%d clk of tensor time per tile)\n", prop.name, prop.multiProcessorCount, D, 8 * D);
  const int tiles = 2048;
  for (const int ctas : {1, prop.multiProcessorCount}) {
    Run<0>("kernel", ctas, tiles);
    Run<1>("nosoft", ctas, tiles);
    Run<2>("lean", ctas, tiles);
    Run<3>("pp", ctas, tiles);
    Run<4>("pplean", ctas, tiles);
    Run<5>("softonly", ctas, tiles);
    Run<16>("softpure", ctas, tiles);
    for (const int mode : {18, 20}) {
      long long zero[4] = {};
      cudaMemcpyToSymbol(g_phase, zero, sizeof(zero));
      if (mode == 18) Run<18>("kern", ctas, tiles);
      if (mode == 20) Run<20>("kernsync", ctas, tiles);
      long long ph[4];
      cudaMemcpyFromSymbol(ph, g_phase, sizeof(ph));
      std::printf("          CTA 0 per tile (6 launches): products wg0 %lld wg1 %lld, softmax wg0 %lld wg1 %lld\n",
                  ph[0] / (6 * tiles), ph[2] / (6 * tiles), ph[1] / (6 * tiles), ph[3] / (6 * tiles));
    }
    Run<0>("kernel+sm", ctas, tiles, 3 * kStageBytes);  // mode 0 with FedLoop's shared memory size
  }
  // More consumer warpgroups per CTA (session 19): 64 more rows per tile each,
  // so compare us/tile per 64 rows. 512 threads: 128 registers per thread.
  for (const int ctas : {1, prop.multiProcessorCount}) {
    Run<0, 384>("kernel3wg", ctas, tiles);
    Run<0, 512>("kernel4wg", ctas, tiles);
    Run<2, 384>("lean3wg", ctas, tiles);
  }
  char* source;
  cudaMalloc(&source, size_t{kSourceTiles} * kStageBytes);
  cudaMemset(source, 0x3c, size_t{kSourceTiles} * kStageBytes);  // bf16 0x3c3c: 0.0115
  char* random;
  cudaMalloc(&random, size_t{kSourceTiles} * kStageBytes);
  FillRandom<<<1024, 256>>>(reinterpret_cast<T*>(random), int64_t{kSourceTiles} * kStageBytes / 2);
  for (const int ctas : {1, prop.multiProcessorCount}) {
    RunFed<6>("ring", ctas, tiles, source);
    RunFed<7>("ringcopy", ctas, tiles, source);
    RunFed<8>("copyidle", ctas, tiles, source);
    RunFed<9>("arrive", ctas, tiles, source);
    RunFed<10>("wait", ctas, tiles, source);
    RunFed<11>("late", ctas, tiles, source);
    RunFed<12>("bare", ctas, tiles, source);
    RunFed<13>("random", ctas, tiles, random);
    RunFed<14>("nomaxnreg", ctas, tiles, random);
    RunFed<15>("early", ctas, tiles, random);
  }
  cudaFree(source);
  cudaFree(random);
  return 0;
}
