// The one entry point for loading a model from disk: weights, config,
// tokenizer and chat format, from either
//   - a GGUF file (*.gguf: llama, mistral or qwen2 architecture), or
//   - a Hugging Face directory (config.json, model.safetensors or sharded
//     model-*.safetensors + model.safetensors.index.json, tokenizer.json,
//     tokenizer_config.json, generation_config.json).
//
//   BANYAN_ASSIGN_OR_RETURN(ModelWeights w, LoadModelWeights(path));
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadTokenizer(path));
//   BANYAN_ASSIGN_OR_RETURN(ChatFormat chat, LoadChatFormat(path));
//
// Files are memory-mapped; every offset and size read from them is
// bounds-checked with overflow-safe arithmetic. Weights are dequantized to
// fp32 at load (GGUF: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K;
// safetensors: F32, F16, BF16).
//
// Status codes (following absl/status/status.h):
//   kNotFound          the path (or a file the directory needs) does not exist
//   kDataLoss          a truncated or corrupted file: it ends early, an offset
//                      or size points outside it, a header is not parseable
//   kInvalidArgument   a file that is complete but not a usable model: not a
//                      GGUF/safetensors file at all, a tensor missing, a shape
//                      that disagrees with the config, a bad hyper-parameter
//   kUnimplemented     an unknown architecture, quantization type, dtype,
//                      tokenizer model or chat template (the message names it)
// Thread-safe: no shared state; each call maps its own files.
#ifndef BANYAN_MODEL_LOADER_H_
#define BANYAN_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/chat/chat_format.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::model {

// Config and every tensor (HF names; see model_weights.h).
absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& path);

// The config alone (cheap: no tensor data is read).
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

// The tokenizer: from a .gguf file's vocabulary, a directory's tokenizer.json
// (+ tokenizer_config.json), or a tokenizer.json file itself.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// The chat format from the model's template (GGUF tokenizer.chat_template,
// or tokenizer_config.json's chat_template, or a chat_template.jinja file).
absl::StatusOr<ChatFormat> LoadChatFormat(const std::string& path);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_LOADER_H_
