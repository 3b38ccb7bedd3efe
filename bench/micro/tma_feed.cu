// Microbenchmark (session 4, issue 4): how fast one SM's TMA engine can
// stream 32 KB tiles from L2 / HBM into shared memory, with the same
// producer / consumer mbarrier ring as kernels/tree_tma.cuh. Three feeds:
// 1-D bulk copies (cp.async.bulk), 2-D tiled boxes with 128-byte swizzle,
// and Banyan's KV pool layout ([page][head][slot][D = 128], 16-slot pages)
// through the same 5-D tensor map as attention/kv_tensor_map.cc, one box per
// whole 64-token tile or one per page x 64-column block, with one consumer
// thread or 8 consumer warps releasing stages as tree_tma.cuh does. `share`
// CTAs read the same tile at the same time (8 = the row tiles of one KV
// chunk in the tree kernel). Prints aggregate and per-SM GB/s.
// Not part of the CMake build (links the driver API directly):
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o tma_feed bench/micro/tma_feed.cu -lcuda
// Results: bench/RESULTS.md "Session 4: microbenchmarks".
// L2 -> SM streaming rate with 1-D bulk copies (the TMA engine): every CTA
// streams `tiles` 32 KB tiles (two 16 KB copies each) through a ring of
// `stages` stages; one consumer warp frees each stage as soon as it lands.
// Buffer: `mb` MB, read by all CTAs; `share` CTAs read the same tile at once
// (CTA c starts at tile (c / share) * stride). Prints aggregate GB/s.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda.h>

__device__ __forceinline__ uint32_t Smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void Init(uint64_t* b, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(Smem(b)), "r"(n)); }
__device__ __forceinline__ void ExpectTx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(Smem(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void Arrive(uint64_t* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(Smem(b)) : "memory"); }
__device__ __forceinline__ void Wait(uint64_t* b, uint32_t phase) {
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra W;\n}\n" ::"r"(Smem(b)), "r"(phase) : "memory");
}
__device__ __forceinline__ void Bulk(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(Smem(dst)), "l"(src), "r"(bytes), "r"(Smem(b)) : "memory");
}

// Thread 0 initializes the ring's barriers (full: one arrival + the bytes;
// empty: `empty_arrivals`), then the CTA meets.
__device__ __forceinline__ void InitRing(uint64_t* full, uint64_t* empty, int stages, int empty_arrivals) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      Init(full + s, 1);
      Init(empty + s, empty_arrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

__global__ void Feed(const char* buf, size_t buf_tiles, int tiles, int stages, int share, long long* ns) {
  extern __shared__ __align__(1024) char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + stages * 32768);
  uint64_t* empty = full + stages;
  InitRing(full, empty, stages, 1);
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  const size_t start = (size_t(blockIdx.x / share) * 97) % buf_tiles;
  if (threadIdx.x == 0) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      const uint32_t ph = (t / stages) & 1;
      Wait(empty + s, ph ^ 1);
      ExpectTx(full + s, 32768);
      const char* src = buf + ((start + t) % buf_tiles) * 32768;
      Bulk(smem + s * 32768, src, 16384, full + s);
      Bulk(smem + s * 32768 + 16384, src + 16384, 16384, full + s);
    }
  } else if (threadIdx.x == 32) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(full + s, (t / stages) & 1);
      Arrive(empty + s);
    }
    long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    ns[blockIdx.x] = t1 - t0;
  }
}

