// EngineImpl: the one implementation of banyan::Engine (internal; see
// banyan/engine.h for the contract).
//
// Structure
//   * Client threads validate their call under `mu_`, mark the branches they
//     touch busy, queue a Request of Tasks (one Task per branch of the call)
//     and wait for it. Fork, Release, Inspect, SetMetadata and the text
//     methods run on the client thread (the KvTree is internally
//     synchronized; busy branches are refused).
//   * One scheduler thread (scheduler.cc) runs steps. A step gathers the work
//     of every active Task of every caller: one decode row per generating
//     branch (branches at the same tree node share one row), chunks of
//     pending prefills and scores, up to max_batch decode rows and
//     prefill_chunk prefill rows; builds one AttentionPlan through the tree;
//     runs Backend::Forward once; samples, appends and completes.
//
// The KV invariant. Every token the scheduler adds to the tree in a step is
// given a row of that step's forward pass, which writes its K/V (a backend
// writes every row's K/V before any attention of the same layer), so the KV
// of every token in the tree is computed by the end of the step that added
// it, and a later Insert/Append that reuses it reads correct values. Sampled
// tokens are therefore appended at the start of the NEXT step, together with
// their row. Rows that only need logits for a token whose KV exists (the
// first step of a Generate, a token reused from the cache, the scored
// branch's last token) write their K/V into private scratch slots that no
// plan reads, so no slot is ever written twice in one pass. Each branch
// receives at most one Append with new tokens per step (this keeps the tree's
// copy-on-write from copying slots that the same pass has not yet written).
// If a forward pass fails, the K/V of that step's new tokens is missing or
// partly written. The tasks served in that step fail with the backend's error
// and are undone (their branches restored as before the call); every other
// task goes on. The new tokens stay in the tree, held by private forks, and
// the next step first runs a repair pass that recomputes their K/V; while
// that repair fails nothing else runs (each step's tasks fail with its
// error), so no pass ever reads K/V that was not written. Only when the holds
// cannot be made does the engine stop (every later call returns kInternal).
//
// Thread-safety: as Engine. Lock order: mu_, then the tree's lock.
#ifndef BANYAN_SDK_ENGINE_ENGINE_IMPL_H_
#define BANYAN_SDK_ENGINE_ENGINE_IMPL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "attention/attention_plan.h"
#include "banyan/engine.h"
#include "kv_tree/kv_tree.h"
#include "model/chat/chat_format.h"
#include "model/forward.h"
#include "model/ops/thread_pool.h"
#include "model/sampling/sampler.h"
#include "model/sampling/stop_matcher.h"
#include "model/tokenizer/tokenizer.h"
#include "sdk/engine/engine_mutex.h"
#include "sdk/engine/engine_testing.h"

namespace banyan::engine {

struct Request;

// One unit of scheduled work on one branch. Owned by its Request; only the
// scheduler thread touches it between submission and completion.
struct Task {
  enum class Kind { kPrefill, kDecode, kScore };
  Kind kind = Kind::kPrefill;
  Request* request = nullptr;
  int32_t index = 0;       // position in the request (the RNG key for decode)
  uint64_t seq = 0;        // arrival order
  int32_t priority = 0;
  BranchId id;             // invalid for a NewBranch until it completes
  kv_tree::Branch branch;  // invalid for a NewBranch before its first chunk
  kv_tree::KvNamespace ns;  // NewBranch: where to insert
  BranchOptions branch_options;                  // NewBranch: the new record's
  std::map<std::string, std::string> metadata;   // NewBranch: the new record's
  int64_t length = 0;       // tokens of `branch` in the tree
  int64_t start_length = 0;  // restored when the task fails
  bool owns_branch = false;  // NewBranch: release `branch` on failure
  uint64_t last_step = 0;    // last step that served it (round robin)
  bool blocked = false;      // could not get KV pages this step
  bool done = false;
  absl::Status status;

  // kPrefill / kScore: tokens to add, how many are in the tree already.
  std::vector<int32_t> input;
  size_t next = 0;
  int64_t reused = 0;

  // kScore: the temporary child holding the continuation, the scored
  // branch's last token and the result.
  kv_tree::Branch temp;
  int32_t branch_last_token = -1;
  ScoreResult score;

  // kDecode.
  std::optional<model::Sampler> sampler;
  std::optional<model::StopMatcher> stop;
  std::vector<int32_t> history;  // the branch's tokens before generation (penalties)
  int32_t last_token = -1;       // the branch's last token in the tree
  int32_t pending = -1;          // sampled, not yet appended (next step)
  bool finishing = false;        // finished; `pending` still to append
  std::string utf8_hold;         // bytes of an unfinished UTF-8 character
  size_t shown = 0;              // text bytes passed to on_token
  GenerateResult result;
};

// One client call. `finished` is guarded by the engine's mu_.
struct Request {
  std::vector<std::unique_ptr<Task>> tasks;
  GenerateOptions generate;  // kDecode requests
  absl::Time deadline = absl::InfiniteFuture();
  std::shared_ptr<CancelToken> cancel;
  int32_t remaining = 0;  // tasks not done (scheduler thread only)
  bool finished = false;
};

class EngineImpl final : public Engine {
 public:
  static absl::StatusOr<std::unique_ptr<EngineImpl>> Create(EngineParts parts,
                                                            const EngineOptions& options);
  ~EngineImpl() override;

