// Builds a ModelConfig and ModelWeights (HF names, fp32, HF rotate_half RoPE
// layout) from a parsed GGUF file of a llama, mistral or qwen2 model.
//
// Errors: kUnimplemented for another general.architecture or an unsupported
// tensor type (the message names it); kInvalidArgument when a tensor is
// missing or its shape disagrees with the metadata, or a hyper-parameter is
// out of range; kNotFound never (missing keys are kInvalidArgument here, as
// the file is then not a usable model). Thread-safe (pure functions).
#ifndef BANYAN_MODEL_GGUF_GGUF_MODEL_H_
#define BANYAN_MODEL_GGUF_GGUF_MODEL_H_

#include "absl/status/statusor.h"
#include "model/gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace banyan::model {

absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& gguf);

// Dequantizes every tensor; q/k projections of llama-architecture files are
// un-permuted from llama.cpp's interleaved RoPE layout back to HF's.
absl::StatusOr<ModelWeights> GgufModelWeights(const GgufFile& gguf);

// Undoes llama.cpp's convert permutation of a Q or K projection
// ([heads*head_dim, cols], row-major) in place: GGUF row h*D + 2*j + i holds
// HF row h*D + i*D/2 + j. REQUIRES: rows == heads * head_dim, head_dim even.
void UnpermuteRopeRows(int64_t heads, int64_t head_dim, int64_t cols, float* data);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_GGUF_GGUF_MODEL_H_
