// `banyan generate`: see generate_command.h.
#include "sdk/cli/generate_command.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "banyan/status_macros.h"
#include "model/chat/chat_format.h"
#include "model/cpu/cpu_backend.h"
#include "model/cpu/forked_branches.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "model/sampling/stop_matcher.h"
#include "model/tokenizer/tokenizer.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"
#include "sdk/gpu/device_info.h"

#if BANYAN_GENERATE_CUDA
#include "model/cuda/cuda_backend.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"
#endif

namespace banyan::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Per-branch decoding state.
struct Branch {
  model::Sampler sampler;
  model::StopMatcher matcher;
  model::StreamDecoder decoder;
  Completion completion;
  bool done = false;
};

// Appends token `t` to branch `b`; marks it done on a stop token, stop text or
// the length limit.
absl::Status Accept(Branch& b, int32_t t, const absl::flat_hash_set<int32_t>& stop_tokens,
                    int32_t max_tokens) {
  if (stop_tokens.contains(t)) {
    b.completion.finish_reason = "stop";
    b.done = true;
    return absl::OkStatus();
  }
  b.completion.tokens.push_back(t);
  BANYAN_ASSIGN_OR_RETURN(const std::string piece, b.decoder.Add(t));
  if (b.matcher.Append(piece)) {
    b.completion.finish_reason = "stop";
    b.done = true;
  } else if (static_cast<int32_t>(b.completion.tokens.size()) >= max_tokens) {
    b.completion.finish_reason = "length";
    b.done = true;
  }
  return absl::OkStatus();
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

// The paged KV pool in the backend's memory: fp32 host memory for the CPU
// backend, bf16 device memory for CUDA.
class KvPool {
 public:
  static absl::StatusOr<KvPool> Create(const model::Backend& backend, const model::ModelConfig& config,
                                       int64_t num_pages, int32_t page_size) {
    KvPool pool;
    const bool device = backend.kv_memory_space() == MemorySpace::kDevice;
    const DType dtype = device ? DType::kBf16 : DType::kF32;
    pool.kv_.layout = model::KvLayoutFor(config, num_pages, page_size, dtype);
    pool.kv_.dtype = dtype;
    if (!device) {
      pool.host_.resize(pool.kv_.layout.TotalBytes());
      pool.kv_.data = pool.host_.data();
      return pool;
    }
#if BANYAN_GENERATE_CUDA
    BANYAN_ASSIGN_OR_RETURN(pool.device_, gpu::DeviceBuffer::Allocate(pool.kv_.layout.TotalBytes()));
    pool.kv_.data = pool.device_.data();
    return pool;
#else
    return absl::UnavailableError("a device KV pool needs a CUDA build");
#endif
  }

  const model::KvCache& kv() const { return kv_; }

  // Copy on write of one page (every layer, K and V).
  absl::Status CopyPage(int32_t src, int32_t dst) {
    if (!host_.empty()) {
      model::CopyKvPage(kv_, src, dst);
      return absl::OkStatus();
    }
#if BANYAN_GENERATE_CUDA
    const attention::KvLayout& l = kv_.layout;
    const size_t bytes = static_cast<size_t>(l.PageElements()) * l.dtype_bytes;
    char* base = static_cast<char*>(kv_.data);
    for (int32_t layer = 0; layer < l.num_layers; ++layer) {
      for (int32_t plane = 0; plane < 2; ++plane) {
        BANYAN_CUDA_RETURN_IF_ERROR(
            cudaMemcpy(base + static_cast<size_t>(l.Offset(layer, plane, dst, 0, 0)) * l.dtype_bytes,
                       base + static_cast<size_t>(l.Offset(layer, plane, src, 0, 0)) * l.dtype_bytes, bytes,
                       cudaMemcpyDeviceToDevice));
      }
    }
    return absl::OkStatus();
#else
    return absl::UnavailableError("a device KV pool needs a CUDA build");
#endif
  }

 private:
  model::KvCache kv_;
  std::vector<char> host_;
#if BANYAN_GENERATE_CUDA
  gpu::DeviceBuffer device_;
#endif
};

absl::StatusOr<std::unique_ptr<model::Backend>> MakeBackend(const GenerateRequest& req,
                                                            std::shared_ptr<const model::ModelWeights> weights) {
  if (req.device == "cpu") return model::CreateCpuBackend(std::move(weights), {.num_threads = req.threads});
#if BANYAN_GENERATE_CUDA
  if (!gpu::HasGpu()) return absl::UnavailableError("--device cuda: no usable GPU on this machine");
  return model::CreateCudaBackend(*weights);
#else
  return absl::UnavailableError("--device cuda: this build has no CUDA backend (configure with BANYAN_CUDA=ON)");
#endif
}

}  // namespace

