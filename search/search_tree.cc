#include "search/search_tree.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/tokenizer/unicode.h"
#include "sdk/base/rng.h"
#include "search/policy_binding.h"

namespace banyan::search {
namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// Failures that end the search with what it has instead of failing it.
bool IsSoft(const absl::Status& s) {
  return s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kCancelled ||
         s.code() == absl::StatusCode::kResourceExhausted;
}

// Text for the trace's proto3 `string` fields, which must be valid UTF-8 (a
// binary trace with other bytes does not parse, and the JSON printer drops
// them): model output cut inside a character or made of byte-fallback tokens
// gets U+FFFD per invalid byte. The live SearchResult keeps the bytes as they are.
std::string TraceText(std::string_view text) { return model::ToValidUtf8(text); }

}  // namespace

SearchTree::SearchTree(Engine& engine, const SearchOptions& options, std::string_view strategy)
    : engine_(engine), options_(options), start_(absl::Now()) {
  deadline_ = options.budget.max_seconds > 0
                  ? start_ + absl::Seconds(options.budget.max_seconds)
                  : absl::InfiniteFuture();
  if (options_.policy != nullptr) {
    options_.policy->Attach(this);
    if (options_.cancel != nullptr) {
      scripting::LuaPolicy* lua = &options_.policy->lua();
      cancel_watch_ = std::thread([this, lua, token = options_.cancel] {
        while (!done_.WaitForNotificationWithTimeout(absl::Milliseconds(2))) {
          if (token->cancelled()) {
            lua->Cancel();
            return;
          }
        }
      });
    }
  }
  proto::SearchConfig& c = *trace_.mutable_config();
  c.set_strategy(std::string(strategy));
  c.set_prompt(TraceText(options.prompt));
  c.set_n(options.n);
  c.set_beam_width(options.beam_width);
  c.set_max_depth(options.max_depth);
  c.set_step_tokens(options.step_tokens);
  c.set_step_delimiter(TraceText(options.step_delimiter));
  c.set_temperature(options.sampling.temperature);
  c.set_seed(options.seed);
  c.set_max_tokens(options.budget.max_tokens);
  c.set_max_branches(options.budget.max_branches);
  c.set_max_seconds(options.budget.max_seconds);
  c.set_iterations(options.iterations);
  c.set_exploration(options.exploration);
  c.set_value_threshold(options.value_threshold);
  static constexpr const char* kEval[] = {"none", "model-value", "model-vote", "callback",
                                          "policy"};
  c.set_evaluation(kEval[static_cast<int>(options.evaluation)]);
  if (options.policy != nullptr) c.set_policy(TraceText(options.policy->name()));
  c.set_wave_size(options.wave_size);
  c.set_vote(options.weighted_vote ? "weighted" : "majority");
  c.set_top_k(options.sampling.top_k);
  c.set_top_p(options.sampling.top_p);
  c.set_min_p(options.sampling.min_p);
  c.set_repetition_penalty(options.sampling.repetition_penalty);
  c.set_sample_tokens(options.sample_tokens);
  c.set_answer_pattern(TraceText(options.answer_pattern));
  c.set_rollout_tokens(options.rollout_tokens);
  c.set_value_prompt(TraceText(options.value_prompt));
  c.set_value_good(TraceText(options.value_good));
  c.set_value_bad(TraceText(options.value_bad));
  c.set_vote_prompt(TraceText(options.vote_prompt));
  for (const std::string& stop : options.stop_strings) c.add_stop_strings(TraceText(stop));
}

SearchTree::~SearchTree() {
  if (cancel_watch_.joinable()) {
    done_.Notify();
    cancel_watch_.join();
    options_.policy->lua().ResetCancel();  // usable by the next search
  }
  for (Node& n : nodes_) {
    if (!n.released && n.branch.valid()) {
      engine_.Release(n.branch).IgnoreError();  // best effort: the id may be stale already
      n.released = true;
    }
  }
  if (options_.policy != nullptr) options_.policy->Attach(nullptr);
}

scripting::LuaPolicy* SearchTree::policy() const {
  return options_.policy == nullptr ? nullptr : &options_.policy->lua();
}