__device__ __forceinline__ void Tile2d(void* dst, const CUtensorMap* map, int x, int y, uint64_t* b) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               ::"r"(Smem(dst)), "l"(map), "r"(x), "r"(y), "r"(Smem(b)) : "memory");
}
// The same stream with 2-D tiled TMA boxes: a [rows][64] bf16 tensor (128 B
// rows), box 64 x box_rows, 128-byte swizzle; a 32 KB tile = 32768 / (128 *
// box_rows) boxes.
__global__ void FeedTiled(const __grid_constant__ CUtensorMap map, size_t buf_tiles, int tiles, int stages, int share,
                          int box_rows) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = smem_raw + ((1024 - (Smem(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + stages * 32768);
  uint64_t* empty = full + stages;
  InitRing(full, empty, stages, 1);
  const size_t start = (size_t(blockIdx.x / share) * 97) % buf_tiles;
  const int boxes = 32768 / (128 * box_rows);
  if (threadIdx.x == 0) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(empty + s, ((t / stages) & 1) ^ 1);
      ExpectTx(full + s, 32768);
      const int row0 = static_cast<int>(((start + t) % buf_tiles) * 256);
      for (int b = 0; b < boxes; ++b) Tile2d(smem + s * 32768 + b * 128 * box_rows, &map, 0, row0 + b * box_rows, full + s);
    }
  } else if (threadIdx.x == 32) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(full + s, (t / stages) & 1);
      Arrive(empty + s);
    }
  }
}

__device__ __forceinline__ void Tile5d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, int c3, int c4,
                                       uint64_t* b) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];"
               ::"r"(Smem(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(Smem(b)) : "memory");
}
// Banyan's KV pool layout [page][head][slot][D = 128] bf16, 16 slots per
// page, 8 heads; the 5-D map (col, slot, page, head, block); one tile = 64
// tokens = 4 pages of one head, K and V (two boxes of 4 pages x 2 blocks, or
// `split` boxes per K/V of fewer pages / one block).
__global__ void FeedPool(const __grid_constant__ CUtensorMap map, int pages, int tiles, int stages, int share, int mode) {
  extern __shared__ __align__(1024) char smem_raw[];
  char* smem = smem_raw + ((1024 - (Smem(smem_raw) & 1023)) & 1023);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + stages * 32768);
  uint64_t* empty = full + stages;
  InitRing(full, empty, stages, mode >= 2 ? 8 : 1);
  const int head = (blockIdx.x / share) % 8;
  const int tiles_per_plane = pages / 2 / 4;  // K plane = pages [0, pages/2), V plane after
  const int start = (blockIdx.x / share / 8) * 13;
  if (threadIdx.x == 0) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(empty + s, ((t / stages) & 1) ^ 1);
      ExpectTx(full + s, 32768);
      const int page = ((start + t) % tiles_per_plane) * 4;
      char* dst = smem + s * 32768;
      if (mode != 1) {  // whole tile: 4 pages x 2 blocks per box
        Tile5d(dst, &map, 0, 0, page, head, 0, full + s);
        Tile5d(dst + 16384, &map, 0, 0, pages / 2 + page, head, 0, full + s);
      } else {  // one page x one block per box (the `single` map): 16 boxes
        for (int kv = 0; kv < 2; ++kv)
          for (int blk = 0; blk < 2; ++blk)
            for (int pg = 0; pg < 4; ++pg)
              Tile5d(dst + kv * 16384 + blk * 8192 + pg * 2048, &map, 0, 0, kv * (pages / 2) + page + pg, head, blk, full + s);
      }
    }
  } else if (mode < 2 && threadIdx.x == 32) {
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(full + s, (t / stages) & 1);
      Arrive(empty + s);
    }
  } else if (mode >= 2 && threadIdx.x >= 128) {  // 8 consumer warps, as tree_tma.cuh's m1 experiment
    const int lane = threadIdx.x % 32;
    for (int t = 0; t < tiles; ++t) {
      const int s = t % stages;
      Wait(full + s, (t / stages) & 1);
      if (mode == 2) {  // release t - 1 once t landed
        if (t > 0) { __syncwarp(); if (lane == 0) Arrive(empty + (t - 1) % stages); }
      } else {  // release t at once
        __syncwarp(); if (lane == 0) Arrive(empty + s);
      }
    }
    if (mode == 2) { __syncwarp(); if (lane == 0) Arrive(empty + (tiles - 1) % stages); }
  }
}

