// Cache state for GPU benchmarks: a kernel that only reads a large buffer, so
// that what the L2 holds afterwards is that buffer's lines, all clean. A
// memset of the same buffer also evicts everything, but leaves the L2 full of
// dirty lines that the next kernel's misses must write back to HBM first: a
// state no kernel of a decode step sees (weights are read, not written), and
// one whose write-backs slow a memory-bound kernel timed after it (H100: the
// D 64 engine rows past suffix 64 ~10%, bench/RESULTS.md attention session 34).
// CUDA builds only.
#ifndef BANYAN_ATTENTION_TESTING_L2_FLUSH_H_
#define BANYAN_ATTENTION_TESTING_L2_FLUSH_H_

#include <cuda_runtime_api.h>

#include <cstddef>

#include "absl/status/status.h"

namespace banyan::attention::testing {

// Reads `bytes` (a multiple of 16) at device pointer `data`, 16 bytes per
// load, and writes nothing the caller can see (a word of its own, when the
// data happen to XOR to one constant). Asynchronous on `stream`; thread-safe.
[[nodiscard]] absl::Status ReadThroughDevice(const void* data, size_t bytes, cudaStream_t stream);

}  // namespace banyan::attention::testing

#endif  // BANYAN_ATTENTION_TESTING_L2_FLUSH_H_
