#include "scripting/lua_policy.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/rng.h"
#include "sdk/base/status_testing.h"

namespace banyan::scripting {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Code = absl::StatusCode;

MATCHER_P(IsOkAndHolds, expected, "is OK and holds " + ::testing::PrintToString(expected)) {
  if (!arg.ok()) {
    *result_listener << "status is " << arg.status();
    return false;
  }
  *result_listener << "holds " << ::testing::PrintToString(*arg);
  return *arg == expected;
}

std::string PolicyPath(const char* name) {
  return std::string(BANYAN_SCRIPTING_POLICY_DIR) + "/" + name;
}

LuaPolicyOptions TestOptions() {
  LuaPolicyOptions options;
  options.limits.memory_bytes = 8u << 20;
  options.limits.instructions_per_call = 2'000'000;
  options.limits.time_per_call = absl::Seconds(1);
  return options;
}

// A real little tree on the C++ side: fork appends text, the model score is the fraction of
// vowels, the token count is the number of whitespace-separated words.
struct TextTree {
  std::map<int64_t, std::string> text;
  std::map<int64_t, int64_t> parent;
  int64_t next_id = 1;

  int64_t Add(int64_t parent_id, std::string body) {
    const int64_t id = next_id++;
    text[id] = std::move(body);
    parent[id] = parent_id;
    return id;
  }
  static double VowelFraction(const std::string& s) {
    if (s.empty()) return 0.0;
    const auto vowels = std::count_if(s.begin(), s.end(), [](char c) {
      return std::string_view("aeiouAEIOU").find(c) != std::string_view::npos;
    });
    return static_cast<double>(vowels) / static_cast<double>(s.size());
  }
  static int64_t Words(const std::string& s) {
    int64_t words = 0;
    bool in_word = false;
    for (char c : s) {
      const bool space = c == ' ' || c == '\n' || c == '\t';
      if (!space && !in_word) ++words;
      in_word = !space;
    }
    return words;
  }
  PolicyCallbacks Callbacks() {
    PolicyCallbacks cb;
    cb.branch_text = [this](int64_t id) -> absl::StatusOr<std::string> {
      auto it = text.find(id);
      if (it == text.end()) return absl::NotFoundError("no such node");
      return it->second;
    };
    cb.token_count = [this](int64_t id) -> absl::StatusOr<int64_t> {
      auto it = text.find(id);
      if (it == text.end()) return absl::NotFoundError("no such node");
      return Words(it->second);
    };
    cb.model_score = [this](int64_t id) -> absl::StatusOr<double> {
      auto it = text.find(id);
      if (it == text.end()) return absl::NotFoundError("no such node");
      return VowelFraction(it->second);
    };
    cb.fork = [this](int64_t id, std::string_view continuation) -> absl::StatusOr<int64_t> {
      auto it = text.find(id);
      if (it == text.end()) return absl::NotFoundError("no such node");
      return Add(id, it->second + std::string(continuation));
    };
    return cb;
  }
};

NodeView View(const TextTree& tree, int64_t id, int depth = 1, double score = 0.0,
              int64_t visits = 0) {
  NodeView v;
  v.id = id;
  v.parent = tree.parent.at(id);
  v.text = tree.text.at(id);
  v.token_count = TextTree::Words(tree.text.at(id));
  v.depth = depth;
  v.score = score;
  v.visits = visits;
  return v;
}

TEST(LuaPolicyTest, HooksSeeTheNodesAndReturnCheckedResults) {
  TextTree tree;
  const int64_t root = tree.Add(-1, "Question: what is six times seven?");
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load("inline.lua", R"lua(
    function score(node) return #node.text * 0.5 + node.token_count + node.depth end
    function select(frontier)
      local best = 1
      for i = 2, #frontier do if frontier[i].visits > frontier[best].visits then best = i end end
      return best
    end
    function expand(node, stats)
      local a = banyan.fork(node.id, " Six times seven")
      local b = banyan.fork(a, " is 42.")
      return {banyan.text(b), "token count " .. banyan.token_count(b)}
    end
    function should_stop(stats) return stats.branches >= 10 or stats.elapsed_seconds > 5 end
    function answer(node) return node.text:match("is (%d+)") end
  )lua", TestOptions(), tree.Callbacks()));
  EXPECT_TRUE(policy->has_score() && policy->has_select() && policy->has_expand() &&
              policy->has_should_stop() && policy->has_answer());

  const NodeView r = View(tree, root, 0);
  BANYAN_ASSERT_OK_AND_ASSIGN(double s, policy->Score(r));
  EXPECT_DOUBLE_EQ(s, static_cast<double>(r.text.size()) * 0.5 + r.token_count);

  BANYAN_ASSERT_OK_AND_ASSIGN(ExpandResult expanded, policy->Expand(r, SearchStats{}));
  ASSERT_EQ(tree.text.size(), 3u);  // two real forks happened
  const std::string& grandchild = tree.text.at(3);
  EXPECT_EQ(grandchild, tree.text.at(root) + " Six times seven is 42.");
  EXPECT_EQ(tree.parent.at(3), 2);
  EXPECT_THAT(expanded.continuations,
              ElementsAre(grandchild, "token count " + std::to_string(TextTree::Words(grandchild))));

  std::vector<NodeView> frontier;
  for (int64_t visits : {3, 9, 1, 9}) frontier.push_back(View(tree, root, 1, 0.0, visits));
  BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<size_t> chosen, policy->Select(frontier));
  EXPECT_THAT(chosen, ElementsAre(1u));

