#include "search/strategy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>
#include <limits>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "search/strategies.h"

namespace banyan::search {
namespace {

struct NamedKind {
  StrategyKind kind;
  std::string_view name;
};
constexpr NamedKind kKinds[] = {
    {StrategyKind::kSelfConsistency, "self-consistency"},
    {StrategyKind::kTotBfs, "tot-bfs"},
    {StrategyKind::kTotDfs, "tot-dfs"},
    {StrategyKind::kMcts, "mcts"},
    {StrategyKind::kBestOfN, "best-of-n"},
    {StrategyKind::kBeam, "beam"},
};

}  // namespace

std::string_view StrategyName(StrategyKind kind) {
  for (const NamedKind& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

absl::StatusOr<StrategyKind> ParseStrategyKind(std::string_view name) {
  std::string known;
  for (const NamedKind& k : kKinds) {
    if (k.name == name) return k.kind;
    absl::StrAppend(&known, known.empty() ? "" : ", ", std::string(k.name));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown strategy '", std::string(name), "' (known: ", known, ")"));
}

std::unique_ptr<Strategy> CreateStrategy(StrategyKind kind) {
  switch (kind) {
    case StrategyKind::kSelfConsistency:
      return NewSelfConsistency();
    case StrategyKind::kMcts:
      return NewMcts();
    case StrategyKind::kBestOfN:
      return NewBestOfN();
    case StrategyKind::kTotBfs:
    case StrategyKind::kTotDfs:
    case StrategyKind::kBeam:
      return NewTreeOfThought(kind);
  }
  return nullptr;
}

double Uct(double value_sum, int64_t visits, int64_t parent_visits, double exploration) {
  if (visits <= 0) return std::numeric_limits<double>::infinity();
  const double mean = value_sum / static_cast<double>(visits);
  const double n = static_cast<double>(std::max<int64_t>(parent_visits, 1));
  return mean + exploration * std::sqrt(std::log(n) / static_cast<double>(visits));
}

std::vector<size_t> TopK(const std::vector<double>& values, size_t k) {
  std::vector<size_t> idx(values.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return values[a] > values[b]; });
  idx.resize(std::min(k, idx.size()));
  return idx;
}

int32_t WaveSize(int32_t n, int32_t wave_size) {
  if (wave_size > 0) return std::min(wave_size, n);
  return std::max(1, n / 4);
}

absl::Status CompareDecisions(const proto::SearchTrace& a, const proto::SearchTrace& b) {
  const int na = a.events_size(), nb = b.events_size();
  for (int i = 0; i < std::min(na, nb); ++i) {
    proto::TraceEvent x = a.events(i), y = b.events(i);
    x.clear_elapsed_seconds();
    y.clear_elapsed_seconds();
    if (x.SerializeAsString() != y.SerializeAsString()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "traces differ at event ", i, ": {", x.ShortDebugString(), "} vs {",
          y.ShortDebugString(), "}"));
    }
  }
  if (na != nb) {
    return absl::FailedPreconditionError(
        absl::StrCat("traces differ in length: ", na, " vs ", nb, " events"));
  }
  if (a.answer() != b.answer()) {
    return absl::FailedPreconditionError(
        absl::StrCat("answers differ: '", a.answer(), "' vs '", b.answer(), "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TraceToJson(const proto::SearchTrace& trace) {
  std::string json;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  const auto status = google::protobuf::util::MessageToJsonString(trace, &json, opts);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("trace to JSON: ", status.ToString()));
  }
  return json;
}

absl::Status WriteTrace(const proto::SearchTrace& trace, const std::string& path) {
  std::string bytes;
  if (absl::EndsWith(path, ".json")) {
    absl::StatusOr<std::string> json = TraceToJson(trace);
    if (!json.ok()) return json.status();
    bytes = std::move(*json);
  } else if (!trace.SerializeToString(&bytes)) {
    return absl::InternalError("trace: protobuf serialization failed");
  }
  // Written beside the target and renamed over it, so a failed write never leaves a half trace at `path`.
  const std::string partial = path + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write trace file ", path));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::remove(partial.c_str());
    return absl::DataLossError(absl::StrCat("short write to trace file ", path));
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot rename the trace into place at ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::SearchTrace> ReadTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open trace file ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  proto::SearchTrace trace;
  if (absl::EndsWith(path, ".json")) {
    google::protobuf::util::JsonParseOptions opts;
    const auto status = google::protobuf::util::JsonStringToMessage(bytes, &trace, opts);
    if (!status.ok()) {
      return absl::DataLossError(
          absl::StrCat(path, ": not a JSON search trace (", std::string(status.message()), ")"));
    }
  } else if (!trace.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat(path, ": not a binary search trace"));
  }
  if (!trace.has_config() || trace.config().strategy().empty()) {
    return absl::DataLossError(absl::StrCat(path, ": the trace has no search config"));
  }
  return trace;
}

absl::StatusOr<StrategyKind> StrategyFromConfig(const proto::SearchConfig& c) {
  return ParseStrategyKind(c.strategy());
}

absl::StatusOr<SearchOptions> OptionsFromConfig(const proto::SearchConfig& c) {
  SearchOptions o;
  o.prompt = c.prompt();
  o.n = c.n();
  o.beam_width = c.beam_width();
  o.max_depth = c.max_depth();
  o.step_tokens = c.step_tokens();
  o.step_delimiter = c.step_delimiter();
  o.sampling.temperature = c.temperature();
  o.sampling.top_k = c.top_k();
  o.sampling.top_p = c.top_p();
  o.sampling.min_p = c.min_p();
  o.sampling.repetition_penalty = c.repetition_penalty();
  o.seed = c.seed();
  o.budget.max_tokens = c.max_tokens();
  o.budget.max_branches = c.max_branches();
  o.budget.max_seconds = c.max_seconds();
  o.iterations = c.iterations();
  o.exploration = c.exploration();
  o.value_threshold = c.value_threshold();
  o.wave_size = c.wave_size();
  o.weighted_vote = c.vote() == "weighted";
  o.sample_tokens = c.sample_tokens();
  o.answer_pattern = c.answer_pattern();
  o.rollout_tokens = c.rollout_tokens();
  o.value_prompt = c.value_prompt();
  o.value_good = c.value_good();
  o.value_bad = c.value_bad();
  o.vote_prompt = c.vote_prompt();
  o.stop_strings.assign(c.stop_strings().begin(), c.stop_strings().end());
  static constexpr std::pair<std::string_view, Evaluation> kEval[] = {
      {"none", Evaluation::kNone},         {"model-value", Evaluation::kModelValue},
      {"model-vote", Evaluation::kModelVote}, {"callback", Evaluation::kCallback},
      {"policy", Evaluation::kPolicy}};
  bool found = false;
  for (const auto& [name, e] : kEval) {
    if (name == c.evaluation()) {
      o.evaluation = e;
      found = true;
    }
  }
  if (!found) {
    return absl::InvalidArgumentError(absl::StrCat("unknown evaluation '", c.evaluation(), "'"));
  }
  return o;
}

}  // namespace banyan::search
