// EngineImpl, scheduler side: the one loop that batches every caller's work
// into each forward pass. See engine_impl.h for the KV invariant it keeps.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "banyan/status_macros.h"
#include "model/sampling/sampler.h"
#include "sdk/base/logging.h"
#include "sdk/engine/engine_impl.h"

namespace banyan::engine {
namespace {

uint64_t NodeKey(kv_tree::NodeId id) { return (uint64_t{id.index} << 32) | id.generation; }

// Round robin inside a priority: the task served longest ago first, then the
// oldest request.
bool ServeFirst(const Task* a, const Task* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->last_step != b->last_step) return a->last_step < b->last_step;
  return a->seq < b->seq;
}

bool Contains(absl::Span<const int32_t> list, int32_t token) {
  return std::find(list.begin(), list.end(), token) != list.end();
}

// Greedy without penalties: the same token for every branch on a logits row
// (model::SampleGreedy's result), so a row is sampled once.
bool IsPlainGreedy(const model::SamplingParams& p) {
  return p.temperature == 0.0f && p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f &&
         p.presence_penalty == 0.0f;
}

}  // namespace

void EngineImpl::SchedulerLoop() {
  std::vector<Task*> active;
  while (true) {
    {
      EngineLock lock(&mu_);
      if (active.empty()) {
        mu_.Wait(work_cv_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {  // runs under mu_
          return stopping_ || !incoming_.empty();
        });
      }
      for (Request* r : incoming_) {
        for (auto& t : r->tasks) active.push_back(t.get());
      }
      incoming_.clear();
      if (stopping_ || !broken_.ok()) {
        const absl::Status why = stopping_ ? absl::CancelledError("the engine is shutting down")
                                           : absl::InternalError(broken_.ToString());
        for (Task* t : active) FailTask(t, why, /*undo=*/broken_.ok());
        PublishCompleted(active);
        if (stopping_) return;
        continue;
      }
    }
    Step(active);
    EngineLock lock(&mu_);
    PublishCompleted(active);
  }
}

bool EngineImpl::TakeScratch(kv_tree::KvSlot* slot) {
  if (scratch_used_ >= scratch_slots_.size()) return false;
  *slot = scratch_slots_[scratch_used_++];
  return true;
}

void EngineImpl::Step(std::vector<Task*>& active) {
  ++step_;
  scratch_used_ = 0;
  spec_.clear();
  rows_.clear();
  logit_rows_.clear();
  consumers_.clear();
  finished_flush_.clear();
  counters_ = StepCounters{};
  decode_rows_ = 0;

  // Cancellation and deadlines, honoured before anything of this step runs.
  const absl::Time now = absl::Now();
  std::vector<Task*> decode, prefill;
  for (Task* t : active) {
    if (t->done) continue;
    const Request& r = *t->request;
    if (!t->finishing) {
      if (r.cancel != nullptr && r.cancel->cancelled()) {
        FailTask(t, absl::CancelledError("the request was cancelled"), true);
        continue;
      }
      if (now >= r.deadline) {
        FailTask(t, absl::DeadlineExceededError("the request's deadline passed"), true);
        continue;
      }
    }
    t->blocked = false;
    (t->kind == Task::Kind::kDecode ? decode : prefill).push_back(t);
  }
  if (!repairs_.empty()) {
    // Tokens of a failed pass are in the tree without their K/V: nothing may
    // run (it could reuse them) until a pass recomputes them.
    const absl::Status repaired = RepairKv();
    if (!repaired.ok()) {
      BANYAN_LOG(ERROR) << "engine: repairing the KV of a failed forward pass failed: " << repaired;
      for (Task* t : active) FailTask(t, ForwardError(repaired), true);
      return;
    }
  }
  CollectDecodeRows(decode);
  CollectPrefillRows(prefill);

  if (!rows_.empty()) {
    const absl::Status run = RunForward();
    if (!run.ok()) {
      // The K/V of this step's new tokens may be missing or partly written
      // (engine_impl.h): the step's tasks fail and are undone, and the tokens
      // are held for repair before the next pass.
      BANYAN_LOG(ERROR) << "engine: forward pass failed: " << run;
      counters_ = StepCounters{};
      const absl::Status held = HoldUnwrittenKv();
      if (!held.ok()) {
        // Last resort: without a hold the unwritten K/V could be reused.
        BANYAN_LOG(ERROR) << "engine: cannot hold the failed pass's tokens, stopping: " << held;
        EngineLock lock(&mu_);
        broken_ = run;
        for (Task* t : active) FailTask(t, ForwardError(run), false);
        return;
      }
      const absl::Status why = ForwardError(run);
      for (Task* t : active) {
        if (!t->done && t->last_step == step_) FailTask(t, why, true);
      }
      return;
    }
    ConsumeLogits();
  }
  for (Task* t : finished_flush_) CompleteTask(t);
  bool blocked = false;
  for (Task* t : active) {
    if (t->done) continue;
    if ((t->kind != Task::Kind::kDecode) && t->next == t->input.size() && !t->blocked) {
      CompleteTask(t);
    }
    blocked |= t->blocked;
  }
  if (rows_.empty() && blocked) {
    // Nothing could run and nothing will free pages by itself: the work that
    // is waiting for KV pages fails (its branches are restored).
    for (Task* t : active) {
      if (!t->done && t->blocked) {
        const kv_tree::KvTreeStats s = tree_->Stats();
        FailTask(t, absl::ResourceExhaustedError(absl::StrCat(
                        "KV budget exhausted: no free page among ", s.pages_total,
                        " even after evicting every cached node; release branches or raise "
                        "kv_budget_bytes")),
                 true);
      }
    }
  }
}