  SearchStats stats;
  stats.branches = 9;
  EXPECT_THAT(policy->ShouldStop(stats), IsOkAndHolds(false));
  stats.branches = 10;
  EXPECT_THAT(policy->ShouldStop(stats), IsOkAndHolds(true));

  BANYAN_ASSERT_OK_AND_ASSIGN(auto a, policy->Answer(View(tree, 3)));
  EXPECT_EQ(a, std::optional<std::string>("42"));
  BANYAN_ASSERT_OK_AND_ASSIGN(auto none, policy->Answer(r));
  EXPECT_EQ(none, std::nullopt);
}

TEST(LuaPolicyTest, WrongReturnTypesNameTheHook) {
  TextTree tree;
  const int64_t root = tree.Add(-1, "x");
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load("bad.lua", R"lua(
    mode = 1
    function score(node) if mode == 1 then return "high" elseif mode == 2 then return 0/0 end return 1 end
    function select(frontier)
      if mode == 1 then return 0 elseif mode == 2 then return {1, 1}
      elseif mode == 3 then return "1" elseif mode == 4 then return 1.5 end
      return {}
    end
    function expand(node)
      if mode == 1 then return -1 elseif mode == 2 then return {"ok", 7}
      elseif mode == 3 then return true end
      return 100000
    end
    function should_stop(stats) if mode == 1 then return nil end return 1 end
    function answer(node) return 42 end
    function set_mode(m) mode = m end
  )lua", TestOptions(), tree.Callbacks()));
  const NodeView r = View(tree, root);
  const std::vector<NodeView> frontier = {r, r};
  auto set_mode = [&](int m) {
    BANYAN_ASSERT_OK(policy->sandbox().Run("mode", "set_mode(" + std::to_string(m) + ")"));
  };
  for (int m = 1; m <= 2; ++m) {
    set_mode(m);
    EXPECT_THAT(policy->Score(r), StatusIs(Code::kInvalidArgument, HasSubstr("score()")));
  }
  for (int m = 1; m <= 5; ++m) {
    set_mode(m);
    EXPECT_THAT(policy->Select(frontier), StatusIs(Code::kInvalidArgument, HasSubstr("select()")));
  }
  for (int m = 1; m <= 4; ++m) {
    set_mode(m);
    EXPECT_THAT(policy->Expand(r, {}), StatusIs(Code::kInvalidArgument, HasSubstr("expand()")));
  }
  for (int m = 1; m <= 2; ++m) {
    set_mode(m);
    EXPECT_THAT(policy->ShouldStop({}),
                StatusIs(Code::kInvalidArgument, HasSubstr("should_stop()")));
  }
  EXPECT_THAT(policy->Answer(r), StatusIs(Code::kInvalidArgument, HasSubstr("answer()")));
  EXPECT_THAT(policy->Select({}), StatusIs(Code::kInvalidArgument));
  set_mode(9);
  EXPECT_THAT(policy->Score(r), IsOkAndHolds(1.0));  // usable after every error
}