absl::Status SearchTree::ValidateCommon(const SearchOptions& o) {
  if (o.prompt.empty()) return absl::InvalidArgumentError("search: the prompt is empty");
  if (o.n < 1) return absl::InvalidArgumentError(absl::StrCat("search: n must be >= 1, got ", o.n));
  if (o.step_tokens < 1 || o.sample_tokens < 1) {
    return absl::InvalidArgumentError("search: step_tokens and sample_tokens must be >= 1");
  }
  if (o.max_depth < 1) return absl::InvalidArgumentError("search: max_depth must be >= 1");
  if (o.budget.max_tokens < 0 || o.budget.max_branches < 0 || o.budget.max_seconds < 0 ||
      !std::isfinite(o.budget.max_seconds)) {
    return absl::InvalidArgumentError("search: budgets must be >= 0 (0 = unlimited)");
  }
  if (o.evaluation == Evaluation::kCallback && !o.scorer) {
    return absl::InvalidArgumentError("search: evaluation kCallback needs SearchOptions::scorer");
  }
  if (o.evaluation == Evaluation::kPolicy && (o.policy == nullptr || !o.policy->lua().has_score())) {
    return absl::InvalidArgumentError("search: evaluation kPolicy needs a policy with score()");
  }
  return absl::OkStatus();
}

uint64_t SearchTree::NextSeed() { return Rng(options_.seed).Derive(requests_++).Next(); }

int64_t SearchTree::TokensLeft() const {
  if (options_.budget.max_tokens == 0) return kUnlimited;
  return options_.budget.max_tokens - cost_.tokens_generated;
}

int64_t SearchTree::BranchesLeft() const {
  if (options_.budget.max_branches == 0) return kUnlimited;
  return options_.budget.max_branches - cost_.branches_created;
}

bool SearchTree::CheckStop() {
  if (stopped()) return true;
  if (options_.cancel != nullptr && options_.cancel->cancelled()) {
    Stop("cancelled");
  } else if (absl::Now() >= deadline_) {
    Stop("max_seconds");
  } else if (TokensLeft() <= 0) {
    Stop("max_tokens");
  } else if (BranchesLeft() <= 0) {
    Stop("max_branches");
  }
  return stopped();
}

absl::StatusOr<bool> SearchTree::PolicyWantsStop(int64_t iterations, int32_t depth) {
  scripting::LuaPolicy* p = policy();
  if (p == nullptr || !p->has_should_stop()) return false;
  CountPolicyCall();
  BANYAN_ASSIGN_OR_RETURN(bool stop, p->ShouldStop(Stats(iterations, depth)));
  if (stop) Stop("policy");
  return stop;
}

absl::Status SearchTree::SoftFail(const absl::Status& status) {
  if (status.code() == absl::StatusCode::kCancelled) {
    Stop("cancelled");
    return absl::OkStatus();
  }
  if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    Stop("max_seconds");
    return absl::OkStatus();
  }
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    Stop("kv_budget");  // the engine's KV cannot hold more branches
    return absl::OkStatus();
  }
  return status;
}

void SearchTree::Record(proto::TraceEvent::Kind kind, int64_t node,
                        const std::vector<int64_t>& children, double value,
                        std::string_view detail, uint64_t seed) {
  proto::TraceEvent* e = trace_.add_events();
  e->set_kind(kind);
  e->set_node(node);
  for (int64_t c : children) e->add_children(c);
  e->set_value(value);
  e->set_detail(TraceText(detail));
  e->set_seed(seed);
  e->set_elapsed_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
}

int64_t SearchTree::AddNode(int64_t parent, BranchId branch) {
  Node n;
  n.id = size();
  n.parent = parent;
  n.branch = branch;
  if (parent >= 0) {
    const Node& p = node(parent);
    n.depth = p.depth + 1;
    n.path_text = p.path_text;
    n.path_tokens = p.path_tokens;
  }
  nodes_.push_back(std::move(n));
  if (parent >= 0) node(parent).children.push_back(size() - 1);
  return size() - 1;
}

GenerateOptions SearchTree::BaseGenerate() const {
  GenerateOptions g;
  g.sampling = options_.sampling;
  g.deadline = deadline_;
  g.cancel = options_.cancel;
  return g;
}

absl::StatusOr<int64_t> SearchTree::CreateRoot() {
  if (!nodes_.empty()) return absl::FailedPreconditionError("search: the root exists already");
  BANYAN_ASSIGN_OR_RETURN(BranchId b, engine_.NewBranch(Prompt::Text(options_.prompt)));
  ++cost_.branches_created;
  const int64_t id = AddNode(-1, b);
  node(id).step_text = options_.prompt;
  Record(proto::TraceEvent::ROOT, id);
  return id;
}

