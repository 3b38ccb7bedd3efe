// EngineImpl, client side: validation, branch records, requests. The
// scheduler loop is in scheduler.cc, Save/Load in snapshot.cc.
#include "sdk/engine/engine_impl.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "sdk/base/rng.h"

namespace banyan::engine {
namespace {

uint64_t NodeKey(kv_tree::NodeId id) { return (uint64_t{id.index} << 32) | id.generation; }

std::string BranchName(BranchId id) { return absl::StrCat("branch ", id.value); }

// kFailedPrecondition while a generate or score call holds the branch.
absl::Status CheckIdle(BranchId id, bool busy) {
  return busy ? absl::FailedPreconditionError(absl::StrCat(BranchName(id), " is busy")) : absl::OkStatus();
}

}  // namespace

// ----------------------------------------------------------------- text

absl::Status EngineImpl::CheckTokens(absl::Span<const int32_t> tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      return absl::OutOfRangeError(absl::StrCat("token id ", tokens[i], " at index ", i,
                                                " is outside the vocabulary [0, ",
                                                config_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> EngineImpl::Tokenize(std::string_view text) const {
  return tokenizer_->Encode(text, /*add_special_tokens=*/false);
}

absl::StatusOr<std::string> EngineImpl::Detokenize(absl::Span<const int32_t> tokens) const {
  BANYAN_RETURN_IF_ERROR(CheckTokens(tokens));
  return tokenizer_->Decode(tokens);
}

absl::StatusOr<std::string> EngineImpl::ApplyChatTemplate(absl::Span<const ChatMessage> messages,
                                                          bool add_generation_prompt) const {
  if (!chat_format_.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", model_name_, " has no chat template"));
  }
  std::vector<model::ChatMessage> converted;
  converted.reserve(messages.size());
  for (const ChatMessage& m : messages) converted.push_back({m.role, m.content});
  return chat_format_->Apply(converted, add_generation_prompt);
}

absl::StatusOr<std::vector<int32_t>> EngineImpl::PromptTokens(const Prompt& prompt) const {
  std::vector<int32_t> tokens;
  if (prompt.is_text) {
    BANYAN_ASSIGN_OR_RETURN(tokens, Tokenize(prompt.text));
  } else {
    tokens = prompt.tokens;
  }
  BANYAN_RETURN_IF_ERROR(CheckTokens(tokens));
  return tokens;
}

kv_tree::KvNamespace EngineImpl::NamespaceFor(const std::string& kv_namespace) const {
  return kv_tree::KvNamespace{model_name_, kv_namespace};
}

// ----------------------------------------------------------------- records

absl::Status EngineImpl::CheckUsable() const {
  if (!broken_.ok()) {
    return absl::InternalError(absl::StrCat("the engine stopped after a failed forward pass: ",
                                            broken_.ToString()));
  }
  if (stopping_) return absl::CancelledError("the engine is shutting down");
  return absl::OkStatus();
}

absl::StatusOr<EngineImpl::BranchRecord*> EngineImpl::FindRecord(BranchId id) {
  auto it = records_.find(id.value);
  if (!id.valid() || it == records_.end()) {
    return absl::NotFoundError(absl::StrCat(BranchName(id), " does not exist (released or never created)"));
  }
  return &it->second;
}

void EngineImpl::RunRequest(Request* request) {
  calls_in_flight_.fetch_add(1);
  {
    EngineLock lock(&mu_);
    const absl::Status usable = CheckUsable();
    if (!usable.ok()) {
      for (auto& task : request->tasks) {
        task->status = usable;
        if (task->id.valid()) {
          if (auto it = records_.find(task->id.value); it != records_.end()) it->second.busy = false;
        }
      }
    } else {
      for (auto& task : request->tasks) {
        task->seq = next_seq_++;
        task->request = request;
      }
      request->remaining = static_cast<int32_t>(request->tasks.size());
      incoming_.push_back(request);
      work_cv_.notify_one();
      mu_.Wait(done_cv_, [request] { return request->finished; });
    }
  }
  calls_in_flight_.fetch_sub(1);
}

template <typename T>
std::vector<absl::StatusOr<T>> EngineImpl::RunTasks(
    Request& request, size_t n,
    absl::FunctionRef<std::unique_ptr<Task>(size_t, absl::StatusOr<T>&)> make,
    absl::FunctionRef<T(Task&)> finish) {
  std::vector<absl::StatusOr<T>> out(n, absl::UnknownError("not run"));
  std::vector<Task*> task_of(n, nullptr);
  {
    EngineLock lock(&mu_);
    const absl::Status usable = CheckUsable();
    for (size_t i = 0; i < n; ++i) {
      if (!usable.ok()) {
        out[i] = usable;
        continue;
      }
      std::unique_ptr<Task> task = make(i, out[i]);
      if (task == nullptr) continue;
      task_of[i] = task.get();
      request.tasks.push_back(std::move(task));
    }
  }
  if (request.tasks.empty()) return out;
  RunRequest(&request);
  for (size_t i = 0; i < n; ++i) {
    if (task_of[i] == nullptr) continue;
    Task& task = *task_of[i];
    if (task.status.ok()) {
      out[i] = finish(task);
    } else {
      out[i] = task.status;
    }
  }
  return out;
}

// ----------------------------------------------------------------- branches

absl::StatusOr<BranchId> EngineImpl::NewBranch(const Prompt& prompt, const BranchOptions& options) {
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, PromptTokens(prompt));
  std::vector<std::vector<int32_t>> prompts;
  prompts.push_back(std::move(tokens));
  std::vector<absl::StatusOr<BranchId>> ids = NewBranches(std::move(prompts), {options}, {{}});
  return std::move(ids[0]);
}

std::vector<absl::StatusOr<BranchId>> EngineImpl::NewBranches(
    std::vector<std::vector<int32_t>> prompts, const std::vector<BranchOptions>& options,
    const std::vector<std::map<std::string, std::string>>& metadata) {
  Request request;
  return RunTasks<BranchId>(
      request, prompts.size(),
      [&](size_t i, absl::StatusOr<BranchId>& result) -> std::unique_ptr<Task> {
        mu_.AssertHeld();
        const kv_tree::KvNamespace ns = NamespaceFor(options[i].kv_namespace);
        if (prompts[i].empty()) {
          // A branch at the namespace root: nothing to compute.
          absl::StatusOr<kv_tree::Extension> ext = tree_->Insert(ns, {});
          if (!ext.ok()) {
            result = ext.status();
            return nullptr;
          }
          const BranchId id{next_branch_id_++};
          BranchRecord& r = records_[id.value];
          r.branch = ext->branch;
          r.kv_namespace = options[i].kv_namespace;
          r.priority = options[i].priority;
          r.metadata = metadata[i];
          ++stats_.live_branches;
          result = id;
          return nullptr;
        }
        auto task = std::make_unique<Task>();
        task->kind = Task::Kind::kPrefill;
        task->index = static_cast<int32_t>(request.tasks.size());
        task->priority = options[i].priority;
        task->ns = ns;
        task->owns_branch = true;
        task->branch_options = options[i];
        task->metadata = metadata[i];
        task->input = std::move(prompts[i]);
        return task;
      },
      [](Task& task) { return task.id; });
}

absl::Status EngineImpl::Append(BranchId branch, const Prompt& more) {
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, PromptTokens(more));
  Request request;
  {
    EngineLock lock(&mu_);
    BANYAN_RETURN_IF_ERROR(CheckUsable());
    BANYAN_ASSIGN_OR_RETURN(BranchRecord * record, FindRecord(branch));
    BANYAN_RETURN_IF_ERROR(CheckIdle(branch, record->busy));
    if (tokens.empty()) return absl::OkStatus();
    BANYAN_ASSIGN_OR_RETURN(int64_t length, tree_->Length(record->branch));
    auto task = std::make_unique<Task>();
    task->kind = Task::Kind::kPrefill;
    task->id = branch;
    task->branch = record->branch;
    task->priority = record->priority;
    task->length = task->start_length = length;
    task->input = std::move(tokens);
    record->busy = true;
    request.tasks.push_back(std::move(task));
  }
  RunRequest(&request);
  return request.tasks[0]->status;
}

absl::StatusOr<std::vector<BranchId>> EngineImpl::Fork(BranchId branch, int32_t n) {
  EngineLock lock(&mu_);
  BANYAN_RETURN_IF_ERROR(CheckUsable());
  BANYAN_ASSIGN_OR_RETURN(BranchRecord * record, FindRecord(branch));
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("fork count ", n, " must be >= 1"));
  BANYAN_RETURN_IF_ERROR(CheckIdle(branch, record->busy));
  BANYAN_ASSIGN_OR_RETURN(int64_t length, tree_->Length(record->branch));
  BANYAN_ASSIGN_OR_RETURN(std::vector<kv_tree::Branch> copies, tree_->Fork(record->branch, n));
  const BranchRecord parent = *record;  // records_ may rehash below
  std::vector<BranchId> ids;
  ids.reserve(copies.size());
  for (kv_tree::Branch b : copies) {
    const BranchId id{next_branch_id_++};
    BranchRecord& r = records_[id.value];
    r.branch = b;
    r.kv_namespace = parent.kv_namespace;
    r.priority = parent.priority;
    r.metadata = parent.metadata;
    r.tokens_reused = length;
    ids.push_back(id);
  }
  stats_.live_branches += n;
  stats_.tokens_forked += int64_t{n} * length;
  return ids;
}

absl::Status EngineImpl::Release(BranchId branch) {
  EngineLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(BranchRecord * record, FindRecord(branch));
  BANYAN_RETURN_IF_ERROR(CheckIdle(branch, record->busy));
  BANYAN_RETURN_IF_ERROR(tree_->Release(record->branch));
  records_.erase(branch.value);
  --stats_.live_branches;
  return absl::OkStatus();
}

absl::Status EngineImpl::SetMetadata(BranchId branch, std::string_view key, std::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("metadata key must not be empty");
  EngineLock lock(&mu_);
  BANYAN_ASSIGN_OR_RETURN(BranchRecord * record, FindRecord(branch));
  if (value.empty()) {
    record->metadata.erase(std::string(key));
  } else {
    record->metadata[std::string(key)] = std::string(value);
  }
  return absl::OkStatus();
}

// ----------------------------------------------------------------- decoding

absl::StatusOr<GenerateResult> EngineImpl::Generate(BranchId branch, const GenerateOptions& options) {
  std::vector<absl::StatusOr<GenerateResult>> results = GenerateMany({branch}, options);
  return std::move(results[0]);
}

std::vector<absl::StatusOr<GenerateResult>> EngineImpl::GenerateMany(
    absl::Span<const BranchId> branches, const GenerateOptions& options) {
  std::vector<absl::StatusOr<GenerateResult>> out(branches.size(), absl::UnknownError("not run"));
  // Options first: a bad option fails every branch alike.
  model::SamplingParams params;
  params.temperature = options.sampling.temperature;
  params.top_k = options.sampling.top_k;
  params.top_p = options.sampling.top_p;
  params.min_p = options.sampling.min_p;
  params.repetition_penalty = options.sampling.repetition_penalty;
  params.frequency_penalty = options.sampling.frequency_penalty;
  params.presence_penalty = options.sampling.presence_penalty;
  absl::Status bad = model::ValidateSamplingParams(params);
  if (bad.ok() && options.max_tokens < 0) {
    bad = absl::InvalidArgumentError(absl::StrCat("max_tokens ", options.max_tokens, " < 0"));
  }
  if (bad.ok()) bad = CheckTokens(options.stop_tokens);
  absl::StatusOr<model::StopMatcher> stop = model::StopMatcher::Create(options.stop_strings);
  if (bad.ok() && !stop.ok()) bad = stop.status();
  if (!bad.ok()) {
    for (auto& r : out) r = bad;
    return out;
  }
  Request request;
  request.generate = options;
  request.deadline = options.deadline;
  request.cancel = options.cancel;
  const bool penalties = params.repetition_penalty != 1.0f;
  return RunTasks<GenerateResult>(
      request, branches.size(),
      [&](size_t i, absl::StatusOr<GenerateResult>& result) -> std::unique_ptr<Task> {
        mu_.AssertHeld();
        absl::StatusOr<BranchRecord*> record = FindRecord(branches[i]);
        if (!record.ok()) {
          result = record.status();
          return nullptr;
        }
        if (absl::Status idle = CheckIdle(branches[i], (*record)->busy); !idle.ok()) {
          result = std::move(idle);
          return nullptr;
        }
        absl::StatusOr<int64_t> length = tree_->Length((*record)->branch);
        if (!length.ok()) {
          result = length.status();
          return nullptr;
        }
        if (*length == 0) {
          result = absl::FailedPreconditionError(absl::StrCat(
              BranchName(branches[i]), " has no tokens to continue: append a prompt first"));
          return nullptr;
        }
        if (options.max_tokens == 0) {
          GenerateResult empty;
          empty.branch = branches[i];
          result = std::move(empty);
          return nullptr;
        }
        absl::StatusOr<model::Sampler> sampler =
            model::Sampler::Create(params, Rng(options.sampling.seed).Derive(static_cast<uint64_t>(i)));
        if (!sampler.ok()) {
          result = sampler.status();
          return nullptr;
        }
        auto task = std::make_unique<Task>();
        if (penalties) {
          absl::StatusOr<std::vector<int32_t>> history = tree_->Tokens((*record)->branch);
          if (!history.ok()) {
            result = history.status();
            return nullptr;
          }
          task->history = std::move(*history);
        }
        task->kind = Task::Kind::kDecode;
        task->index = static_cast<int32_t>(i);
        task->id = branches[i];
        task->branch = (*record)->branch;
        task->priority = std::max(options.priority, (*record)->priority);
        task->length = task->start_length = *length;
        task->sampler.emplace(std::move(*sampler));
        task->stop.emplace(*stop);
        task->result.branch = branches[i];
        (*record)->busy = true;
        return task;
      },
      [](Task& task) { return std::move(task.result); });
}

absl::StatusOr<ScoreResult> EngineImpl::Score(BranchId branch, const Prompt& continuation) {
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, PromptTokens(continuation));
  Request request;
  {
    EngineLock lock(&mu_);
    BANYAN_RETURN_IF_ERROR(CheckUsable());
    BANYAN_ASSIGN_OR_RETURN(BranchRecord * record, FindRecord(branch));
    BANYAN_RETURN_IF_ERROR(CheckIdle(branch, record->busy));
    BANYAN_ASSIGN_OR_RETURN(int64_t length, tree_->Length(record->branch));
    if (tokens.empty()) return ScoreResult{};
    if (length == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          BranchName(branch), " has no tokens: nothing to condition the first token on"));
    }
    auto task = std::make_unique<Task>();
    task->kind = Task::Kind::kScore;
    task->id = branch;
    task->branch = record->branch;
    task->priority = record->priority;
    task->length = task->start_length = length;
    task->input = std::move(tokens);
    task->score.token_logprobs.resize(task->input.size());
    task->score.tokens = static_cast<int32_t>(task->input.size());
    record->busy = true;
    request.tasks.push_back(std::move(task));
  }
  RunRequest(&request);
  Task& task = *request.tasks[0];
  if (!task.status.ok()) return task.status;
  return std::move(task.score);
}

