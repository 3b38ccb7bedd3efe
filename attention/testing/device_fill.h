// Device-side random fill for benchmarks: large KV pools are filled on the GPU
// (a counter-based hash per element), never with zeros. CUDA builds only.
#ifndef BANYAN_ATTENTION_TESTING_DEVICE_FILL_H_
#define BANYAN_ATTENTION_TESTING_DEVICE_FILL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "sdk/base/tensor_view.h"

namespace banyan::attention::testing {

// Fills `n` elements of `dtype` at device pointer `data` with values uniform
// in [-2, 2) derived from (seed, index). Asynchronous on `stream`.
[[nodiscard]] absl::Status FillUniformDevice(void* data, DType dtype, int64_t n, uint64_t seed, cudaStream_t stream);

}  // namespace banyan::attention::testing

#endif  // BANYAN_ATTENTION_TESTING_DEVICE_FILL_H_