  absl::StatusOr<std::vector<int32_t>> Tokenize(std::string_view text) const override;
  absl::StatusOr<std::string> Detokenize(absl::Span<const int32_t> tokens) const override;
  absl::StatusOr<std::string> ApplyChatTemplate(absl::Span<const ChatMessage> messages,
                                                bool add_generation_prompt) const override;

  absl::StatusOr<BranchId> NewBranch(const Prompt& prompt, const BranchOptions& options) override;
  absl::Status Append(BranchId branch, const Prompt& more) override;
  absl::StatusOr<std::vector<BranchId>> Fork(BranchId branch, int32_t n) override;
  absl::Status Release(BranchId branch) override;
  absl::Status SetMetadata(BranchId branch, std::string_view key, std::string_view value) override;

  absl::StatusOr<GenerateResult> Generate(BranchId branch, const GenerateOptions& options) override;
  std::vector<absl::StatusOr<GenerateResult>> GenerateMany(absl::Span<const BranchId> branches,
                                                           const GenerateOptions& options) override;
  absl::StatusOr<ScoreResult> Score(BranchId branch, const Prompt& continuation) override;

  absl::StatusOr<BranchInfo> Inspect(BranchId branch) const override;
  EngineStats Stats() const override;
  EngineInfo Info() const override;
  absl::Status Save(const std::string& path) const override;
  absl::StatusOr<std::vector<BranchId>> Load(const std::string& path) override;

 private:
  struct BranchRecord {
    kv_tree::Branch branch;
    std::string kv_namespace;
    int32_t priority = 0;
    bool busy = false;
    int64_t tokens_reused = 0;
    std::map<std::string, std::string> metadata;
  };
  // One row of a step: where its token's K/V goes and who consumes its logits.
  struct StepRow {
    int32_t token = 0;
    int32_t position = 0;
    kv_tree::KvSlot write;
  };

  EngineImpl(EngineParts parts, const EngineOptions& options);
  absl::Status Init();

  // --- client side (engine_impl.cc) ---
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const Prompt& prompt) const;
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;
  kv_tree::KvNamespace NamespaceFor(const std::string& kv_namespace) const;
  absl::Status CheckUsable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<BranchRecord*> FindRecord(BranchId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `request` and blocks until the scheduler finishes it.
  void RunRequest(Request* request) ABSL_LOCKS_EXCLUDED(mu_);
  // The shape of every multi-branch call: under mu_ (and when the engine is
  // usable), make(i, result) returns item i's task, or null after setting
  // `result` (an error, or a value that needs no scheduling); the tasks run
  // as `request` (blocking), and finish(task) gives a succeeded task's value.
  template <typename T>
  std::vector<absl::StatusOr<T>> RunTasks(
      Request& request, size_t n, absl::FunctionRef<std::unique_ptr<Task>(size_t, absl::StatusOr<T>&)> make,
      absl::FunctionRef<T(Task&)> finish) ABSL_LOCKS_EXCLUDED(mu_);
  // NewBranch for several prompts at once (one request); used by Load.
  std::vector<absl::StatusOr<BranchId>> NewBranches(
      std::vector<std::vector<int32_t>> prompts, const std::vector<BranchOptions>& options,
      const std::vector<std::map<std::string, std::string>>& metadata);

  // --- scheduler side (scheduler.cc) ---
  void SchedulerLoop();
  // One step over `active` (tasks not done).
  void Step(std::vector<Task*>& active);
  void CollectDecodeRows(std::vector<Task*>& decode);
  void CollectPrefillRows(std::vector<Task*>& prefill);
  void ScoreChunk(Task* task, int64_t* budget);
  absl::Status BuildPlan();
  absl::Status RunForward();
  // Decides device_sampling_ and fills the step's draws (after device_greedy_).
  void PlanDeviceDraws();
  void ConsumeLogits();
  void ConsumeDeviceDraws();
  void AfterSample(Task* task, const model::SampleResult& sample);
  // Ends a task with an error; with `undo`, restores what it changed in the
  // tree (truncates the branch, releases a new or temporary one).
  void FailTask(Task* task, absl::Status status, bool undo);
  void CompleteTask(Task* task);
  // Drops done tasks from `active`; marks finished requests (registering
  // new branches, clearing busy flags) and publishes the step's counters.
  void PublishCompleted(std::vector<Task*>& active) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Recovery from a failed pass (kv_repair.cc).
  // After a failed forward pass: forks a private branch at the end of every
  // step row group whose tokens were added this step (their K/V may be
  // missing), so that undoing the step's tasks cannot let them be evicted
  // unrepaired, and records them in repairs_.
  absl::Status HoldUnwrittenKv();
  // A pass that recomputes the K/V held by repairs_, then releases the holds
  // (the tokens stay cached, now valid). On error the holds stay.
  absl::Status RepairKv();
  // `cause` with "forward pass failed: " before its message (same code).
  static absl::Status ForwardError(const absl::Status& cause);
  bool TakeScratch(kv_tree::KvSlot* slot);

  // Snapshot helpers (snapshot.cc).
  std::string ModelFingerprint() const;

  const EngineOptions options_;
  std::unique_ptr<model::Backend> backend_;
  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::optional<model::ChatFormat> chat_format_;
  const DType kv_dtype_;
  const std::string device_name_;
  std::string model_name_;
  const int cuda_device_;
  model::ModelConfig config_;
  std::vector<int32_t> eos_tokens_;
  std::unique_ptr<kv_tree::KvTree> tree_;
  model::KvCache kv_;
  std::unique_ptr<model::ops::ThreadPool> sample_pool_;
  int threads_ = 1;  // options_.threads resolved (0: all cores)

  mutable EngineMutex mu_;
  // Notified when incoming_ or stopping_ change (the scheduler waits on it)
  // and when requests finish (their callers wait on it).
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  absl::flat_hash_map<uint64_t, BranchRecord> records_ ABSL_GUARDED_BY(mu_);
  uint64_t next_branch_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<Request*> incoming_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);  // set when a forward pass failed
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread scheduler_;
  // Client threads inside RunRequest; the destructor waits for them to leave
  // (they touch nothing of the engine after the decrement).
  std::atomic<int> calls_in_flight_{0};