void EngineImpl::CollectDecodeRows(std::vector<Task*>& decode) {
  // Usually in order already: when every task was served last step, the
  // order is the requests' (a check is O(n); a sort of 1,024 tasks cost
  // ~29 us per step, each comparison two Task loads).
  if (!std::is_sorted(decode.begin(), decode.end(), ServeFirst)) std::sort(decode.begin(), decode.end(), ServeFirst);
  absl::flat_hash_map<uint64_t, int32_t> node_row;  // node -> logits row
  node_row.reserve(decode.size());
  for (Task* t : decode) {
    if (decode_rows_ >= options_.max_batch) break;
    bool fresh = false;
    kv_tree::KvSlot slot;
    kv_tree::NodeId appended_to;  // the branch's node after this step's append (none: not yet looked up)
    if (t->pending >= 0) {
      absl::StatusOr<kv_tree::Extension> ext = tree_->Append(t->branch, {t->pending});
      if (!ext.ok()) {
        if (absl::IsResourceExhausted(ext.status())) {
          t->blocked = true;
        } else {
          FailTask(t, ext.status(), true);
        }
        continue;
      }
      ++t->length;
      t->last_token = t->pending;
      t->pending = -1;
      appended_to = ext->node;
      if (!ext->write_slots.empty()) {
        fresh = true;
        slot = ext->write_slots[0];
      }
      if (t->finishing) {
        // The last sampled token: its K/V is written, no logits are needed.
        t->last_step = step_;
        if (fresh) {
          spec_.push_back({t->branch, 1});
          rows_.push_back({t->last_token, static_cast<int32_t>(t->length - 1), slot});
          ++decode_rows_;
          finished_flush_.push_back(t);
        } else {
          CompleteTask(t);
        }
        continue;
      }
    }
    absl::StatusOr<kv_tree::NodeId> node = appended_to.valid() ? appended_to : tree_->NodeOf(t->branch);
    if (!node.ok()) {
      FailTask(t, node.status(), true);
      continue;
    }
    const uint64_t key = NodeKey(*node);
    if (t->last_token < 0) {  // KvTree::LastToken copies nothing: no per-step cache by node
      absl::StatusOr<int32_t> last = tree_->LastToken(t->branch);
      if (!last.ok()) {
        FailTask(t, last.status(), true);
        continue;
      }
      t->last_token = *last;
    }
    if (!fresh) {
      // Branches at the same node have the same sequence: one row serves all.
      if (auto it = node_row.find(key); it != node_row.end()) {
        consumers_[it->second].push_back({t});
        t->last_step = step_;
        continue;
      }
      if (!TakeScratch(&slot)) continue;  // waits for the next step
    }
    spec_.push_back({t->branch, 1});
    rows_.push_back({t->last_token, static_cast<int32_t>(t->length - 1), slot});
    logit_rows_.push_back(static_cast<int32_t>(rows_.size() - 1));
    consumers_.push_back({t});
    node_row[key] = static_cast<int32_t>(consumers_.size() - 1);
    ++decode_rows_;
    t->last_step = step_;
  }
}