absl::StatusOr<GenerateResult> Generate(const GenerateRequest& req) {
  if (req.n < 1) return absl::InvalidArgumentError(absl::StrCat("--n must be >= 1, got ", req.n));
  if (req.max_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("--max-tokens must be >= 1"));
  if (req.page_size < 1) return absl::InvalidArgumentError("page size must be >= 1");
  BANYAN_RETURN_IF_ERROR(model::ValidateSamplingParams(req.sampling));
  if (req.device != "cpu" && req.device != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or cuda, got '", req.device, "'"));
  }
#if !BANYAN_GENERATE_CUDA
  if (req.device == "cuda") {
    return absl::UnavailableError("--device cuda: this build has no CUDA backend (configure with BANYAN_CUDA=ON)");
  }
#endif
  std::string path = req.model_path;
  if (path.empty()) {
    BANYAN_ASSIGN_OR_RETURN(path, model::FindDefaultModel());
  }

  GenerateResult result;
  const auto load_start = Clock::now();
  BANYAN_ASSIGN_OR_RETURN(model::ModelWeights loaded, model::LoadModelWeights(path));
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer, model::LoadTokenizer(path));
  std::optional<model::ChatFormat> chat;
  if (!req.raw) {
    absl::StatusOr<model::ChatFormat> format = model::LoadChatFormat(path);
    if (format.ok()) {
      chat = *std::move(format);
    } else if (format.status().code() != absl::StatusCode::kNotFound &&
               format.status().code() != absl::StatusCode::kUnimplemented) {
      return format.status();
    }
  }
  auto weights = std::make_shared<const model::ModelWeights>(std::move(loaded));
  const model::ModelConfig& config = weights->config;
  result.model_name = config.name.empty() ? path : config.name;
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend, MakeBackend(req, weights));
  result.load_seconds = Seconds(load_start);

  // Prompt tokens: the chat template's text (its own BOS included), or the raw
  // text with the tokenizer's default special tokens.
  std::vector<int32_t> prompt;
  if (chat.has_value()) {
    BANYAN_ASSIGN_OR_RETURN(const std::string text, chat->Apply({{"user", req.prompt}}, true));
    BANYAN_ASSIGN_OR_RETURN(prompt, tokenizer->Encode(text, /*add_special_tokens=*/false));
  } else {
    BANYAN_ASSIGN_OR_RETURN(prompt, tokenizer->Encode(req.prompt, /*add_special_tokens=*/true));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  result.prompt_tokens = static_cast<int32_t>(prompt.size());

  absl::flat_hash_set<int32_t> stop_tokens;
  if (config.eos_token_id >= 0) stop_tokens.insert(config.eos_token_id);
  if (tokenizer->eos_id() >= 0) stop_tokens.insert(tokenizer->eos_id());
  if (chat.has_value()) {
    if (auto id = tokenizer->FindToken(chat->end_of_turn()); id.has_value()) stop_tokens.insert(*id);
  }

  // The KV pool: the prompt's pages plus room for every branch.
  const int32_t ps = req.page_size;
  const int64_t prompt_pages = (static_cast<int64_t>(prompt.size()) + ps - 1) / ps;
  const int64_t branch_pages = (ps + int64_t{req.max_tokens} + ps - 1) / ps + 1;
  const int64_t num_pages = prompt_pages + int64_t{req.n} * branch_pages;
  BANYAN_ASSIGN_OR_RETURN(KvPool pool, KvPool::Create(*backend, config, num_pages, ps));
  const model::KvCache& kv = pool.kv();

  model::ForkedBranches tree(ps, num_pages);
  BANYAN_RETURN_IF_ERROR(tree.SetPrompt(prompt));
  std::vector<float> logits(static_cast<size_t>(req.n) * config.vocab_size);
  const auto prefill_start = Clock::now();
  {
    const model::Step step = tree.PrefillStep();
    BANYAN_RETURN_IF_ERROR(backend->Forward(step.batch(), kv, absl::MakeSpan(logits.data(), config.vocab_size)));
  }
  result.prefill_seconds = Seconds(prefill_start);

  BANYAN_ASSIGN_OR_RETURN(const auto copies, tree.Fork(req.n));
  for (const auto& [src, dst] : copies) BANYAN_RETURN_IF_ERROR(pool.CopyPage(src, dst));
  std::vector<Branch> branches;
  branches.reserve(req.n);
  const Rng root(req.seed);
  for (int32_t b = 0; b < req.n; ++b) {
    BANYAN_ASSIGN_OR_RETURN(model::Sampler sampler, model::Sampler::Create(req.sampling, root.Derive(b)));
    BANYAN_ASSIGN_OR_RETURN(model::StopMatcher matcher, model::StopMatcher::Create(req.stop_strings));
    branches.push_back(Branch{std::move(sampler), std::move(matcher), model::StreamDecoder(*tokenizer), {}, false});
  }
  // The first token of every branch comes from the prompt's last logits.
  const absl::Span<const float> first(logits.data(), config.vocab_size);
  for (int32_t b = 0; b < req.n; ++b) {
    Branch& br = branches[b];
    BANYAN_ASSIGN_OR_RETURN(const model::SampleResult s, br.sampler.Sample(first, prompt, br.completion.tokens));
    br.completion.sum_logprob += s.logprob;
    BANYAN_RETURN_IF_ERROR(Accept(br, s.token, stop_tokens, req.max_tokens));
    if (br.done) tree.Finish(b);
  }

  const auto decode_start = Clock::now();
  while (true) {
    const std::vector<int32_t> active = tree.active_branches();
    if (active.empty()) break;
    std::vector<int32_t> next;
    for (int32_t b : active) next.push_back(branches[b].completion.tokens.back());
    BANYAN_ASSIGN_OR_RETURN(const model::Step step, tree.DecodeStep(next));
    BANYAN_RETURN_IF_ERROR(backend->Forward(step.batch(), kv, absl::MakeSpan(logits)));
    ++result.decode_steps;
    for (size_t r = 0; r < active.size(); ++r) {
      Branch& br = branches[active[r]];
      const absl::Span<const float> row(logits.data() + r * config.vocab_size, config.vocab_size);
      BANYAN_ASSIGN_OR_RETURN(const model::SampleResult s, br.sampler.Sample(row, prompt, br.completion.tokens));
      br.completion.sum_logprob += s.logprob;
      ++result.generated_tokens;
      BANYAN_RETURN_IF_ERROR(Accept(br, s.token, stop_tokens, req.max_tokens));
      if (br.done) tree.Finish(active[r]);
    }
  }
  result.decode_seconds = Seconds(decode_start);
  for (Branch& br : branches) {
    if (!br.matcher.stopped()) br.matcher.Append(br.decoder.Flush());
    br.completion.text = br.matcher.text();
    result.completions.push_back(std::move(br.completion));
  }
  return result;
}