  // Scheduler-thread state (no lock: only the scheduler thread touches it).
  uint64_t step_ = 0;
  // Tails of branches whose K/V a failed pass left unwritten (HoldUnwrittenKv).
  struct Repair {
    kv_tree::Branch branch;  // private fork; its last `tokens` need K/V
    int32_t tokens = 0;
  };
  std::vector<Repair> repairs_;
  kv_tree::Branch scratch_branch_;
  std::vector<kv_tree::KvSlot> scratch_slots_;
  size_t scratch_used_ = 0;
  std::vector<kv_tree::PrefillRows> spec_;
  std::vector<StepRow> rows_;
  std::vector<int32_t> logit_rows_;
  // Per logits row (in logit_rows_ order), the tasks that consume it and, for
  // a score task, which continuation token it predicts.
  struct Consumer {
    Task* task;
    int32_t predicted = -1;  // kScore: index into task->input
  };
  // Per logits row of the step, the tasks that consume it. Rows keep their
  // vectors (and capacity) from step to step: no allocation per row and step.
  class ConsumerRows {
   public:
    void clear() { size_ = 0; }
    size_t size() const { return size_; }
    std::vector<Consumer>& operator[](size_t i) { return rows_[i]; }
    const std::vector<Consumer>& operator[](size_t i) const { return rows_[i]; }
    // A new row, consumed by `c` so far.
    void push_back(Consumer c) {
      if (size_ == rows_.size()) rows_.emplace_back();
      rows_[size_].clear();
      rows_[size_++].push_back(c);
    }

   private:
    std::vector<std::vector<Consumer>> rows_;  // [0, size_) are this step's
    size_t size_ = 0;
  };
  ConsumerRows consumers_;
  std::vector<Task*> finished_flush_;  // decode tasks whose last token is in this step
  int32_t decode_rows_ = 0;
  std::function<absl::Status()> before_forward_;  // e.g. wait for device page copies
  // Device backends: page-locked memory for `floats` logits (fast copies back).
  std::function<absl::StatusOr<float*>(size_t floats)> pinned_logits_;
  absl::Span<float> logits_view_;  // this step's logits (logits_ or pinned)
  // This step runs Backend::ForwardGreedy (every logits row feeds only plain
  // greedy decodes and the backend has the path): per logits row a token
  // (-1: bad row) and its logprob, and no logits_view_.
  bool device_greedy_ = false;
  std::vector<int32_t> greedy_tokens_;
  std::vector<float> greedy_logprobs_;
  // This step runs Backend::ForwardSample instead (every logits row feeds
  // only decodes whose parameters the device computes, and at least one
  // samples): one draw per decode task, in consumer order, with the uniform
  // its Sampler would draw next (taken from it once the step succeeded).
  bool device_sampling_ = false;
  std::vector<model::sampling::DeviceDraw> device_draws_;
  std::vector<Task*> device_draw_tasks_;
  std::vector<model::sampling::DrawResult> device_results_;
  attention::AttentionPlan plan_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_, positions_, kv_pages_, kv_slots_;
  // What a step did, published into stats_ under mu_ after the step.
  struct StepCounters {
    int64_t generated = 0, prefilled = 0, reused = 0, scored = 0;
    int64_t rows = 0, kv_read = 0, kv_attended = 0;
    bool forward = false, decoded = false;
    double seconds = 0;
  } counters_;
};

}  // namespace banyan::engine

#endif  // BANYAN_SDK_ENGINE_ENGINE_IMPL_H_