void EngineImpl::CollectPrefillRows(std::vector<Task*>& prefill) {
  std::sort(prefill.begin(), prefill.end(), ServeFirst);
  int64_t budget = options_.prefill_chunk;
  for (Task* t : prefill) {
    if (budget <= 0) break;
    if (t->kind == Task::Kind::kScore) {
      ScoreChunk(t, &budget);
      continue;
    }
    // Chunks whose KV is all cached cost nothing: keep going until one has
    // new tokens (at most one Append with new tokens per branch per step).
    while (t->next < t->input.size()) {
      const int64_t c = std::min<int64_t>(static_cast<int64_t>(t->input.size() - t->next), budget);
      const absl::Span<const int32_t> chunk = absl::MakeConstSpan(t->input).subspan(t->next, c);
      absl::StatusOr<kv_tree::Extension> ext =
          t->branch.valid() ? tree_->Append(t->branch, chunk) : tree_->Insert(t->ns, chunk);
      if (!ext.ok()) {
        if (absl::IsResourceExhausted(ext.status())) {
          t->blocked = true;
        } else {
          FailTask(t, ext.status(), true);
        }
        break;
      }
      if (!t->branch.valid()) t->branch = ext->branch;
      t->next += c;
      t->length += c;
      t->reused += ext->reused_tokens;
      counters_.reused += ext->reused_tokens;
      t->last_step = step_;
      const int64_t fresh = static_cast<int64_t>(ext->write_slots.size());
      if (fresh == 0) continue;
      spec_.push_back({t->branch, static_cast<int32_t>(fresh)});
      for (int64_t j = 0; j < fresh; ++j) {
        rows_.push_back({chunk[c - fresh + j], static_cast<int32_t>(t->length - fresh + j),
                         ext->write_slots[j]});
      }
      budget -= fresh;
      counters_.prefilled += fresh;
      break;
    }
  }
}

void EngineImpl::ScoreChunk(Task* t, int64_t* budget) {
  const int64_t first = t->next == 0 ? 1 : 0;  // the scored branch's last token
  const int64_t n = static_cast<int64_t>(t->input.size());
  // At least one continuation token per step (the first chunk may overdraw
  // the budget by the scored branch's own last token).
  const int64_t c = std::min<int64_t>(n - static_cast<int64_t>(t->next), std::max<int64_t>(1, *budget - first));
  if (c <= 0 || scratch_slots_.size() - scratch_used_ < static_cast<size_t>(first + c)) return;
  if (first == 1 && t->branch_last_token < 0) {
    absl::StatusOr<int32_t> last = tree_->LastToken(t->branch);
    if (!last.ok()) {
      FailTask(t, last.status(), true);
      return;
    }
    t->branch_last_token = *last;
  }
  if (!t->temp.valid()) {
    absl::StatusOr<kv_tree::Branch> temp = tree_->Fork(t->branch);
    if (!temp.ok()) {
      FailTask(t, temp.status(), true);
      return;
    }
    t->temp = *temp;
  }
  const absl::Span<const int32_t> chunk = absl::MakeConstSpan(t->input).subspan(t->next, c);
  absl::StatusOr<kv_tree::Extension> ext = tree_->Append(t->temp, chunk);
  if (!ext.ok()) {
    if (absl::IsResourceExhausted(ext.status())) {
      t->blocked = true;
    } else {
      FailTask(t, ext.status(), true);
    }
    return;
  }
  const int64_t start = static_cast<int64_t>(t->next);
  const int64_t reused = ext->reused_tokens;
  spec_.push_back({t->temp, static_cast<int32_t>(first + c)});
  for (int64_t r = 0; r < first + c; ++r) {
    const int64_t ti = start + r - first;  // -1: the branch's last token
    kv_tree::KvSlot slot;
    if (ti < start + reused) {
      TakeScratch(&slot);  // KV exists: the row only computes logits
    } else {
      slot = ext->write_slots[ti - start - reused];
    }
    const int32_t token = ti < 0 ? t->branch_last_token : t->input[ti];
    rows_.push_back({token, static_cast<int32_t>(t->length - first + r), slot});
    if (ti + 1 < n) {
      logit_rows_.push_back(static_cast<int32_t>(rows_.size() - 1));
      consumers_.push_back({t, static_cast<int32_t>(ti + 1)});
    }
  }
  t->next += c;
  t->length += c;
  t->last_step = step_;
  *budget -= first + c;
  counters_.scored += c;
  counters_.prefilled += c - reused;
  counters_.reused += reused;
}

