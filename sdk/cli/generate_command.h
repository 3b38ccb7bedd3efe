// `banyan generate`: through the Engine (banyan/engine.h): prefill a prompt
// once, fork it into N branches that share its KV in the engine's prefix
// tree, and decode all N together in the engine's batched steps.
// Generate() is the library form the command and its test use.
//
//   banyan generate --model PATH --prompt TEXT [--n N] [--max-tokens M]
//       [--temperature T] [--top-p P] [--top-k K] [--min-p P]
//       [--repetition-penalty R] [--seed S] [--stop TEXT] [--device auto|cpu|cuda|cuda:N]
//       [--threads T] [--precision fast|high] [--raw] [--json] [--quiet]
//
// Without --model the default model (model/default_model.h) is used; --device
// defaults to auto (the first GPU when there is one, else the CPU). With a
// chat template (model/chat) the prompt becomes one user turn with the
// generation prompt, unless --raw. A branch stops at the model's EOS or
// end-of-turn token, at --stop text (cut before it), or after --max-tokens.
// --precision high: the CUDA backend's hi + lo bf16 arithmetic
// (EngineOptions::Precision). Progress goes to stderr (load, prefill, decode
// every second) unless --quiet.
// Errors: kInvalidArgument for bad flags; the loaders' codes for the model;
// kUnavailable for --device cuda in a build or on a machine without CUDA.
#ifndef BANYAN_SDK_CLI_GENERATE_COMMAND_H_
#define BANYAN_SDK_CLI_GENERATE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "banyan/engine.h"
#include "model/sampling/sampler.h"

namespace banyan::cli {

struct GenerateRequest {
  std::string model_path;  // empty: the default model
  std::string prompt;
  bool raw = false;  // skip the chat template
  int32_t n = 1;
  int32_t max_tokens = 64;
  model::SamplingParams sampling;
  uint64_t seed = 0;
  std::vector<std::string> stop_strings;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  EngineOptions::Precision precision = EngineOptions::Precision::kFast;
  int threads = 0;  // <= 0: hardware concurrency
  int32_t page_size = 16;
  // Progress on stderr: model load, prefill, and every second of decoding
  // (tokens so far, tokens/s). The command sets it unless --quiet.
  bool progress = false;
};

struct Completion {
  std::string text;
  std::vector<int32_t> tokens;  // generated ids (without the stop token)
  std::string finish_reason;    // "stop" or "length"
  double sum_logprob = 0.0;     // of the sampled tokens, processed distribution
};

struct GenerateResult {
  std::string model_name;
  std::string device;  // where the engine ran: "cpu" or "cuda:N (GPU name)"
  int32_t prompt_tokens = 0;
  std::vector<Completion> completions;
  double load_seconds = 0, prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_steps = 0;
  int64_t generated_tokens = 0;  // all branches, including stop tokens
  double decode_tokens_per_second() const {
    return decode_seconds > 0 ? static_cast<double>(generated_tokens) / decode_seconds : 0.0;
  }
};

[[nodiscard]] absl::StatusOr<GenerateResult> Generate(const GenerateRequest& request);

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_GENERATE_COMMAND_H_
