// DeviceWeights: a model's weights uploaded to the GPU once, the matrices in
// bf16 (the norm weights and biases in fp32), in the shapes the CUDA
// backend's GEMMs want: the q, k and v
// projections fused into one [(q_heads + 2 kv_heads) * head_dim, hidden]
// matrix (and their biases into one vector), gate and up fused into one
// [2 * intermediate, hidden] matrix. With split weights (Upload's `split`,
// CudaBackendOptions::weights) every matrix also has a lo part of the same
// shape, lo = bf16(w - bf16(w)), in the *_lo buffers (empty otherwise).
// Internal to model/cuda.
//
// Errors from Upload: kNotFound for a missing tensor (named), kInvalidArgument
// for a wrong shape, kResourceExhausted / kUnavailable from the device.
// Move-only; owns its device memory. Thread-compatible.
#ifndef BANYAN_MODEL_CUDA_DEVICE_WEIGHTS_H_
#define BANYAN_MODEL_CUDA_DEVICE_WEIGHTS_H_

#include <cuda_runtime_api.h>

#include <vector>

#include "absl/status/statusor.h"
#include "model/cuda/ops.h"
#include "model/model_weights.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::model::cuda {

struct DeviceLayer {
  gpu::DeviceBuffer input_norm;  // [hidden] fp32
  gpu::DeviceBuffer qkv;         // [(nq + 2 nkv) * head_dim, hidden]
  gpu::DeviceBuffer qkv_bias;    // [(nq + 2 nkv) * head_dim] fp32, empty without bias
  gpu::DeviceBuffer o;           // [hidden, nq * head_dim]
  gpu::DeviceBuffer post_norm;   // [hidden] fp32
  gpu::DeviceBuffer gate_up;     // [2 * intermediate, hidden]
  gpu::DeviceBuffer down;        // [hidden, intermediate]
  // The lo parts of qkv, o, gate_up and down (split weights only).
  gpu::DeviceBuffer qkv_lo, o_lo, gate_up_lo, down_lo;
};

struct DeviceWeights {
  gpu::DeviceBuffer embed;       // [vocab, hidden]
  gpu::DeviceBuffer final_norm;  // [hidden] fp32
  gpu::DeviceBuffer lm_head;     // [vocab, hidden], empty when tied (use embed)
  gpu::DeviceBuffer embed_lo;    // lo parts (split weights only), lm_head_lo
  gpu::DeviceBuffer lm_head_lo;  // empty when tied (use embed_lo)
  std::vector<DeviceLayer> layers;
  std::vector<float> inv_freq;   // host copy of the RoPE table
  gpu::DeviceBuffer inv_freq_device;  // [head_dim / 2] fp32
  size_t bytes = 0;               // device bytes held

  const bf16_bits* lm_head_ptr() const {
    return (lm_head.data() != nullptr ? lm_head : embed).As<const bf16_bits>();
  }
  // nullptr without split weights.
  const bf16_bits* lm_head_lo_ptr() const {
    return (lm_head.data() != nullptr ? lm_head_lo : embed_lo).As<const bf16_bits>();
  }

  // Converts and uploads every tensor model_weights.h names for w.config,
  // with the matrices' lo parts when `split`. Synchronous (returns once the
  // copies are done).
  static absl::StatusOr<DeviceWeights> Upload(const ModelWeights& w, cudaStream_t stream, bool split = false);
};

}  // namespace banyan::model::cuda

#endif  // BANYAN_MODEL_CUDA_DEVICE_WEIGHTS_H_