TEST(LuaPolicyTest, MissingAndMisboundHooks) {
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy,
                              LuaPolicy::Load("empty.lua", "local x = 1", TestOptions()));
  EXPECT_FALSE(policy->has_score());
  EXPECT_THAT(policy->Score(NodeView{}), StatusIs(Code::kUnimplemented, HasSubstr("score")));
  EXPECT_THAT(policy->Select(std::vector<NodeView>(1)), StatusIs(Code::kUnimplemented));
  EXPECT_THAT(LuaPolicy::Load("misbound.lua", "score = 3", TestOptions()),
              StatusIs(Code::kInvalidArgument, HasSubstr("'score' must be a function")));
  EXPECT_THAT(LuaPolicy::Load("syntax.lua", "function score(", TestOptions()),
              StatusIs(Code::kInvalidArgument, HasSubstr("syntax.lua")));
  EXPECT_THAT(LuaPolicy::LoadFile("/nonexistent/policy.lua", TestOptions()),
              StatusIs(Code::kNotFound));
}

TEST(LuaPolicyTest, CallbackFailuresKeepTheirCodeAndCannotBeSwallowed) {
  TextTree tree;
  const int64_t root = tree.Add(-1, "root");
  PolicyCallbacks cb = tree.Callbacks();
  cb.fork = [](int64_t, std::string_view) -> absl::StatusOr<int64_t> {
    return absl::ResourceExhaustedError("out of KV pages");
  };
  cb.model_score = [](int64_t) -> absl::StatusOr<double> { throw std::runtime_error("boom"); };
  cb.token_count = nullptr;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load("cb.lua", R"lua(
    function expand(node) local ok = pcall(banyan.fork, node.id, "x") return 1 end
    function score(node) return banyan.model_score(node.id) end
    function select(frontier) return banyan.token_count(frontier[1].id) end
    function answer(node) return banyan.text(node.id + 100) end
  )lua", TestOptions(), cb));
  const NodeView r = View(tree, root);
  EXPECT_THAT(policy->Expand(r, {}),
              StatusIs(Code::kResourceExhausted, HasSubstr("out of KV pages")));
  EXPECT_THAT(policy->Score(r), StatusIs(Code::kInternal, HasSubstr("boom")));
  EXPECT_THAT(policy->Select(std::vector<NodeView>{r}),
              StatusIs(Code::kFailedPrecondition, HasSubstr("banyan.token_count")));
  EXPECT_THAT(policy->Answer(r), StatusIs(Code::kNotFound, HasSubstr("banyan.text")));
}

TEST(LuaPolicyTest, ApiAndParamsAreReadOnly) {
  LuaPolicyOptions options = TestOptions();
  options.params["k"] = 5;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load("params.lua", R"lua(
    assert(banyan.params.k == 5 and banyan.param("k", 1) == 5 and banyan.param("z", 7) == 7)
    assert(not pcall(function() banyan.fork = print end))
    assert(not pcall(function() banyan.params.k = 1 end))
    assert(not pcall(rawset, banyan, "fork", print))
    assert(getmetatable(banyan) == "protected")
    function score(node) return banyan.params.k end
  )lua", options));
  EXPECT_THAT(policy->Score(NodeView{}), IsOkAndHolds(5.0));
}

TEST(LuaPolicyTest, BudgetsArePerCallAndPerPolicy) {
  LuaPolicyOptions options = TestOptions();
  options.limits.instructions_total = 5'000'000;
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load("budget.lua", R"lua(
    function score(node)
      if node.id < 0 then while true do end end
      local s = 0
      for i = 1, node.id do s = s + i end
      return s
    end
    function select(frontier) local t = {} while true do t[#t + 1] = {} end end
  )lua", options));
  NodeView spin;
  spin.id = -1;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(policy->Score(spin), StatusIs(Code::kDeadlineExceeded, HasSubstr("score()")));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 2.0);
  EXPECT_THAT(policy->Select(std::vector<NodeView>(3)), StatusIs(Code::kResourceExhausted));
  NodeView work;
  work.id = 100;
  EXPECT_THAT(policy->Score(work), IsOkAndHolds(5050.0));
  // The per-policy budget: 2M spent on the spin, ~0.4M per call of 200k iterations.
  work.id = 200'000;
  int calls = 0;
  absl::Status status = absl::OkStatus();
  while (status.ok() && calls < 100) {
    status = policy->Score(work).status();
    ++calls;
  }
  EXPECT_THAT(status, StatusIs(Code::kDeadlineExceeded));
  EXPECT_GT(calls, 3);
  EXPECT_LT(calls, 12);
}

