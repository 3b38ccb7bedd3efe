// Microbenchmark (session 11, issue 4): why the merge kernel's first reads of
// the partial states take ~1.1-1.9 us after its dependency wait returns
// (attention/PERF_NOTES.md session 11 item 8). A writer grid stores a
// partial-sized buffer with 8-byte stores, the way the item kernel stores its
// partials; a reader grid (one (row, head) pair per warp, 17 float4 slot
// loads per lane, like MergeKernel<128, 24>) then loads it and times, per
// CTA, the cycles from its wait's return until the loaded values are summed.
// Modes (one line each, medians over the reader's CTAs of 5 runs):
//   pdl-fresh   reader launched as a programmatic dependent launch, waits with
//               griddepcontrol.wait, reads what the writer just wrote
//   pdl-old     the same, but the writer writes another buffer; the reader's
//               was written (and read) one launch earlier
//   plain-fresh reader launched after the writer (no PDL), just-written data
//   flush-fresh as pdl-fresh with a 256 MB memset before the writer (the
//               attention bench's L2 flush)
// Not part of the CMake build:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o merge_read bench/micro/merge_read.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench/micro/micro_check.h"

constexpr int kSlots = 17, kHeads = 8, kDim = 128, kRows = 64;  // the small shape: 64 leaves x 8 heads, 17 slots
constexpr int kReaderCtas = 128, kReaderThreads = 128;          // one (row, head) pair per warp
constexpr size_t kFloats = size_t{kRows} * kSlots * kHeads * kDim;

__device__ __forceinline__ unsigned long long Now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Every thread stores float2s over a strided share of the buffer.
__global__ void Writer(float* buf, float value) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const size_t n2 = kFloats / 2;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n2;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    reinterpret_cast<float2*>(buf)[i] = make_float2(value, value + 1.0f);
  }
}

// Warp w of CTA c: pair (row, head) = c * 4 + w; lane l loads dims [4 l, 4 l + 4) of each slot.
// cycles[c]: wait return -> sum of the loads used (warp 0, lane 0).
__global__ void Reader(const float* buf, float* sink, long long* cycles) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const long long t0 = clock64();
  const int pair = blockIdx.x * (kReaderThreads / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = pair / kHeads, head = pair % kHeads;
  const float* src = buf + ((static_cast<size_t>(row) * kSlots) * kHeads + head) * kDim + lane * 4;
  float4 v[kSlots];
#pragma unroll
  for (int s = 0; s < kSlots; ++s)
    v[s] = __ldcg(reinterpret_cast<const float4*>(src + static_cast<size_t>(s) * kHeads * kDim));
  float acc = 0.0f;
#pragma unroll
  for (int s = 0; s < kSlots; ++s) acc += v[s].x + v[s].y + v[s].z + v[s].w;
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0 + (acc == -1.0f ? 1 : 0);
  sink[blockIdx.x * kReaderThreads + threadIdx.x] = acc;
}

int main() {
  float *a = nullptr, *b = nullptr, *sink = nullptr;
  long long* cycles = nullptr;
  char* flush = nullptr;
  MICRO_CHECK(cudaMalloc(&a, kFloats * 4));
  MICRO_CHECK(cudaMalloc(&b, kFloats * 4));
  MICRO_CHECK(cudaMalloc(&sink, kReaderCtas * kReaderThreads * 4));
  MICRO_CHECK(cudaMalloc(&cycles, kReaderCtas * 8));
  MICRO_CHECK(cudaMalloc(&flush, size_t{256} << 20));
  cudaStream_t stream;
  MICRO_CHECK(cudaStreamCreate(&stream));
  int sms = 0;
  MICRO_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  struct Mode {
    const char* name;
    bool pdl, fresh, flush;
  };
  for (const Mode m : {Mode{"pdl-fresh", true, true, false}, Mode{"pdl-old", true, false, false},
                       Mode{"plain-fresh", false, true, false}, Mode{"flush-fresh", true, true, true}}) {
    std::vector<long long> all;
    for (int rep = 0; rep < 6; ++rep) {
      if (m.flush) MICRO_CHECK(cudaMemsetAsync(flush, rep, size_t{256} << 20, stream));
      if (!m.fresh) Writer<<<sms, 256, 0, stream>>>(a, 2.0f);  // a written one launch before the reader
      Writer<<<sms, 256, 0, stream>>>(m.fresh ? a : b, static_cast<float>(rep));
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(kReaderCtas);
      config.blockDim = dim3(kReaderThreads);
      config.stream = stream;
      cudaLaunchAttribute attr[1] = {};
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      config.attrs = attr;
      config.numAttrs = m.pdl ? 1 : 0;
      MICRO_CHECK(cudaLaunchKernelEx(&config, Reader, static_cast<const float*>(a), sink, cycles));
      MICRO_CHECK(cudaStreamSynchronize(stream));
      if (rep == 0) continue;  // warm-up
      std::vector<long long> h(kReaderCtas);
      MICRO_CHECK(cudaMemcpy(h.data(), cycles, kReaderCtas * 8, cudaMemcpyDeviceToHost));
      all.insert(all.end(), h.begin(), h.end());
    }
    std::sort(all.begin(), all.end());
    std::printf("%-12s wait->loads used: median %lld cycles, p10 %lld, p90 %lld, max %lld\n", m.name,
                all[all.size() / 2], all[all.size() / 10], all[all.size() * 9 / 10], all.back());
  }
  return 0;
}