absl::StatusOr<std::vector<int64_t>> SearchTree::ExpandSampled(
    int64_t id, int32_t k, int32_t max_tokens, const std::vector<std::string>* stops,
    float temperature_override) {
  std::vector<int64_t> out;
  if (CheckStop() || k < 1) return out;
  int64_t per = max_tokens;
  int64_t count = k;
  const int64_t tokens_left = TokensLeft();
  if (tokens_left != kUnlimited) {
    per = std::min<int64_t>(per, tokens_left);
    count = std::min<int64_t>(count, tokens_left / per);
  }
  count = std::min(count, BranchesLeft());
  if (count < 1) {
    Stop(BranchesLeft() < 1 ? "max_branches" : "max_tokens");
    return out;
  }
  Node& parent = node(id);
  if (parent.released) return absl::NotFoundError(absl::StrCat("search: node ", id, " was pruned"));
  absl::StatusOr<std::vector<BranchId>> kids = engine_.Fork(parent.branch, static_cast<int32_t>(count));
  if (!kids.ok()) {
    BANYAN_RETURN_IF_ERROR(SoftFail(kids.status()));
    return out;
  }
  cost_.branches_created += count;
  GenerateOptions g = BaseGenerate();
  g.max_tokens = static_cast<int32_t>(per);
  const bool delimited = stops == nullptr;
  if (stops != nullptr) {
    g.stop_strings = *stops;
  } else if (!options_.step_delimiter.empty()) {
    g.stop_strings = {options_.step_delimiter};
  }
  if (temperature_override >= 0) g.sampling.temperature = temperature_override;
  g.sampling.seed = NextSeed();
  std::vector<absl::StatusOr<GenerateResult>> results = engine_.GenerateMany(*kids, g);
  ++cost_.generate_calls;
  absl::Status hard = absl::OkStatus();
  for (size_t i = 0; i < kids->size(); ++i) {
    if (i >= results.size() || !results[i].ok()) {
      engine_.Release((*kids)[i]).IgnoreError();
      const absl::Status s = i < results.size() ? results[i].status()
                                                : absl::InternalError("engine: missing result");
      if (IsSoft(s)) {
        SoftFail(s).IgnoreError();
      } else if (hard.ok()) {
        hard = s;
      }
      continue;
    }
    const GenerateResult& r = *results[i];
    const int64_t child = AddNode(id, (*kids)[i]);
    Node& c = node(child);
    c.step_text = r.text;
    if (delimited && r.finish == FinishReason::kStop) c.step_text += options_.step_delimiter;
    c.path_text += c.step_text;
    c.tokens = static_cast<int32_t>(r.tokens.size());
    c.path_tokens += c.tokens;
    for (float lp : r.logprobs) c.logprob += lp;
    c.terminal = r.finish == FinishReason::kEos;
    cost_.tokens_generated += c.tokens;
    out.push_back(child);
  }
  Record(proto::TraceEvent::EXPAND, id, out, 0, "", g.sampling.seed);
  BANYAN_RETURN_IF_ERROR(hard);
  return out;
}

absl::StatusOr<std::vector<int64_t>> SearchTree::Expand(int64_t id, int32_t default_k,
                                                        int64_t iterations) {
  scripting::LuaPolicy* p = policy();
  if (p == nullptr || !p->has_expand()) {
    return ExpandSampled(id, default_k, options_.step_tokens);
  }
  if (CheckStop()) return std::vector<int64_t>{};
  CountPolicyCall();
  BANYAN_ASSIGN_OR_RETURN(scripting::ExpandResult r,
                          p->Expand(View(node(id)), Stats(iterations, node(id).depth)));
  if (!r.continuations.empty()) return ExpandWith(id, r.continuations);
  if (r.sample_count > 0) {
    return ExpandSampled(id, static_cast<int32_t>(std::min<int64_t>(r.sample_count, 1 << 20)),
                         options_.step_tokens);
  }
  return std::vector<int64_t>{};
}