TEST(LuaPolicyTest, CancelStopsAHookAndAnotherPolicyStillRuns) {
  LuaPolicyOptions options = TestOptions();
  options.limits.instructions_per_call = int64_t{1} << 60;
  options.limits.time_per_call = absl::Seconds(30);
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy, LuaPolicy::Load(
      "spin.lua", "function score(n) while true do end end", options));
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    policy->Cancel();
  });
  EXPECT_THAT(policy->Score(NodeView{}), StatusIs(Code::kCancelled));
  canceller.join();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto other, LuaPolicy::Load(
      "fine.lua", "function score(n) return n.depth * 2 end", TestOptions()));
  NodeView v;
  v.depth = 4;
  EXPECT_THAT(other->Score(v), IsOkAndHolds(8.0));
}

// --- The example policies -----------------------------------------------------------------

std::vector<NodeView> RandomFrontier(TextTree& tree, Rng& rng, int n) {
  std::vector<NodeView> frontier;
  const char* words[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"};
  for (int i = 0; i < n; ++i) {
    std::string text;
    for (int w = 0; w < 3 + static_cast<int>(rng.UniformInt(5)); ++w) {
      text += words[rng.UniformInt(7)];
      text += ' ';
    }
    const int64_t id = tree.Add(0, text);
    // Scores from a coarse grid so that ties happen and the tie-break is exercised.
    frontier.push_back(View(tree, id, 2, static_cast<double>(rng.UniformInt(6)) / 4.0,
                            static_cast<int64_t>(rng.UniformInt(10))));
  }
  return frontier;
}

TEST(ExamplePoliciesTest, TotBfsKeepsTheTopKByScore) {
  TextTree tree;
  LuaPolicyOptions options = TestOptions();
  options.params["k"] = 4;
  options.params["max_depth"] = 3;
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto policy, LuaPolicy::LoadFile(PolicyPath("tot_bfs.lua"), options, tree.Callbacks()));
  Rng rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + static_cast<int>(rng.UniformInt(16));
    std::vector<NodeView> frontier = RandomFrontier(tree, rng, n);
    std::vector<size_t> expected(frontier.size());
    std::iota(expected.begin(), expected.end(), 0);
    std::sort(expected.begin(), expected.end(), [&](size_t a, size_t b) {
      if (frontier[a].score != frontier[b].score) return frontier[a].score > frontier[b].score;
      return frontier[a].id < frontier[b].id;
    });
    expected.resize(std::min<size_t>(4, expected.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<size_t> kept, policy->Select(frontier));
    EXPECT_EQ(kept, expected) << "trial " << trial;
    // score() is the model's value of the node (the bound C++ callback).
    BANYAN_ASSERT_OK_AND_ASSIGN(double value, policy->Score(frontier[0]));
    EXPECT_DOUBLE_EQ(value, TextTree::VowelFraction(std::string(frontier[0].text)));
  }
  NodeView node = View(tree, 1, 2);
  BANYAN_ASSERT_OK_AND_ASSIGN(ExpandResult grow, policy->Expand(node, {}));
  EXPECT_EQ(grow.sample_count, 3);  // default breadth
  node.depth = 3;
  BANYAN_ASSERT_OK_AND_ASSIGN(ExpandResult leaf, policy->Expand(node, {}));
  EXPECT_EQ(leaf.sample_count, 0);
  SearchStats stats;
  stats.depth = 2;
  EXPECT_THAT(policy->ShouldStop(stats), IsOkAndHolds(false));
  stats.depth = 3;
  EXPECT_THAT(policy->ShouldStop(stats), IsOkAndHolds(true));
  stats.depth = 1;
  stats.max_branches = 10;
  stats.branches = 10;
  EXPECT_THAT(policy->ShouldStop(stats), IsOkAndHolds(true));
}

