// File: banyan/engine.h
// -----------------------------------------------------------------------------
// The Banyan engine: one model, one KV prefix tree, one scheduler loop that
// decodes every active branch of every caller in the same batch. This is the
// API agent frameworks, search strategies and the `banyan` tool use.
//
// Example:
//
//   banyan::EngineOptions options;                 // default model, device auto
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<banyan::Engine> engine,
//                           banyan::Engine::Create(options));
//   BANYAN_ASSIGN_OR_RETURN(banyan::BranchId root,
//                           engine->NewBranch(banyan::Prompt::Text("Q: 17*23? A:")));
//   BANYAN_ASSIGN_OR_RETURN(std::vector<banyan::BranchId> samples, engine->Fork(root, 16));
//   banyan::GenerateOptions gen;
//   gen.sampling.temperature = 0.8f;
//   gen.max_tokens = 64;
//   gen.stop_strings = {"\n"};
//   // All 16 samples decode together, sharing the prompt's KV and its attention reads.
//   std::vector<absl::StatusOr<banyan::GenerateResult>> results =
//       engine->GenerateMany(samples, gen);
//   for (banyan::BranchId b : samples) BANYAN_RETURN_IF_ERROR(engine->Release(b));
//   BANYAN_RETURN_IF_ERROR(engine->Release(root));
//
// Branches. A BranchId names one live sequence of tokens (a path from the root
// of the KV tree). Forking is O(1) in KV: the children share the parent's
// pages until they diverge. A released BranchId is stale forever (ids carry a
// generation and are never reused): using it returns kNotFound. The KV of
// released branches stays cached and is reused by later prompts with the same
// prefix, until memory pressure evicts it.
//
// Thread safety: Engine is thread-safe. Any number of client threads may call
// any method concurrently; Generate / GenerateMany / Score block the calling
// thread while the engine's scheduler thread batches their work with every
// other caller's (continuous batching). Two concurrent generations on the SAME
// branch are refused (kFailedPrecondition). Callbacks run on the scheduler
// thread: they must be quick and must not call back into the engine.
//
// Errors (absl::StatusCode), for every method:
//   kNotFound           stale or released BranchId
//   kInvalidArgument    malformed input: empty fork count, bad sampling values,
//                       token ids outside the vocabulary (kOutOfRange), ...
//   kFailedPrecondition the branch is busy generating
//   kResourceExhausted  the KV budget cannot hold the work even after evicting
//                       every cached, unreferenced node; nothing was changed
//   kCancelled          the request's CancelToken fired
//   kDeadlineExceeded   the request's deadline passed
//   kUnavailable        the requested device does not exist
//   (the backend's)     the model's forward pass failed in a step that served
//                       this call; the message starts "forward pass failed:".
//                       Only the calls served in that step fail; the engine
//                       recomputes the K/V that pass left unwritten before it
//                       runs anything else, and keeps serving.
// A failing call leaves the tree and every other branch as they were.
#ifndef BANYAN_ENGINE_H_
#define BANYAN_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace banyan {

// A handle to a live branch. Value type; 0 is never a valid id.
struct BranchId {
  uint64_t value = 0;
  bool valid() const { return value != 0; }
  friend bool operator==(BranchId a, BranchId b) { return a.value == b.value; }
  friend bool operator!=(BranchId a, BranchId b) { return a.value != b.value; }
  template <typename H>
  friend H AbslHashValue(H h, BranchId id) { return H::combine(std::move(h), id.value); }
};

struct EngineOptions {
  // A .gguf file or a Hugging Face model directory; empty: the default model
  // (model/default_model.h; `scripts/setup.sh` fetches it).
  std::string model_path;
  // "auto" (the first GPU when there is one, else the CPU), "cpu", "cuda",
  // or "cuda:N".
  std::string device = "auto";
  // Bytes of KV cache (all layers, K and V). 0: a default that fits the device
  // (a quarter of free GPU memory, or 1 GiB on the CPU).
  uint64_t kv_budget_bytes = 0;
  int32_t page_size = 16;       // tokens per KV page
  int32_t max_batch = 256;      // most query rows in one forward pass
  int32_t prefill_chunk = 512;  // most prefill tokens mixed into one step
  int32_t threads = 0;          // CPU worker threads; 0: all cores

