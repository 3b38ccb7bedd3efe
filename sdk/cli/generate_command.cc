// `banyan generate`: see generate_command.h. Runs through the Engine
// (banyan/engine.h): the prompt is prefilled once, forked into N branches that
// share its KV, and all N decode together in the engine's batched steps.
#include "sdk/cli/generate_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "banyan/engine.h"
#include "banyan/status_macros.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/cli/json_text.h"

namespace banyan::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

absl::StatusOr<GenerateResult> Generate(const GenerateRequest& req) {
  if (req.n < 1) return absl::InvalidArgumentError(absl::StrCat("--n must be >= 1, got ", req.n));
  if (req.max_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("--max-tokens must be >= 1"));
  if (req.page_size < 1) return absl::InvalidArgumentError("page size must be >= 1");
  BANYAN_RETURN_IF_ERROR(model::ValidateSamplingParams(req.sampling));
  GenerateResult result;
  const auto load_start = Clock::now();
  EngineOptions options;
  options.model_path = req.model_path;
  options.device = req.device;
  options.precision = req.precision;
  options.page_size = req.page_size;
  options.threads = req.threads;
  options.max_batch = std::max(req.n, 1);
  if (req.progress) {
    std::cerr << "[generate] loading " << (req.model_path.empty() ? "the default model" : req.model_path)
              << " (device " << req.device << ")..." << std::flush;
  }
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(options));
  result.load_seconds = Seconds(load_start);
  result.device = engine->Info().device;
  if (req.progress) {
    std::cerr << absl::StrFormat(" %.2f s, on %s\n", result.load_seconds, result.device);
  }

  // With a chat template the prompt is one user turn plus the generation
  // prompt; otherwise (or with --raw) the text as it is.
  std::string text = req.prompt;
  if (!req.raw) {
    absl::StatusOr<std::string> chat = engine->ApplyChatTemplate({{"user", req.prompt}}, true);
    if (chat.ok()) {
      text = *std::move(chat);
    } else if (!absl::IsFailedPrecondition(chat.status())) {
      return chat.status();
    }
  }
  BANYAN_ASSIGN_OR_RETURN(const std::vector<int32_t> prompt, engine->Tokenize(text));
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  result.prompt_tokens = static_cast<int32_t>(prompt.size());
  result.model_name = engine->Stats().model;

  const auto prefill_start = Clock::now();
  BANYAN_ASSIGN_OR_RETURN(const BranchId root, engine->NewBranch(Prompt::Tokens(prompt)));
  result.prefill_seconds = Seconds(prefill_start);
  if (req.progress) {
    std::cerr << absl::StrFormat("[generate] prompt: %d tokens prefilled in %.2f s; decoding %d x %d tokens\n",
                                 prompt.size(), result.prefill_seconds, req.n, req.max_tokens);
  }
  BANYAN_ASSIGN_OR_RETURN(const std::vector<BranchId> branches, engine->Fork(root, req.n));

  GenerateOptions gen;
  gen.sampling.temperature = req.sampling.temperature;
  gen.sampling.top_k = req.sampling.top_k;
  gen.sampling.top_p = req.sampling.top_p;
  gen.sampling.min_p = req.sampling.min_p;
  gen.sampling.repetition_penalty = req.sampling.repetition_penalty;
  gen.sampling.frequency_penalty = req.sampling.frequency_penalty;
  gen.sampling.presence_penalty = req.sampling.presence_penalty;
  gen.sampling.seed = req.seed;
  gen.max_tokens = req.max_tokens;
  gen.stop_strings = req.stop_strings;
  // Progress on stderr for long runs (the callback runs on the engine's thread).
  const absl::Time start = absl::Now();
  absl::Time last = start;
  int64_t streamed = 0;
  const int64_t expected = int64_t{req.n} * req.max_tokens;
  const bool progress = req.progress;
  gen.callbacks.on_token = [&](BranchId, int32_t, std::string_view, float) {
    ++streamed;
    const absl::Time now = absl::Now();
    if (progress && now - last > absl::Seconds(1)) {
      last = now;
      const double seconds = absl::ToDoubleSeconds(now - start);
      std::cerr << absl::StrFormat("\r[generate] %d / %d tokens, %.1f tokens/s, %.1f s", streamed, expected,
                                   streamed / seconds, seconds)
                << std::flush;
    }
    return true;
  };
  const EngineStats before = engine->Stats();
  std::vector<absl::StatusOr<banyan::GenerateResult>> generated = engine->GenerateMany(branches, gen);
  if (last != start) std::cerr << "\n";
  const EngineStats after = engine->Stats();
  result.decode_seconds = after.decode_seconds - before.decode_seconds;
  result.decode_steps = after.decode_steps - before.decode_steps;
  result.generated_tokens = after.tokens_generated - before.tokens_generated;
  for (auto& g : generated) {
    if (!g.ok()) return g.status();
    Completion c;
    c.text = g->text;
    c.tokens = g->tokens;
    // An EOS / end-of-turn token ends the branch but is not part of the completion.
    if (g->finish == FinishReason::kEos && !c.tokens.empty()) c.tokens.pop_back();
    c.finish_reason = g->finish == FinishReason::kLength ? "length" : "stop";
    for (float lp : g->logprobs) c.sum_logprob += lp;
    result.completions.push_back(std::move(c));
  }
  return result;
}