size_t UctChoice(const std::vector<NodeView>& children, double c) {
  int64_t total = 0;
  for (const NodeView& child : children) total += child.visits;
  size_t best = 0;
  double best_value = -INFINITY;
  for (size_t i = 0; i < children.size(); ++i) {
    const NodeView& child = children[i];
    const double value =
        child.visits == 0 ? INFINITY
                          : child.score + c * std::sqrt(std::log(static_cast<double>(total)) /
                                                        static_cast<double>(child.visits));
    if (value > best_value || (value == best_value && child.id < children[best].id)) {
      best = i;
      best_value = value;
    }
  }
  return best;
}

TEST(ExamplePoliciesTest, MctsSelectsByUct) {
  TextTree tree;
  LuaPolicyOptions options = TestOptions();
  options.params["c"] = 0.8;
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto policy, LuaPolicy::LoadFile(PolicyPath("mcts.lua"), options, tree.Callbacks()));
  Rng rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<NodeView> children = RandomFrontier(tree, rng, 2 + static_cast<int>(rng.UniformInt(6)));
    for (NodeView& child : children) child.score = rng.UniformDouble();
    if (trial % 3 == 0) children[rng.UniformInt(children.size())].visits = 0;
    BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<size_t> chosen, policy->Select(children));
    ASSERT_EQ(chosen.size(), 1u);
    EXPECT_EQ(chosen[0], UctChoice(children, 0.8)) << "trial " << trial;
  }
}

// A whole (tiny) MCTS driven by the policy on a synthetic two-level tree whose leaves have known
// values: the most visited root child must be the one leading to the best leaves.
TEST(ExamplePoliciesTest, MctsConcentratesVisitsOnTheBestBranch) {
  TextTree tree;
  LuaPolicyOptions options = TestOptions();
  options.params["breadth"] = 3;
  options.params["max_depth"] = 2;
  options.params["iterations"] = 200;
  PolicyCallbacks cb = tree.Callbacks();
  // The value of a node: its branch's quality (from the first digit in its text) with noise.
  Rng noise(5);
  cb.model_score = [&](int64_t id) -> absl::StatusOr<double> {
    const std::string& t = tree.text.at(id);
    const size_t digit = t.find_first_of("0123456789");
    const double quality = digit == std::string::npos ? 0.5 : (t[digit] - '0') / 10.0;
    return quality + 0.2 * (noise.UniformDouble() - 0.5);
  };
  BANYAN_ASSERT_OK_AND_ASSIGN(auto policy,
                              LuaPolicy::LoadFile(PolicyPath("mcts.lua"), options, cb));
  struct Stat {
    int64_t visits = 0;
    double total = 0;
    std::vector<int64_t> children;
    int depth = 0;
  };
  std::map<int64_t, Stat> stats;
  const int64_t root = tree.Add(-1, "root");
  stats[root] = Stat{};
  const char* branch_quality[] = {" branch 3", " branch 8", " branch 5"};
  auto view = [&](int64_t id) {
    const Stat& s = stats[id];
    return View(tree, id, s.depth, s.visits ? s.total / s.visits : 0.0, s.visits);
  };
  SearchStats search;
  for (search.iterations = 0;; ++search.iterations) {
    BANYAN_ASSERT_OK_AND_ASSIGN(bool stop, policy->ShouldStop(search));
    if (stop) break;
    std::vector<int64_t> path = {root};
    while (!stats[path.back()].children.empty()) {  // selection
      std::vector<NodeView> kids;
      for (int64_t c : stats[path.back()].children) kids.push_back(view(c));
      BANYAN_ASSERT_OK_AND_ASSIGN(std::vector<size_t> pick, policy->Select(kids));
      path.push_back(stats[path.back()].children[pick[0]]);
    }
    const int64_t leaf = path.back();
    BANYAN_ASSERT_OK_AND_ASSIGN(ExpandResult grow, policy->Expand(view(leaf), search));
    for (int64_t i = 0; i < grow.sample_count; ++i) {  // expansion (sampling stands in for text)
      const std::string suffix = stats[leaf].depth == 0 ? branch_quality[i % 3] : " step";
      const int64_t child = tree.Add(leaf, tree.text.at(leaf) + suffix);
      stats[child].depth = stats[leaf].depth + 1;
      stats[leaf].children.push_back(child);
      ++search.branches;
    }
    BANYAN_ASSERT_OK_AND_ASSIGN(double value, policy->Score(view(leaf)));  // evaluation
    for (int64_t id : path) {  // backup
      stats[id].visits += 1;
      stats[id].total += value;
    }
  }
  EXPECT_EQ(search.iterations, 200);
  const auto& kids = stats[root].children;
  ASSERT_EQ(kids.size(), 3u);
  const auto most = std::max_element(kids.begin(), kids.end(), [&](int64_t a, int64_t b) {
    return stats[a].visits < stats[b].visits;
  });
  EXPECT_THAT(tree.text.at(*most), HasSubstr("branch 8"));
  EXPECT_GT(stats[*most].visits, 100);
}