absl::Status EngineImpl::BuildPlan() {
  if (options_.attention_mode == EngineOptions::AttentionMode::kNone) {
    // Each row attends only its own token (the ceiling without attention).
    plan_.Clear();
    plan_.page_size = tree_->page_size();
    plan_.num_queries = static_cast<int32_t>(rows_.size());
    for (size_t r = 0; r < rows_.size(); ++r) {
      plan_.page_indices.push_back(rows_[r].write.page);
      plan_.segment_page_indptr.push_back(static_cast<int32_t>(plan_.page_indices.size()));
      plan_.segment_first_slot.push_back(rows_[r].write.slot);
      plan_.segment_length.push_back(1);
      plan_.entry_query.push_back(static_cast<int32_t>(r));
      plan_.entry_kv_limit.push_back(1);
      plan_.segment_entry_indptr.push_back(static_cast<int32_t>(r + 1));
    }
    attention::FillQueryEntries(plan_);
    return absl::OkStatus();
  }
  kv_tree::PlanOptions plan_options;
  if (options_.attention_mode == EngineOptions::AttentionMode::kPerSequence) {
    plan_options.flatten = [](const kv_tree::NodeShareInfo&) { return true; };
  }
  return tree_->BuildPrefillPlan(spec_, plan_options, &plan_);
}

absl::Status EngineImpl::RunForward() {
  BANYAN_RETURN_IF_ERROR(BuildPlan());
  if (plan_.num_queries != static_cast<int32_t>(rows_.size())) {
    return absl::InternalError(absl::StrCat("plan has ", plan_.num_queries, " rows, step has ",
                                            rows_.size()));
  }
  const size_t n = rows_.size();
  tokens_.resize(n);
  positions_.resize(n);
  kv_pages_.resize(n);
  kv_slots_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    tokens_[r] = rows_[r].token;
    positions_[r] = rows_[r].position;
    kv_pages_[r] = rows_[r].write.page;
    kv_slots_[r] = rows_[r].write.slot;
  }
  // A step whose every logits row feeds only plain greedy decodes runs the
  // backend's greedy path when it has one: a token and a logprob per row
  // instead of the row (no logits copy, no host pass over the vocabulary).
  device_greedy_ = backend_->supports_greedy() && !logit_rows_.empty();
  for (size_t i = 0; device_greedy_ && i < consumers_.size(); ++i) {
    for (const Consumer& c : consumers_[i]) {
      if (c.task->done) continue;
      if (c.task->kind != Task::Kind::kDecode || !IsPlainGreedy(c.task->sampler->params())) device_greedy_ = false;
    }
  }
  PlanDeviceDraws();
  const size_t floats = logit_rows_.size() * static_cast<size_t>(config_.vocab_size);
  if (device_greedy_) {
    greedy_tokens_.resize(logit_rows_.size());
    greedy_logprobs_.resize(logit_rows_.size());
  }
  if (device_greedy_ || device_sampling_) {
    logits_view_ = {};  // the logits stay on the device
  } else if (pinned_logits_) {
    BANYAN_ASSIGN_OR_RETURN(float* pinned, pinned_logits_(floats));
    logits_view_ = absl::MakeSpan(pinned, floats);
  } else {
    logits_.resize(floats);
    logits_view_ = absl::MakeSpan(logits_);
  }
  model::ForwardBatch batch;
  batch.tokens = tokens_;
  batch.positions = positions_;
  batch.kv_pages = kv_pages_;
  batch.kv_slots = kv_slots_;
  batch.plan = &plan_;
  batch.logit_rows = logit_rows_;
  if (before_forward_) BANYAN_RETURN_IF_ERROR(before_forward_());
  const absl::Time start = absl::Now();
  if (device_greedy_) {
    BANYAN_RETURN_IF_ERROR(
        backend_->ForwardGreedy(batch, kv_, absl::MakeSpan(greedy_tokens_), absl::MakeSpan(greedy_logprobs_)));
  } else if (device_sampling_) {
    BANYAN_RETURN_IF_ERROR(backend_->ForwardSample(batch, kv_, device_draws_, absl::MakeSpan(device_results_)));
  } else {
    BANYAN_RETURN_IF_ERROR(backend_->Forward(batch, kv_, logits_view_));
  }

  counters_.forward = true;
  counters_.decoded = decode_rows_ > 0;
  counters_.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  counters_.rows = static_cast<int64_t>(n);
  for (int32_t len : plan_.segment_length) counters_.kv_read += len;
  for (int32_t lim : plan_.entry_kv_limit) counters_.kv_attended += lim;
  return absl::OkStatus();
}