  // How attention reads the KV of shared prefixes; for benchmarks and
  // cross-checks (the text is the same in kTree and kPerSequence):
  //   kTree         each tree node's KV is read once per step for every
  //                 branch below it (Hydragen-style; the default)
  //   kPerSequence  every branch reads its whole path on its own (classic
  //                 paged decode): the baseline tree attention is measured
  //                 against
  //   kNone         attention over the context is skipped (each row sees only
  //                 its own token): a throughput ceiling; the text is NOT the
  //                 model's
  enum class AttentionMode { kTree, kPerSequence, kNone };
  AttentionMode attention_mode = AttentionMode::kTree;

  // Where sampled decodes draw their tokens when the backend can sample where
  // its logits are (the CUDA backend): true = there (12 bytes per branch and
  // step come back instead of a vocabulary-sized logits row, and no host
  // thread walks the row), false = on the host Sampler. Branches with
  // repetition, frequency or presence penalties always sample on the host.
  // A seed gives the same text again either way, but the two places walk the
  // kept tokens in different orders (model/sampling/device_draw.h), so not
  // the same text as each other.
  bool device_sampling = true;

  // Arithmetic of the CUDA backend (the CPU backend is fp32 either way):
  //   kFast  bf16 weights and GEMM inputs, fp32 accumulation (the default)
  //   kHigh  weights and GEMM inputs each carried as a bf16 hi + lo pair
  //          (~16 significant bits): closer to fp32 (the default model's
  //          top-1 agreement with the CPU 99.3% instead of 98.6%) for twice
  //          the weight memory and ~1.4-1.7x the decode step
  //          (model/cuda/cuda_backend.h, bench/RESULTS.md "CUDA high precision")
  enum class Precision { kFast, kHigh };
  Precision precision = Precision::kFast;
};

// Text or token ids; text is tokenized with the model's tokenizer (no BOS is
// added implicitly: add it with the chat template or explicitly).
struct Prompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_text = true;
  static Prompt Text(std::string t) { return Prompt{std::move(t), {}, true}; }
  static Prompt Tokens(std::vector<int32_t> ids) { return Prompt{{}, std::move(ids), false}; }
};

// One chat message for ApplyChatTemplate.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct BranchOptions {
  // Prefix sharing is scoped by namespace (e.g. an adapter name): prompts in
  // different namespaces never share KV.
  std::string kv_namespace;
  int32_t priority = 0;  // higher first when the batch is full
};

// Fired from the scheduler thread; return false to stop the request early
// (it then finishes with FinishReason::kCallback).
struct StreamCallbacks {
  // One generated token: id, the text it completes (may be empty while a
  // UTF-8 sequence is incomplete) and its log-probability.
  std::function<bool(BranchId, int32_t token, std::string_view text_delta, float logprob)> on_token;
};