absl::Status RunGenerate(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(
      Args args, ParseFlags("generate", argv));
  if (!args.Has("prompt")) return absl::InvalidArgumentError("--prompt TEXT is required");
  GenerateRequest req;
  req.model_path = args.GetString("model");
  req.prompt = args.GetString("prompt");
  req.raw = args.GetBool("raw");
  req.progress = !args.GetBool("quiet");
  req.device = args.GetString("device", "auto");
  const std::string precision = args.GetString("precision", "fast");
  if (precision == "high") {
    req.precision = EngineOptions::Precision::kHigh;
  } else if (precision != "fast") {
    return absl::InvalidArgumentError(absl::StrCat("--precision must be fast or high, got \"", precision, "\""));
  }
  BANYAN_ASSIGN_OR_RETURN(const int64_t n, args.GetInt("n", 1));
  BANYAN_ASSIGN_OR_RETURN(const int64_t max_tokens, args.GetInt("max-tokens", 64));
  BANYAN_ASSIGN_OR_RETURN(const int64_t top_k, args.GetInt("top-k", 0));
  BANYAN_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 0));
  BANYAN_ASSIGN_OR_RETURN(const int64_t threads, args.GetInt("threads", 0));
  BANYAN_ASSIGN_OR_RETURN(const double temperature, args.GetDouble("temperature", 0.7));
  BANYAN_ASSIGN_OR_RETURN(const double top_p, args.GetDouble("top-p", 0.95));
  BANYAN_ASSIGN_OR_RETURN(const double min_p, args.GetDouble("min-p", 0.0));
  BANYAN_ASSIGN_OR_RETURN(const double repetition, args.GetDouble("repetition-penalty", 1.0));
  if (n < 1 || n > 4096) return absl::InvalidArgumentError(absl::StrCat("--n must be in [1, 4096], got ", n));
  if (max_tokens < 1 || max_tokens > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens must be in [1, 2^20], got ", max_tokens));
  }
  if (top_k < 0 || top_k > (int64_t{1} << 30)) return absl::InvalidArgumentError("--top-k out of range");
  req.n = static_cast<int32_t>(n);
  req.max_tokens = static_cast<int32_t>(max_tokens);
  req.seed = static_cast<uint64_t>(seed);
  req.threads = static_cast<int>(std::clamp<int64_t>(threads, 0, 1024));
  req.sampling.temperature = static_cast<float>(temperature);
  req.sampling.top_p = static_cast<float>(top_p);
  req.sampling.top_k = static_cast<int32_t>(top_k);
  req.sampling.min_p = static_cast<float>(min_p);
  req.sampling.repetition_penalty = static_cast<float>(repetition);
  req.stop_strings = args.GetAll("stop");

  BANYAN_ASSIGN_OR_RETURN(const GenerateResult r, Generate(req));
  if (args.GetBool("json")) {
    std::cout << "{\n  \"model\": " << JsonString(r.model_name) << ",\n  \"device\": " << JsonString(r.device)
              << ",\n  \"prompt_tokens\": " << r.prompt_tokens << ",\n  \"completions\": [";
    for (size_t i = 0; i < r.completions.size(); ++i) {
      const Completion& c = r.completions[i];
      std::cout << (i ? "," : "") << "\n    {\"index\": " << i << ", \"text\": " << JsonString(c.text)
                << ", \"finish_reason\": " << JsonString(c.finish_reason) << ", \"sum_logprob\": "
                << absl::StrFormat("%.6g", c.sum_logprob) << ", \"tokens\": [";
      for (size_t t = 0; t < c.tokens.size(); ++t) std::cout << (t ? ", " : "") << c.tokens[t];
      std::cout << "]}";
    }
    std::cout << "\n  ],\n"
              << absl::StrFormat(
                     "  \"load_seconds\": %.4f,\n  \"prefill_seconds\": %.4f,\n  \"decode_seconds\": %.4f,\n"
                     "  \"decode_steps\": %d,\n  \"decode_tokens\": %d,\n  \"decode_tokens_per_second\": %.2f\n}\n",
                     r.load_seconds, r.prefill_seconds, r.decode_seconds, r.decode_steps, r.generated_tokens,
                     r.decode_tokens_per_second());
    return absl::OkStatus();
  }
  for (size_t i = 0; i < r.completions.size(); ++i) {
    const Completion& c = r.completions[i];
    std::cout << "--- completion " << i << " (" << c.tokens.size() << " tokens, finish: " << c.finish_reason
              << ") ---\n"
              << c.text << "\n";
  }
  std::cerr << absl::StrFormat(
      "%s on %s: prompt %d tokens, prefill %.3f s, %d branches, %d decode steps, %.1f tokens/s (load %.2f s)\n",
      r.model_name, r.device, r.prompt_tokens, r.prefill_seconds, req.n, r.decode_steps, r.decode_tokens_per_second(),
      r.load_seconds);
  return absl::OkStatus();
}

}  // namespace banyan::cli