void EngineImpl::PlanDeviceDraws() {
  device_sampling_ = false;
  device_draws_.clear();
  device_draw_tasks_.clear();
  if (device_greedy_ || logit_rows_.empty() || !options_.device_sampling || !backend_->supports_sampling()) return;
  for (size_t i = 0; i < consumers_.size(); ++i) {
    for (const Consumer& c : consumers_[i]) {
      if (c.task->done) continue;
      if (c.task->kind != Task::Kind::kDecode || !model::sampling::DeviceSamplable(c.task->sampler->params())) {
        device_draws_.clear();
        device_draw_tasks_.clear();
        return;
      }
      const model::SamplingParams& p = c.task->sampler->params();
      const double uniform = p.temperature == 0.0f ? 0.0 : c.task->sampler->PeekUniform();
      device_draws_.push_back(model::sampling::MakeDeviceDraw(static_cast<int32_t>(i), p, uniform));
      device_draw_tasks_.push_back(c.task);
    }
  }
  device_sampling_ = true;
  device_results_.resize(device_draws_.size());
}

void EngineImpl::ConsumeDeviceDraws() {
  for (size_t k = 0; k < device_draw_tasks_.size(); ++k) {
    Task* t = device_draw_tasks_[k];
    if (t->done) continue;
    const model::sampling::DrawResult& r = device_results_[k];
    if (r.token < 0) {
      FailTask(t, absl::InvalidArgumentError("sampling: a logits row with a NaN, +inf or no finite value"), true);
      continue;
    }
    if (device_draws_[k].temperature != 0.0f) t->sampler->SkipUniform();  // the draw the device used
    model::SampleResult sample;
    sample.token = r.token;
    sample.logprob = r.logprob;
    sample.raw_logprob = r.raw_logprob;
    AfterSample(t, sample);
  }
}