// Median of three timed launches, as aggregate GB/s of `sms` CTAs x `tiles`
// 32 KB tiles; -1 (after printing the error) when a launch fails.
template <typename Launch>
double MedianGbps(int sms, int tiles, Launch launch) {
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a);
    launch();
    cudaEventRecord(b);
    const cudaError_t e = cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (e != cudaSuccess) {
      printf("error %s\n", cudaGetErrorString(e));
      return -1;
    }
    rates.push_back(double(sms) * tiles * 32768 / (ms * 1e-3) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[1];
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* ns;
  cudaMalloc(&ns, sizeof(long long) * 1024);
  {
    const int mb = 32;
    const size_t buf_tiles = size_t(mb) * 32;
    char* buf;
    cudaMalloc(&buf, buf_tiles * 32768);
    cudaMemset(buf, 1, buf_tiles * 32768);
    for (int box_rows : {64, 128, 256}) {
      CUtensorMap map;
      cuuint64_t dims[2] = {64, buf_tiles * 256};
      cuuint64_t strides[1] = {128};
      cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
      cuuint32_t es[2] = {1, 1};
      CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, buf, dims, strides, box, es,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) { printf("encode failed %d (box_rows %d)\n", int(r), box_rows); continue; }
      for (int share : {1, 8}) {
        const int stages = 4, tiles = 2000, smem = stages * 32768 + 2048;
        cudaFuncSetAttribute(FeedTiled, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        const double gbps = MedianGbps(sms, tiles, [&] { FeedTiled<<<sms, 64, smem>>>(map, buf_tiles, tiles, stages, share, box_rows); });
        if (gbps < 0) return 1;
        printf("tiled 2-D box 64 x %d, 128B swizzle, 32 MB, 4 stages, share %d: %.0f GB/s (%.1f GB/s per SM)\n", box_rows,
               share, gbps, gbps / sms);
      }
    }
    cudaFree(buf);
  }
  for (int pages : {512, 8192}) {  // 2 planes x pages/2 pages x 8 heads x 4 KB: 16 MB / 256 MB
    char* pool;
    const size_t bytes = size_t(pages) * 8 * 16 * 256;
    cudaMalloc(&pool, bytes);
    cudaMemset(pool, 1, bytes);
    for (int mode : {0, 2, 3}) {
      CUtensorMap map;
      cuuint64_t dims[5] = {64, 16, static_cast<cuuint64_t>(pages), 8, 2};
      cuuint64_t strides[4] = {256, 256 * 16 * 8, 256 * 16, 128};
      cuuint32_t box[5] = {64, 16, mode != 1 ? 4u : 1u, 1, mode != 1 ? 2u : 1u};
      cuuint32_t es[5] = {1, 1, 1, 1, 1};
      CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, pool, dims, strides, box, es,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS) { printf("encode failed %d\n", int(r)); continue; }
      for (int share : {1, 8}) {
        const int stages = 5, tiles = 2000, smem = stages * 32768 + 2048;
        cudaFuncSetAttribute(FeedPool, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        const double gbps = MedianGbps(sms, tiles, [&] { FeedPool<<<sms, mode >= 2 ? 384 : 64, smem>>>(map, pages, tiles, stages, share, mode); });
        if (gbps < 0) return 1;
        printf("pool 5-D map, %s, %zu MB, 5 stages, share %d: %.0f GB/s (%.1f GB/s per SM)\n",
               mode == 0 ? "whole-tile boxes, 1 consumer" : mode == 2 ? "whole-tile, 8 consumer warps, release t-1" : "whole-tile, 8 consumer warps, release t", bytes >> 20, share, gbps, gbps / sms);
      }
    }
    cudaFree(pool);
  }
  for (int mb : {32}) {
    const size_t buf_tiles = size_t(mb) * 32;  // 32 KB tiles
    char* buf;
    cudaMalloc(&buf, buf_tiles * 32768);
    cudaMemset(buf, 1, buf_tiles * 32768);
    for (int stages : {4}) {
      for (int share : {1, 8}) {
        const int tiles = 2000;
        const int smem = stages * 32768 + 1024;
        cudaFuncSetAttribute(Feed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        const double gbps = MedianGbps(sms, tiles, [&] { Feed<<<sms, 64, smem>>>(buf, buf_tiles, tiles, stages, share, ns); });
        if (gbps < 0) return 1;
        printf("buffer %4d MB stages %d share %d: %.0f GB/s aggregate (%.1f GB/s per SM)\n", mb, stages, share, gbps,
               gbps / sms);
      }
    }
    cudaFree(buf);
  }
  return 0;
}