// Shared between a caller and the engine; Cancel() from any thread.
class CancelToken {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

struct SamplingOptions {
  float temperature = 1.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Per-branch seed: the branch's RNG is derived from (seed, branch position
  // in the request), so the same seed gives the same text again.
  uint64_t seed = 0;
};

struct GenerateOptions {
  SamplingOptions sampling;
  int32_t max_tokens = 128;
  std::vector<std::string> stop_strings;  // the match is not included in the text
  std::vector<int32_t> stop_tokens;       // in addition to the model's EOS
  bool ignore_eos = false;
  int32_t priority = 0;
  absl::Time deadline = absl::InfiniteFuture();
  std::shared_ptr<CancelToken> cancel;  // optional
  StreamCallbacks callbacks;            // optional
};

enum class FinishReason { kLength, kStop, kEos, kCallback };

struct GenerateResult {
  BranchId branch;
  std::vector<int32_t> tokens;   // generated tokens (appended to the branch)
  // Their text, stop string removed: the bytes the tokenizer decodes, so not
  // always valid UTF-8 (a request that ends inside a character, byte-fallback
  // tokens that form none); replace such bytes before writing JSON or proto3
  // strings (Banyan's own traces and CLI output use U+FFFD).
  std::string text;
  std::vector<float> logprobs;   // one per token
  FinishReason finish = FinishReason::kLength;
};

struct ScoreResult {
  double logprob = 0;                  // sum over the continuation's tokens
  std::vector<float> token_logprobs;   // one per continuation token
  int32_t tokens = 0;
};

struct BranchInfo {
  BranchId id;
  std::vector<int32_t> tokens;  // the whole sequence from the root
  std::string text;             // its text
  int32_t depth = 0;            // nodes on its path (root excluded)
  std::vector<uint64_t> node_ids;  // KV tree nodes on its path, root first
  int64_t tokens_reused = 0;    // prompt tokens whose KV came from the cache
  std::string kv_namespace;     // BranchOptions::kv_namespace it was created with
  int32_t priority = 0;         // BranchOptions::priority
  // Caller's key/value annotations (SetMetadata); saved and loaded with the
  // branch and copied to its forks.
  std::map<std::string, std::string> metadata;
};

struct EngineStats {
  std::string device;           // "cpu" or the GPU's name
  std::string model;            // the model's name (from its config, else its path)
  int64_t live_branches = 0;
  int64_t tree_nodes = 0;
  int64_t kv_pages_used = 0;
  int64_t kv_pages_total = 0;
  int64_t tokens_generated = 0;
  int64_t tokens_prefilled = 0;
  int64_t tokens_reused = 0;    // prompt tokens served from cached KV
  int64_t decode_steps = 0;
  double decode_seconds = 0;    // time inside forward passes that decoded
  int64_t tokens_forked = 0;    // tokens shared, not copied, by Fork (n x length)
  int64_t tokens_scored = 0;    // continuation tokens evaluated by Score
  int64_t forward_passes = 0;   // every step (decode, prefill or mixed)
  double forward_seconds = 0;   // time inside every forward pass
  int64_t max_rows_in_step = 0;  // most query rows in one forward pass
  // KV tokens attention read (each shared node once per step) and KV tokens
  // it attended (summed over rows): their ratio is the sharing factor.
  int64_t kv_tokens_read = 0;
  int64_t kv_tokens_attended = 0;
  int64_t evicted_nodes = 0;    // cached tree nodes evicted under pressure
};

// What an engine runs on and with; fixed when it is created (Engine::Info).
struct EngineInfo {
  std::string device;        // "cpu" or "cuda:N (GPU name)"
  std::string backend;       // the model backend's name ("cpu", "cuda", ...)
  std::string model;         // the model's name (from its config, else its path)
  std::string architecture;  // "llama", "qwen2", "mistral"
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t vocab_size = 0;
  int32_t max_position = 0;
  int64_t parameters = 0;     // weights of the transformer (embeddings included)
  std::string chat_format;    // "llama3", "chatml", "smollm3", "mistral"; empty: none
  std::vector<int32_t> stop_tokens;  // EOS and end-of-turn ids that end a generation
  // The KV pool: dtype ("f32", "bf16"), tokens per page, pages (a few are the
  // engine's scratch), bytes, and what one token costs (all layers, K and V).
  std::string kv_dtype;
  int32_t page_size = 0;
  int64_t kv_pages = 0;
  int64_t kv_tokens = 0;       // kv_pages * page_size
  int64_t kv_bytes = 0;
  int64_t kv_bytes_per_token = 0;
  int32_t max_batch = 0;       // EngineOptions, as used
  int32_t prefill_chunk = 0;
  int32_t threads = 0;         // CPU threads for sampling (and a CPU backend)
  std::string attention_mode;  // "tree", "per-sequence", "none"
};

class Engine {
 public:
  // Loads the model, sizes the KV pool and starts the scheduler thread. On
  // failure returns the loader's or the device's error (kNotFound for a
  // missing model file, kUnavailable for a missing device, ...).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);