void EngineImpl::ConsumeLogits() {
  if (device_sampling_) {
    ConsumeDeviceDraws();
    return;
  }
  const size_t vocab = static_cast<size_t>(config_.vocab_size);
  // Sampling is the heavy part with many branches: run it in parallel; the
  // rest (text, stop strings, callbacks) runs here, on the scheduler thread.
  struct Draw {
    Task* task;
    size_t row;
    absl::StatusOr<model::SampleResult> result = absl::UnknownError("not sampled");
  };
  std::vector<Draw> draws;
  // Greedy rows without penalties (the Sampler's greedy result exactly:
  // first maximum, log-probability under the raw logits) are computed once
  // per logits row, however many branches share it.
  std::vector<size_t> greedy_rows;
  std::vector<std::pair<Task*, size_t>> greedy_draws;
  for (size_t i = 0; i < consumers_.size(); ++i) {
    double log_z = 0;
    bool have_z = false;
    bool row_is_greedy = false;
    for (const Consumer& c : consumers_[i]) {
      if (c.task->done) continue;
      if (c.task->kind == Task::Kind::kDecode) {
        const model::SamplingParams& p = c.task->sampler->params();
        if (IsPlainGreedy(p)) {
          if (!row_is_greedy) greedy_rows.push_back(i);
          row_is_greedy = true;
          greedy_draws.push_back({c.task, greedy_rows.size() - 1});
        } else {
          draws.push_back({c.task, i});
        }
        continue;
      }
      // Score rows exist only in steps with the logits on the host.
      const absl::Span<const float> row = absl::Span<const float>(logits_view_).subspan(i * vocab, vocab);
      if (!have_z) {
        // NaN/+inf rows give a non-finite lp below and fail the task there.
        log_z = model::LogSumExp(row).value_or(std::numeric_limits<double>::quiet_NaN());
        have_z = true;
      }
      const double lp = static_cast<double>(row[c.task->input[c.predicted]]) - log_z;
      c.task->score.token_logprobs[c.predicted] = static_cast<float>(lp);
      if (!std::isfinite(lp)) {
        FailTask(c.task, absl::InternalError("the model's logits are not finite"), true);
      }
    }
  }
  sample_pool_->ParallelFor(static_cast<int64_t>(draws.size()), 8, [&](int64_t begin, int64_t end) {
    for (int64_t d = begin; d < end; ++d) {
      Draw& draw = draws[d];
      Task* t = draw.task;
      draw.result = t->sampler->Sample(absl::Span<const float>(logits_view_).subspan(draw.row * vocab, vocab),
                                       t->history, t->result.tokens);
    }
  });
  std::vector<absl::StatusOr<model::SampleResult>> greedy(greedy_rows.size(), absl::UnknownError("not sampled"));
  if (device_greedy_) {
    for (size_t g = 0; g < greedy_rows.size(); ++g) {
      const int32_t token = greedy_tokens_[greedy_rows[g]];
      const float logprob = greedy_logprobs_[greedy_rows[g]];
      if (token < 0) {
        greedy[g] = absl::InvalidArgumentError("sampling: a logits row with a NaN, +inf or no finite value");
      } else {
        model::SampleResult r;
        r.token = token;
        r.logprob = r.raw_logprob = logprob;
        greedy[g] = std::move(r);
      }
    }
  } else {
    sample_pool_->ParallelFor(static_cast<int64_t>(greedy_rows.size()), 4, [&](int64_t begin, int64_t end) {
      for (int64_t g = begin; g < end; ++g) {
        greedy[g] = model::SampleGreedy(absl::Span<const float>(logits_view_).subspan(greedy_rows[g] * vocab, vocab));
      }
    });
  }
  for (const auto& [task, g] : greedy_draws) {
    if (!greedy[g].ok()) {
      FailTask(task, greedy[g].status(), true);
      continue;
    }
    AfterSample(task, *greedy[g]);
  }
  for (Draw& draw : draws) {
    if (!draw.result.ok()) {
      FailTask(draw.task, draw.result.status(), true);
      continue;
    }
    AfterSample(draw.task, *draw.result);
  }
}

void EngineImpl::AfterSample(Task* t, const model::SampleResult& sample) {
  const GenerateOptions& options = t->request->generate;
  const int32_t token = sample.token;
  t->result.tokens.push_back(token);
  t->result.logprobs.push_back(sample.raw_logprob);
  t->pending = token;
  ++counters_.generated;
  std::optional<FinishReason> reason;
  model::StopMatcher& stop = *t->stop;
  if (!options.ignore_eos && Contains(eos_tokens_, token)) {
    reason = FinishReason::kEos;
  } else if (Contains(options.stop_tokens, token)) {
    reason = FinishReason::kStop;
  } else {
    absl::StatusOr<std::string> piece = tokenizer_->TokenBytes(token, 1);
    if (piece.ok()) t->utf8_hold += *piece;
    const size_t complete = model::CompleteUtf8Prefix(t->utf8_hold);
    stop.Append(std::string_view(t->utf8_hold).substr(0, complete));
    t->utf8_hold.erase(0, complete);
    if (stop.stopped()) reason = FinishReason::kStop;
  }
  if (!reason && static_cast<int32_t>(t->result.tokens.size()) >= options.max_tokens) {
    reason = FinishReason::kLength;
  }
  if (reason && !stop.stopped() && !t->utf8_hold.empty()) {
    stop.Append(t->utf8_hold);  // an unfinished character at the very end
    t->utf8_hold.clear();
    if (stop.stopped()) reason = FinishReason::kStop;
  }
  const size_t safe = reason ? stop.text().size() : stop.SafeLength();
  std::string_view delta;
  if (safe > t->shown) {
    delta = std::string_view(stop.text()).substr(t->shown, safe - t->shown);
    t->shown = safe;
  }
  if (options.callbacks.on_token) {
    const bool keep = options.callbacks.on_token(t->id, token, delta, sample.raw_logprob);
    if (!keep && !reason) reason = FinishReason::kCallback;
  }
  if (reason) {
    t->result.finish = *reason;
    t->result.text = stop.text();
    t->finishing = true;  // the last token is appended (and its K/V written) next step
  }
}

