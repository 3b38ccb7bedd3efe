// Hugging Face model directories: config.json (+ generation_config.json) to
// ModelConfig, and model.safetensors or sharded model-*.safetensors (with
// model.safetensors.index.json) to ModelWeights.
//
// Errors: kNotFound when config.json or a weights file is missing;
// kUnimplemented for a model_type other than llama, mistral, qwen2 or an
// unsupported dtype/RoPE scaling; kInvalidArgument for a malformed config,
// a missing tensor or a shape that disagrees with the config; kDataLoss for a
// truncated or corrupt safetensors file or index. Thread-safe (no shared state).
#ifndef BANYAN_MODEL_SAFETENSORS_HF_MODEL_H_
#define BANYAN_MODEL_SAFETENSORS_HF_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace banyan::model {

// Parses config.json text; `generation_config_json` may be empty. Token ids
// given as lists take their first element.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& config_json,
                                          const std::string& generation_config_json);

// Reads <dir>/config.json and <dir>/generation_config.json (optional).
absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& dir);

absl::StatusOr<ModelWeights> LoadHfDirectory(const std::string& dir);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_SAFETENSORS_HF_MODEL_H_