TEST(ExamplePoliciesTest, VotingExtractsAnswers) {
  TextTree tree;
  BANYAN_ASSERT_OK_AND_ASSIGN(
      auto policy, LuaPolicy::LoadFile(PolicyPath("voting.lua"), TestOptions(), tree.Callbacks()));
  const std::pair<const char*, std::optional<std::string>> cases[] = {
      {"Adding them up, the answer is 1,234.", "1234"},
      {"Work...\n#### 72\n", "72"},
      {"So we get \\boxed{3.50}", "3.5"},
      {"first 12 then 7 and finally -4", "-4"},
      {"The Answer is: 42", "42"},
      {"no digits at all", std::nullopt},
  };
  for (const auto& [text, expected] : cases) {
    const int64_t id = tree.Add(0, text);
    BANYAN_ASSERT_OK_AND_ASSIGN(std::optional<std::string> got, policy->Answer(View(tree, id)));
    EXPECT_EQ(got, expected) << text;
  }
}

TEST(ExamplePoliciesTest, VotingStopsOnceTheLeaderCannotBeOvertaken) {
  Rng rng(3);
  for (int trial = 0; trial < 10; ++trial) {
    TextTree tree;
    LuaPolicyOptions options = TestOptions();
    const int samples = 8 + static_cast<int>(rng.UniformInt(12));
    options.params["samples"] = samples;
    options.params["batch"] = 4;
    BANYAN_ASSERT_OK_AND_ASSIGN(
        auto policy, LuaPolicy::LoadFile(PolicyPath("voting.lua"), options, tree.Callbacks()));
    const int64_t root = tree.Add(-1, "Q: what is 6 x 7?");
    std::map<std::string, int> votes;  // the C++ reference count
    SearchStats stats;
    int stopped_at = -1;
    while (true) {
      BANYAN_ASSERT_OK_AND_ASSIGN(bool stop, policy->ShouldStop(stats));
      int first = 0, second = 0;
      for (const auto& [answer, v] : votes) {
        if (v > first) {
          second = first;
          first = v;
        } else if (v > second) {
          second = v;
        }
      }
      const int left = samples - static_cast<int>(stats.branches);
      ASSERT_EQ(stop, left <= 0 || first > second + left) << "after " << stats.branches;
      if (stop) {
        stopped_at = static_cast<int>(stats.branches);
        break;
      }
      BANYAN_ASSERT_OK_AND_ASSIGN(ExpandResult batch, policy->Expand(View(tree, root, 0), stats));
      ASSERT_EQ(batch.sample_count, std::min(4, left));
      for (int64_t i = 0; i < batch.sample_count; ++i) {
        // Mostly 42, sometimes a wrong answer, in varying phrasings.
        const int answer = rng.UniformInt(10) < 7 ? 42 : 40 + static_cast<int>(rng.UniformInt(5));
        const std::string text = rng.UniformInt(2) ? "so the answer is " + std::to_string(answer)
                                                   : "#### " + std::to_string(answer);
        const int64_t id = tree.Add(root, text);
        BANYAN_ASSERT_OK_AND_ASSIGN(double own_votes, policy->Score(View(tree, id)));
        const int expected_votes = ++votes[std::to_string(answer)];
        EXPECT_EQ(own_votes, expected_votes);
        ++stats.branches;
      }
    }
    EXPECT_GT(stopped_at, 0);
    EXPECT_LE(stopped_at, samples);
  }
}

}  // namespace
}  // namespace banyan::scripting