void EngineImpl::FailTask(Task* t, absl::Status status, bool undo) {
  if (t->done) return;
  if (undo) {
    // Every token in the tree has its K/V (engine_impl.h), so what is cut
    // off stays cached, valid, for later reuse.
    if (t->temp.valid()) (void)tree_->Release(t->temp);
    if (t->branch.valid()) {
      if (t->owns_branch) {
        (void)tree_->Release(t->branch);
      } else if (t->kind != Task::Kind::kScore) {
        (void)tree_->Truncate(t->branch, t->start_length);
      }
    }
  }
  t->temp = {};
  // A status of its own (not a copy sharing `status`'s reference-counted
  // message with the other tasks failed alike): the tasks' callers, on other
  // threads, drop their copies in Debian's Abseil, whose reference counting
  // TSan cannot see.
  t->status = absl::Status(status.code(), status.message());
  t->done = true;
  --t->request->remaining;
}

void EngineImpl::CompleteTask(Task* t) {
  if (t->done) return;
  if (t->kind == Task::Kind::kScore) {
    if (t->temp.valid()) (void)tree_->Release(t->temp);
    t->temp = {};
    double sum = 0;
    for (float lp : t->score.token_logprobs) sum += lp;
    t->score.logprob = sum;
  }
  t->status = absl::OkStatus();
  t->done = true;
  --t->request->remaining;
}

void EngineImpl::PublishCompleted(std::vector<Task*>& active) {
  const StepCounters& c = counters_;
  if (c.forward) {
    ++stats_.forward_passes;
    stats_.forward_seconds += c.seconds;
    if (c.decoded) {
      ++stats_.decode_steps;
      stats_.decode_seconds += c.seconds;
    }
    stats_.max_rows_in_step = std::max(stats_.max_rows_in_step, c.rows);
    stats_.kv_tokens_read += c.kv_read;
    stats_.kv_tokens_attended += c.kv_attended;
  }
  stats_.tokens_generated += c.generated;
  stats_.tokens_prefilled += c.prefilled;
  stats_.tokens_reused += c.reused;
  stats_.tokens_scored += c.scored;
  counters_ = StepCounters{};
  std::vector<Request*> finished;
  size_t keep = 0;
  for (Task* t : active) {
    if (!t->done) {
      active[keep++] = t;
      continue;
    }
    if (t->request->remaining == 0 && !t->request->finished &&
        std::find(finished.begin(), finished.end(), t->request) == finished.end()) {
      finished.push_back(t->request);
    }
  }
  active.resize(keep);
  for (Request* r : finished) {
    for (auto& task : r->tasks) {
      Task& t = *task;
      if (t.kind == Task::Kind::kPrefill && t.owns_branch) {
        if (t.status.ok()) {
          t.id = BranchId{next_branch_id_++};
          BranchRecord& rec = records_[t.id.value];
          rec.branch = t.branch;
          rec.tokens_reused = t.reused;
          rec.kv_namespace = t.branch_options.kv_namespace;
          rec.priority = t.branch_options.priority;
          rec.metadata = std::move(t.metadata);
          ++stats_.live_branches;
        }
        continue;
      }
      auto it = records_.find(t.id.value);
      if (it == records_.end()) continue;
      it->second.busy = false;
      if (t.kind == Task::Kind::kPrefill && t.status.ok()) it->second.tokens_reused += t.reused;
    }
    r->finished = true;
  }
  if (!finished.empty()) done_cv_.notify_all();
}

}  // namespace banyan::engine