absl::Status RunGenerate(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(
      Args args, Args::Parse(argv,
                             {"model", "prompt", "n", "max-tokens", "temperature", "top-p", "top-k", "min-p",
                              "repetition-penalty", "seed", "stop", "device", "threads"},
                             {"json", "raw"}));
  if (!args.Has("prompt")) return absl::InvalidArgumentError("--prompt TEXT is required");
  GenerateRequest req;
  req.model_path = args.GetString("model");
  req.prompt = args.GetString("prompt");
  req.raw = args.GetBool("raw");
  req.device = args.GetString("device", "cpu");
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
  if (args.Has("stop")) req.stop_strings.push_back(args.GetString("stop"));

  BANYAN_ASSIGN_OR_RETURN(const GenerateResult r, Generate(req));
  if (args.GetBool("json")) {
    std::cout << "{\n  \"model\": " << JsonString(r.model_name) << ",\n  \"device\": " << JsonString(req.device)
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
      "%s: prompt %d tokens, prefill %.3f s, %d branches, %d decode steps, %.1f tokens/s (load %.2f s)\n",
      r.model_name, r.prompt_tokens, r.prefill_seconds, req.n, r.decode_steps, r.decode_tokens_per_second(),
      r.load_seconds);
  return absl::OkStatus();
}

}  // namespace banyan::cli
