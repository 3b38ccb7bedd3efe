// Microbenchmark (session 15, issue 6): the engine's linear layers as cuBLAS
// runs them (cublasGemmEx, what sdk/gpu/blas.cc calls) against every
// algorithm cublasLt's heuristic offers for the same product, timed one by
// one. The question: how far is the default pick from the best cuBLAS has,
// at the decode shapes (M = active rows, bf16 in, fp32 out, fp32 accumulate:
// y[m, n] = x[m, k] . w[n, k]^T).
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a \
//     bench/micro/gemm_algos.cu -lcublasLt -lcublas -o gemm_algos && ./gemm_algos
//
// Prints, per shape: the default's median, the best algorithm's median, its
// tile / stages / split-K, and the HBM floor (weights once) for reference.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define CHECK_BLAS(x)                                                           \
  do {                                                                          \
    cublasStatus_t s_ = (x);                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                          \
      std::fprintf(stderr, "%s:%d cublas status %d\n", __FILE__, __LINE__, s_); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

namespace {

constexpr int kReps = 50;
constexpr size_t kWorkspace = 32u << 20;

__global__ void FillRandom(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}

// Each timed run starts with a cold L2 (the engine reads every layer's weights once per step: 121 MB per layer).
void* g_flush = nullptr;
constexpr size_t kFlushBytes = 128u << 20;

template <typename F>
float MedianUs(F&& launch, cudaStream_t stream) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) launch();
  std::vector<float> us;
  for (int i = 0; i < kReps; ++i) {
    CHECK_CUDA(cudaMemsetAsync(g_flush, i & 0xff, kFlushBytes, stream));
    CHECK_CUDA(cudaEventRecord(a, stream));
    launch();
    CHECK_CUDA(cudaEventRecord(b, stream));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.0f);
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

struct Shape {
  const char* name;
  int n, k;
};

}  // namespace

int main() {
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  CHECK_BLAS(cublasCreate(&blas));
  CHECK_BLAS(cublasSetStream(blas, stream));
  cublasLtHandle_t lt;
  CHECK_BLAS(cublasLtCreate(&lt));
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, kWorkspace));
  CHECK_CUDA(cudaMalloc(&g_flush, kFlushBytes));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s\n", prop.name);

  // The 1B Llama-shaped engine model: hidden 2048, 32 / 8 heads of 64, intermediate 8192.
  const Shape shapes[] = {{"qkv", 3072, 2048}, {"o", 2048, 2048}, {"gate_up", 16384, 2048}, {"down", 2048, 8192}};
  const int ms[] = {64, 256, 512, 1024};
  const size_t max_a = size_t{1024} * 8192, max_b = size_t{16384} * 8192, max_c = size_t{1024} * 16384;
  __nv_bfloat16 *a, *b;
  float* c;
  CHECK_CUDA(cudaMalloc(&a, max_a * 2));
  CHECK_CUDA(cudaMalloc(&b, max_b * 2));
  CHECK_CUDA(cudaMalloc(&c, max_c * 4));
  FillRandom<<<1024, 256, 0, stream>>>(a, max_a, 1);
  FillRandom<<<1024, 256, 0, stream>>>(b, max_b, 2);
  CHECK_CUDA(cudaGetLastError());
  const float alpha = 1.0f, beta = 0.0f;
  std::printf("%-8s %5s %5s %5s | %9s | %9s %5s | %s\n", "layer", "m", "n", "k", "gemmex us", "best us", "x",
              "best algo (tile id, stages, splitK, reduction, swizzle) of tried");
  for (const Shape& s : shapes) {
    for (int m : ms) {
      const float def = MedianUs(
          [&] {
            CHECK_BLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, s.n, m, s.k, &alpha, b, CUDA_R_16BF, s.k, a,
                                    CUDA_R_16BF, s.k, &beta, c, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
          },
          stream);
      cublasLtMatmulDesc_t desc;
      CHECK_BLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CHECK_BLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t la, lb, lc;
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k));
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, m, s.k));
      CHECK_BLAS(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, s.n, m, s.n));
      cublasLtMatmulPreference_t pref;
      CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
      CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                                      sizeof(kWorkspace)));
      cublasLtMatmulHeuristicResult_t results[32];
      int found = 0;
      CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 32, results, &found));
      float best = 1e30f, first = 0;
      int best_i = -1;
      for (int i = 0; i < found; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const float t = MedianUs(
            [&] {
              CHECK_BLAS(cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &results[i].algo,
                                        workspace, kWorkspace, stream));
            },
            stream);
        if (i == 0) first = t;
        if (t < best) best = t, best_i = i;
      }
      int tile = -1, stages = -1, splitk = -1, red = -1, swz = -1;
      size_t w = 0;
      if (best_i >= 0) {
        const cublasLtMatmulAlgo_t* algo = &results[best_i].algo;
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red), &w);
        cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof(swz), &w);
      }
      const double floor_us = (double(s.n) * s.k * 2 + double(m) * s.k * 2 + double(m) * s.n * 4) / 3.0e12 * 1e6;
      std::printf(
          "%-8s %5d %5d %5d | %9.1f | %9.1f %5.2f | #%d (%d, %d, %d, %d, %d) of %d; lt first %.1f; floor %.1f\n",
          s.name, m, s.n, s.k, def, best, def / best, best_i, tile, stages, splitk, red, swz, found, first, floor_us);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
    }
  }
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  CHECK_CUDA(cudaFree(c));
  CHECK_CUDA(cudaFree(workspace));
  cublasLtDestroy(lt);
  cublasDestroy(blas);
  return 0;
}