absl::StatusOr<std::vector<int64_t>> SearchTree::ExpandWith(
    int64_t id, const std::vector<std::string>& continuations) {
  std::vector<int64_t> out;
  if (CheckStop() || continuations.empty()) return out;
  const int64_t count = std::min<int64_t>(static_cast<int64_t>(continuations.size()),
                                          BranchesLeft());
  if (count < 1) {
    Stop("max_branches");
    return out;
  }
  if (node(id).released) return absl::NotFoundError(absl::StrCat("search: node ", id, " was pruned"));
  absl::StatusOr<std::vector<BranchId>> kids =
      engine_.Fork(node(id).branch, static_cast<int32_t>(count));
  if (!kids.ok()) {
    BANYAN_RETURN_IF_ERROR(SoftFail(kids.status()));
    return out;
  }
  cost_.branches_created += count;
  for (int64_t i = 0; i < count; ++i) {
    const BranchId b = (*kids)[static_cast<size_t>(i)];
    const std::string& text = continuations[static_cast<size_t>(i)];
    absl::StatusOr<std::vector<int32_t>> toks = engine_.Tokenize(text);
    absl::Status s = toks.ok() ? engine_.Append(b, Prompt::Text(text)) : toks.status();
    if (!s.ok()) {
      for (int64_t j = i; j < count; ++j) engine_.Release((*kids)[static_cast<size_t>(j)]).IgnoreError();
      BANYAN_RETURN_IF_ERROR(SoftFail(s));
      break;
    }
    const int64_t child = AddNode(id, b);
    Node& c = node(child);
    c.step_text = text;
    c.path_text += text;
    c.tokens = static_cast<int32_t>(toks->size());
    c.path_tokens += c.tokens;
    out.push_back(child);
  }
  Record(proto::TraceEvent::EXPAND, id, out, 0, "explicit");
  return out;
}

absl::StatusOr<double> SearchTree::ModelValue(const Node& n) {
  if (n.released) return absl::NotFoundError(absl::StrCat("search: node ", n.id, " was pruned"));
  BANYAN_ASSIGN_OR_RETURN(ScoreResult good, engine_.Score(n.branch, Prompt::Text(options_.value_prompt +
                                                                                options_.value_good)));
  BANYAN_ASSIGN_OR_RETURN(ScoreResult bad, engine_.Score(n.branch, Prompt::Text(options_.value_prompt +
                                                                               options_.value_bad)));
  cost_.score_calls += 2;
  cost_.tokens_scored += good.tokens + bad.tokens;
  // The shared value prompt's log-likelihood cancels in the difference.
  return 1.0 / (1.0 + std::exp(bad.logprob - good.logprob));
}

absl::StatusOr<double> SearchTree::Value(int64_t id) {
  Node& n = node(id);
  if (n.valued) return n.value;
  double v = 0;
  switch (options_.evaluation) {
    case Evaluation::kNone:
      v = n.tokens > 0 && n.logprob != 0 ? std::exp(n.logprob / n.tokens) : 1.0;
      break;
    case Evaluation::kModelValue: {
      BANYAN_ASSIGN_OR_RETURN(v, ModelValue(n));
      break;
    }
    case Evaluation::kModelVote: {
      BANYAN_ASSIGN_OR_RETURN(std::vector<double> vs, ValueAll({id}));
      return vs[0];
    }
    case Evaluation::kCallback: {
      BANYAN_ASSIGN_OR_RETURN(v, options_.scorer(Context(n)));
      break;
    }
    case Evaluation::kPolicy: {
      CountPolicyCall();
      BANYAN_ASSIGN_OR_RETURN(v, policy()->Score(View(n)));
      break;
    }
  }
  if (!std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat("search: the value of node ", id, " is not finite"));
  }
  Node& m = node(id);  // a policy callback may have added nodes (deque: stable anyway)
  m.value = v;
  m.valued = true;
  Record(proto::TraceEvent::SCORE, id, {}, v);
  return v;
}

absl::StatusOr<std::vector<double>> SearchTree::ValueAll(const std::vector<int64_t>& ids) {
  std::vector<double> values;
  if (options_.evaluation != Evaluation::kModelVote) {
    for (int64_t id : ids) {
      BANYAN_ASSIGN_OR_RETURN(double v, Value(id));
      values.push_back(v);
    }
    return values;
  }
  if (ids.size() == 1) {
    values.push_back(1.0);
  } else {
    // The candidates side by side after the prompt (the prompt's KV is reused).
    std::string text = options_.prompt;
    for (size_t i = 0; i < ids.size(); ++i) {
      absl::StrAppend(&text, "\nChoice ", i + 1, ": ", node(ids[i]).path_text);
    }
    text += options_.vote_prompt;
    BANYAN_ASSIGN_OR_RETURN(BranchId vb, engine_.NewBranch(Prompt::Text(text)));
    ++cost_.branches_created;
    std::vector<double> lps;
    absl::Status failed = absl::OkStatus();
    for (size_t i = 0; i < ids.size() && failed.ok(); ++i) {
      absl::StatusOr<ScoreResult> s =
          engine_.Score(vb, Prompt::Text(absl::StrCat(" The best choice is ", i + 1)));
      if (!s.ok()) {
        failed = s.status();
        break;
      }
      ++cost_.score_calls;
      cost_.tokens_scored += s->tokens;
      lps.push_back(s->logprob);
    }
    engine_.Release(vb).IgnoreError();
    BANYAN_RETURN_IF_ERROR(failed);
    const double mx = *std::max_element(lps.begin(), lps.end());
    double z = 0;
    for (double lp : lps) z += std::exp(lp - mx);
    for (double lp : lps) values.push_back(std::exp(lp - mx) / z);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    Node& n = node(ids[i]);
    n.value = values[i];
    n.valued = true;
    Record(proto::TraceEvent::SCORE, ids[i], {}, values[i], "vote");
  }
  return values;
}