// ----------------------------------------------------------------- inspection

absl::StatusOr<BranchInfo> EngineImpl::Inspect(BranchId branch) const {
  kv_tree::Branch handle;
  BranchInfo info;
  {
    EngineLock lock(&mu_);
    auto it = records_.find(branch.value);
    if (!branch.valid() || it == records_.end()) {
      return absl::NotFoundError(absl::StrCat(BranchName(branch), " does not exist (released or never created)"));
    }
    handle = it->second.branch;
    info.tokens_reused = it->second.tokens_reused;
    info.kv_namespace = it->second.kv_namespace;
    info.priority = it->second.priority;
    info.metadata = it->second.metadata;
    // Read the tree under mu_ so that a concurrent Release cannot make the
    // handle stale between the lookup and the reads.
    BANYAN_ASSIGN_OR_RETURN(info.tokens, tree_->Tokens(handle));
    BANYAN_ASSIGN_OR_RETURN(kv_tree::NodeId node, tree_->NodeOf(handle));
    std::vector<uint64_t> path;
    while (node.valid()) {
      BANYAN_ASSIGN_OR_RETURN(kv_tree::NodeInfo n, tree_->GetNode(node));
      if (!n.parent.valid()) break;  // the namespace root is not listed
      path.push_back(NodeKey(node));
      node = n.parent;
    }
    info.node_ids.assign(path.rbegin(), path.rend());
  }
  info.id = branch;
  info.depth = static_cast<int32_t>(info.node_ids.size());
  absl::StatusOr<std::string> text = tokenizer_->Decode(info.tokens);
  if (text.ok()) info.text = std::move(*text);
  return info;
}