  // Stops the scheduler: pending requests finish with kCancelled.
  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // --- Text -------------------------------------------------------------------
  virtual absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text) const = 0;
  virtual absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> tokens) const = 0;
  // The model's chat format (Llama 3, ChatML, Mistral) applied to `messages`.
  virtual absl::StatusOr<std::string> ApplyChatTemplate(absl::Span<const ChatMessage> messages,
                                                        bool add_generation_prompt) const = 0;

  // --- Branches ---------------------------------------------------------------
  // A new branch holding `prompt`, prefilled before return (blocking; batched
  // with other work). Cached KV of an identical prefix is reused
  // (BranchInfo::tokens_reused says how much).
  virtual absl::StatusOr<BranchId> NewBranch(const Prompt& prompt,
                                             const BranchOptions& options = {}) = 0;
  // Appends text or tokens to the branch and prefills them (blocking).
  // REQUIRES: the branch is not generating.
  virtual absl::Status Append(BranchId branch, const Prompt& more) = 0;
  // n new branches, each a copy of `branch` sharing its KV. n >= 1. The
  // original stays live.
  virtual absl::StatusOr<std::vector<BranchId>> Fork(BranchId branch, int32_t n) = 0;
  // Drops the branch; its KV stays cached for reuse until evicted. A second
  // Release of the same id returns kNotFound.
  virtual absl::Status Release(BranchId branch) = 0;
  // Sets (or, with an empty value, erases) one metadata entry of the branch
  // (BranchInfo::metadata). Allowed while the branch generates.
  // Errors: kNotFound (stale id), kInvalidArgument (empty key).
  virtual absl::Status SetMetadata(BranchId branch, std::string_view key,
                                   std::string_view value) = 0;

  // --- Decoding ---------------------------------------------------------------
  // Samples up to max_tokens tokens onto the branch (blocking).
  virtual absl::StatusOr<GenerateResult> Generate(BranchId branch,
                                                  const GenerateOptions& options) = 0;
  // Generates on every branch at once (all in the same decode steps); one
  // result per branch, in order. Branch i's RNG is derived from (seed, i).
  virtual std::vector<absl::StatusOr<GenerateResult>> GenerateMany(
      absl::Span<const BranchId> branches, const GenerateOptions& options) = 0;
  // Log-likelihood of `continuation` after the branch's tokens, without
  // changing the branch (its KV is computed in a temporary child and cached).
  virtual absl::StatusOr<ScoreResult> Score(BranchId branch, const Prompt& continuation) = 0;

  // --- Inspection and persistence ------------------------------------------------
  virtual absl::StatusOr<BranchInfo> Inspect(BranchId branch) const = 0;
  virtual EngineStats Stats() const = 0;
  // The device, model and KV pool the engine runs on (never fails).
  virtual EngineInfo Info() const = 0;
  // Writes every live branch's tokens and metadata (protobuf, versioned)
  // atomically: a temporary file renamed over `path`; a failed save leaves an
  // existing file untouched.
  virtual absl::Status Save(const std::string& path) const = 0;
  // Recreates the saved branches (recomputing their KV) and returns their new
  // ids in the saved order. kDataLoss for a corrupt file, kInvalidArgument for
  // a snapshot of another model.
  virtual absl::StatusOr<std::vector<BranchId>> Load(const std::string& path) = 0;

 protected:
  Engine() = default;
};

}  // namespace banyan

#endif  // BANYAN_ENGINE_H_
