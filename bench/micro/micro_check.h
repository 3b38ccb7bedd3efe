// MICRO_CHECK(x): the bench/micro programs' check of a CUDA runtime call:
// prints the call, its file and line and the error, then exits with 1.
#ifndef BANYAN_BENCH_MICRO_MICRO_CHECK_H_
#define BANYAN_BENCH_MICRO_MICRO_CHECK_H_

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define MICRO_CHECK(x)                                                                       \
  do {                                                                                       \
    cudaError_t e = (x);                                                                     \
    if (e != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

#endif  // BANYAN_BENCH_MICRO_MICRO_CHECK_H_