EngineStats EngineImpl::Stats() const {
  EngineStats s;
  {
    EngineLock lock(&mu_);
    s = stats_;
  }
  const kv_tree::KvTreeStats t = tree_->Stats();
  s.device = device_name_;
  s.model = model_name_;
  s.tree_nodes = t.nodes;
  s.kv_pages_total = t.pages_total;
  s.kv_pages_used = t.pages_total - t.pages_free;
  s.evicted_nodes = t.evicted_nodes;
  return s;
}

EngineInfo EngineImpl::Info() const {
  const model::ModelConfig& c = config_;
  EngineInfo info;
  info.device = device_name_;
  info.backend = std::string(backend_->name());
  info.model = model_name_;
  switch (c.architecture) {
    case model::Architecture::kLlama: info.architecture = "llama"; break;
    case model::Architecture::kQwen2: info.architecture = "qwen2"; break;
    case model::Architecture::kMistral: info.architecture = "mistral"; break;
  }
  info.num_layers = c.num_layers;
  info.hidden_size = c.hidden_size;
  info.num_q_heads = c.num_q_heads;
  info.num_kv_heads = c.num_kv_heads;
  info.head_dim = c.head_dim;
  info.vocab_size = c.vocab_size;
  info.max_position = c.max_position;
  const int64_t h = c.hidden_size, q = int64_t{c.num_q_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, embed = int64_t{c.vocab_size} * h;
  const int64_t per_layer = h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size + 2 * h +
                            (c.attention_bias ? q + 2 * kv : 0);
  info.parameters = embed + per_layer * c.num_layers + h + (c.tie_word_embeddings ? 0 : embed);
  if (chat_format_.has_value()) {
    switch (chat_format_->kind()) {
      case model::ChatFormat::Kind::kLlama3: info.chat_format = "llama3"; break;
      case model::ChatFormat::Kind::kChatMl: info.chat_format = "chatml"; break;
      case model::ChatFormat::Kind::kSmolLm3: info.chat_format = "smollm3"; break;
      case model::ChatFormat::Kind::kMistral: info.chat_format = "mistral"; break;
    }
  }
  info.stop_tokens = eos_tokens_;
  info.kv_dtype = std::string(DTypeName(kv_dtype_));
  info.page_size = options_.page_size;
  info.kv_pages = kv_.layout.num_pages;
  info.kv_tokens = kv_.layout.num_pages * options_.page_size;
  info.kv_bytes = static_cast<int64_t>(kv_.layout.TotalBytes());
  info.kv_bytes_per_token = static_cast<int64_t>(kv_.layout.BytesPerPage()) / options_.page_size;
  info.max_batch = options_.max_batch;
  info.prefill_chunk = options_.prefill_chunk;
  info.threads = threads_;
  switch (options_.attention_mode) {
    case EngineOptions::AttentionMode::kTree: info.attention_mode = "tree"; break;
    case EngineOptions::AttentionMode::kPerSequence: info.attention_mode = "per-sequence"; break;
    case EngineOptions::AttentionMode::kNone: info.attention_mode = "none"; break;
  }
  return info;
}

}  // namespace banyan::engine