absl::Status SearchTree::Prune(int64_t id) {
  Node& n = node(id);
  if (n.released) return absl::OkStatus();
  n.released = true;
  Record(proto::TraceEvent::PRUNE, id);
  return engine_.Release(n.branch);
}

absl::Status SearchTree::PruneSubtree(int64_t id) {
  std::vector<int64_t> stack = {id};
  while (!stack.empty()) {
    const int64_t cur = stack.back();
    stack.pop_back();
    BANYAN_RETURN_IF_ERROR(Prune(cur));
    for (int64_t c : node(cur).children) stack.push_back(c);
  }
  return absl::OkStatus();
}

scripting::NodeView SearchTree::View(const Node& n) const {
  scripting::NodeView v;
  v.id = n.id;
  v.parent = n.parent;
  v.text = n.path_text;
  v.token_count = n.path_tokens;
  v.depth = n.depth;
  v.score = n.value;
  v.visits = n.visits;
  return v;
}

scripting::SearchStats SearchTree::Stats(int64_t iterations, int32_t depth) const {
  scripting::SearchStats s;
  s.tokens_used = cost_.tokens_generated;
  s.branches = cost_.branches_created;
  s.elapsed_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  s.iterations = iterations;
  s.depth = depth;
  s.max_tokens = options_.budget.max_tokens;
  s.max_branches = options_.budget.max_branches;
  return s;
}

NodeContext SearchTree::Context(const Node& n) const {
  NodeContext c;
  c.id = n.id;
  c.parent = n.parent;
  c.depth = n.depth;
  c.step_text = n.step_text;
  c.path_text = n.path_text;
  c.prompt = options_.prompt;
  c.branch = n.released ? BranchId{} : n.branch;
  return c;
}

void SearchTree::Finish(SearchResult& result) {
  cost_.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  result.cost = cost_;
  result.stop_reason = stop_reason_.empty() ? "done" : stop_reason_;
  result.nodes = size();
  result.max_depth = 0;
  result.leaves = 0;
  for (const Node& n : nodes_) {
    result.max_depth = std::max(result.max_depth, n.depth);
    if (n.children.empty()) ++result.leaves;
    proto::TraceNode* t = trace_.add_nodes();
    t->set_id(n.id);
    t->set_parent(n.parent);
    t->set_depth(n.depth);
    t->set_text(TraceText(n.step_text));
    t->set_tokens(n.tokens);
    t->set_value(n.value);
    t->set_visits(n.visits);
    t->set_released(n.released);
    t->set_answer(TraceText(n.answer));
    t->set_terminal(n.terminal);
  }
  Record(proto::TraceEvent::STOP, -1, {}, 0, result.stop_reason);
  Record(proto::TraceEvent::ANSWER, -1, {}, result.best_value, result.answer);
  proto::SearchCost* c = trace_.mutable_cost();
  c->set_tokens_generated(cost_.tokens_generated);
  c->set_tokens_scored(cost_.tokens_scored);
  c->set_branches_created(cost_.branches_created);
  c->set_generate_calls(cost_.generate_calls);
  c->set_score_calls(cost_.score_calls);
  c->set_policy_calls(cost_.policy_calls);
  c->set_wall_seconds(cost_.wall_seconds);
  for (const VoteEntry& v : result.votes) {
    proto::VoteCount* vc = trace_.add_votes();
    vc->set_answer(TraceText(v.answer));
    vc->set_weight(v.weight);
    vc->set_count(v.count);
  }
  trace_.set_answer(TraceText(result.answer));
  trace_.set_stop_reason(result.stop_reason);
  trace_.set_max_depth_reached(result.max_depth);
  trace_.set_leaves(static_cast<int32_t>(result.leaves));
  trace_.set_node_count(result.nodes);
  result.trace = std::move(trace_);
  trace_.Clear();
}

}  // namespace banyan::search
