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
// Prints clocks per tile per CTA (both warpgroups' rows: 4.2 MFLOP, 1,024
// clocks at 4,096 FLOP/clk) and microseconds per tile over the grid.
//   nvcc -O3 -std=c++20 -I. -gencode arch=compute_90a,code=sm_90a -o tile_loop bench/micro/tile_loop.cu
// Results: bench/RESULTS.md "Session 5".
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "attention/kernels/tma.cuh"
#include "attention/kernels/wgmma_tile.cuh"

namespace k = banyan::attention::kernels;
using T = __nv_bfloat16;
constexpr int D = 128, kKSteps = D / 16;
constexpr int kTileBytes = 64 * D * 2, kStageBytes = 2 * kTileBytes, kStages = 2;

// S of the tile at k_units with a runtime scale-d on its first k-step (an
// opaque 0 keeps S in its own registers across tiles), then P . V.
__device__ __forceinline__ void Issue(float (&s)[32], const uint32_t (&qf)[kKSteps][4], uint64_t k_desc0,
                                      uint32_t k_units, float (&o)[D / 2], const uint32_t (&pa)[4][4],
                                      uint64_t v_desc0, uint32_t v_units, int s_scale_d) {
  k::WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    const uint32_t off = k_units + (ks / 4) * (64 * 8) + (ks % 4) * 2;
    k::Wgmma<T, 0>(s, qf[ks], k::DescriptorPlus(k_desc0, off), ks > 0 ? 1 : s_scale_d);
  }
  k::WgmmaCommit();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) k::Wgmma<T, 1>(o, pa[kk], k::DescriptorPlus(v_desc0, v_units + kk * 128), 1);
  k::WgmmaCommit();
}

// Waits for P . V inside both arms of a warp-uniform branch (ptxas moves a
// wait to the top of its basic block), then rescales o where a max moved.
__device__ __forceinline__ void RetireAndRescale(float (&o)[D / 2], const float (&factor)[2]) {
  if (__any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f)) {
    k::WgmmaWait<0>();
    k::FenceRegs(o);
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i * 4 + 0] *= factor[0];
      o[i * 4 + 1] *= factor[0];
      o[i * 4 + 2] *= factor[1];
      o[i * 4 + 3] *= factor[1];
    }
  } else {
    asm volatile("" ::: "memory");
    k::WgmmaWait<0>();
    k::FenceRegs(o);
  }
}

__device__ __forceinline__ void Pack(const float (&pr)[32], uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    pa[nt / 2][(nt % 2) * 2 + 0] = k::PackPair<T>(pr[nt * 4 + 0], pr[nt * 4 + 1]);
    pa[nt / 2][(nt % 2) * 2 + 1] = k::PackPair<T>(pr[nt * 4 + 2], pr[nt * 4 + 3]);
  }
}

template <int kMode>
__global__ void __launch_bounds__(256, 1) TileLoop(int tiles, int opaque_zero, float* sink, long long* clocks) {
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
  uint32_t qf[kKSteps][4];
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int j = 0; j < 4; ++j) qf[ks][j] = k::PackPair<T>(0.01f * (lane + j), -0.02f * (ks + j));
  }
  float o[D / 2];
#pragma unroll
  for (int j = 0; j < D / 2; ++j) o[j] = 0.0f;
  float s[32];
#pragma unroll
  for (int j = 0; j < 32; ++j) s[j] = 0.0f;
  float m[2] = {-CUDART_INF_F, -CUDART_INF_F}, l[2] = {0.0f, 0.0f};
  uint32_t pa[4][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) pa[j / 4][j % 4] = 0u;
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
      k::SoftmaxTile64To(s, pr, 0, false, 0, {0, 0}, lane % 4, scale, m, l, factor);
      Pack(pr, pa);
      continue;
    }
    if (kPp) k::NamedBarrierSync(2 + group, 256);
    Issue(s, qf, k_desc0, cur, o, pa, v_desc0, prev, kLean ? opaque_zero : 0);
    if (kPp) k::NamedBarrierArrive(3 - group, 256);
    if constexpr (kMode == 1) {
      k::WgmmaWait<0>();
      k::FenceRegs(s);
      k::FenceRegs(o);
      Pack(s, pa);
    } else if constexpr (kLean) {
      k::WgmmaWait<1>();
      k::FenceRegs(s);
      float pr[32], factor[2];
      k::SoftmaxTile64To(s, pr, 0, false, 0, {0, 0}, lane % 4, scale, m, l, factor);
      RetireAndRescale(o, factor);
      Pack(pr, pa);
    } else {
      k::WgmmaWait<1>();
      k::FenceRegs(s);
      float factor[2];
      k::SoftmaxTile64(s, 0, false, 0, {0, 0}, lane % 4, scale, m, l, factor);
      k::WgmmaWait<0>();
      k::FenceRegs(o);
      k::RescaleAndPackP<T>(o, factor, s, pa);
    }
  }
  if (kPp && group == 0) k::NamedBarrierSync(2, 256);
  k::WgmmaWait<0>();
  k::FenceRegs(o);
  const long long t1 = clock64();
  float acc = l[0] + l[1];
#pragma unroll
  for (int j = 0; j < D / 2; ++j) acc += o[j];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc += static_cast<float>(pa[j / 4][j % 4] & 1u);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x % 128 == 0) clocks[blockIdx.x * 2 + group] = t1 - t0;
#endif
}

template <int kMode>
void Run(const char* name, int ctas, int tiles) {
  const int smem = kStages * kStageBytes + 1024;
  cudaFuncSetAttribute(TileLoop<kMode>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  float* sink;
  long long* clocks;
  cudaMalloc(&sink, sizeof(float) * ctas * 256);
  cudaMalloc(&clocks, sizeof(long long) * ctas * 2);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  TileLoop<kMode><<<ctas, 256, smem>>>(tiles, 0, sink, clocks);  // warm-up
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    TileLoop<kMode><<<ctas, 256, smem>>>(tiles, 0, sink, clocks);
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

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int tiles = 2048;
  for (const int ctas : {1, prop.multiProcessorCount}) {
    Run<0>("kernel", ctas, tiles);
    Run<1>("nosoft", ctas, tiles);
    Run<2>("lean", ctas, tiles);
    Run<3>("pp", ctas, tiles);
    Run<4>("pplean", ctas, tiles);
    Run<5>("softonly", ctas, tiles);
  }
  return 0;
}
