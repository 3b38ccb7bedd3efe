#include "attention/reference/reference_attention.h"

#include <cmath>
#include <limits>

#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;
using testing::AttentionProblem;
using testing::MakeProblem;
using testing::MakeRandomTreePlan;
using testing::TreePlan;

// Brute force: gather every visible token of the row's path and take one softmax.
std::vector<double> BruteForceRow(const AttentionProblem& p, const TreePlan& tree, int32_t row, int32_t head,
                                  double* lse) {
  const AttentionPlan& plan = tree.plan;
  const KvLayout& layout = p.layout;
  const int32_t d = layout.head_dim;
  const int32_t group = p.options.num_q_heads / layout.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> scores;
  std::vector<std::vector<double>> values;
  for (int32_t i = plan.query_entry_indptr[row]; i < plan.query_entry_indptr[row + 1]; ++i) {
    const int32_t e = plan.query_entries[i];
    int32_t s = 0;
    while (plan.segment_entry_indptr[s + 1] <= e) ++s;
    for (int32_t t = 0; t < plan.entry_kv_limit[e]; ++t) {
      const int32_t pos = plan.segment_first_slot[s] + t;
      const int32_t page = plan.page_indices[plan.segment_page_indptr[s] + pos / plan.page_size];
      const int64_t k = layout.Offset(p.options.layer, 0, page, head / group, pos % plan.page_size);
      const int64_t v = layout.Offset(p.options.layer, 1, page, head / group, pos % plan.page_size);
      double dot = 0;
      std::vector<double> vv(d);
      for (int32_t j = 0; j < d; ++j) {
        dot += LoadAsDouble(p.q.data(), p.options.q_dtype, (int64_t{row} * p.options.num_q_heads + head) * d + j) *
               LoadAsDouble(p.kv.data(), p.options.kv_dtype, k + j);
        vv[j] = LoadAsDouble(p.kv.data(), p.options.kv_dtype, v + j);
      }
      scores.push_back(dot * scale);
      values.push_back(vv);
    }
  }
  double mx = -INFINITY;
  for (double s : scores) mx = std::max(mx, s);
  double sum = 0;
  std::vector<double> o(d, 0.0);
  for (size_t i = 0; i < scores.size(); ++i) {
    const double w = std::exp(scores[i] - mx);
    sum += w;
    for (int32_t j = 0; j < d; ++j) o[j] += w * values[i][j];
  }
  for (double& x : o) x /= sum;
  *lse = mx + std::log(sum);
  return o;
}

struct Case {
  int32_t levels, leaves, kv_heads, q_heads, head_dim;
  DType kv_dtype;
  bool prefill;
};

class ReferenceTreeTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTreeTest, MatchesBruteForceOverEachPath) {
  const Case c = GetParam();
  Rng rng(1000 + c.levels * 31 + c.leaves);
  testing::RandomTreeOptions opt;
  opt.levels = c.levels;
  opt.leaves = c.leaves;
  opt.max_length = c.prefill ? 12 : 40;
  opt.plan.prefill = c.prefill;
  opt.plan.page_size = 8;
  const TreePlan tree = MakeRandomTreePlan(opt, rng);
  testing::ProblemOptions popt{c.kv_heads, c.q_heads, c.head_dim, 2, 1, c.kv_dtype, c.kv_dtype};
  const AttentionProblem p = MakeProblem(tree, popt, rng);
  const int64_t n = int64_t{tree.plan.num_queries} * c.q_heads * c.head_dim;
  std::vector<float> out(n, NAN), lse(int64_t{tree.plan.num_queries} * c.q_heads, NAN);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, out.data(), DType::kF32, lse.data())));
  for (int32_t r = 0; r < tree.plan.num_queries; r += 1 + r / 7) {
    for (int32_t h = 0; h < c.q_heads; ++h) {
      double want_lse = 0;
      const std::vector<double> want = BruteForceRow(p, tree, r, h, &want_lse);
      for (int32_t j = 0; j < c.head_dim; ++j) {
        ASSERT_NEAR(out[(int64_t{r} * c.q_heads + h) * c.head_dim + j], want[j], 1e-5) << r << " " << h;
      }
      ASSERT_NEAR(lse[int64_t{r} * c.q_heads + h], want_lse, 1e-4);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Trees, ReferenceTreeTest,
                         ::testing::Values(Case{1, 1, 1, 1, 64, DType::kF32, false},
                                           Case{2, 9, 2, 8, 128, DType::kBf16, false},
                                           Case{3, 20, 1, 4, 64, DType::kF16, false},
                                           Case{5, 13, 2, 2, 128, DType::kF32, false},
                                           Case{2, 5, 2, 8, 64, DType::kBf16, true},
                                           Case{3, 4, 1, 1, 128, DType::kF32, true}));

TEST(ReferenceMergeTest, SplitAndMergeEqualsWhole) {
  Rng rng(5);
  const TreePlan tree = testing::BuildTreePlan({{-1, 77}}, {}, rng);
  const AttentionProblem p = MakeProblem(tree, {1, 1, 64, 1, 0, DType::kF32, DType::kF32}, rng);
  const KvSource kv{p.layout, DType::kF32, p.kv.data(), 0};
  std::vector<double> q(64);
  for (double& x : q) x = rng.Normal();
  const absl::Span<const int32_t> pages(tree.plan.page_indices);
  const int32_t first = tree.plan.segment_first_slot[0];
  const Partial whole = ReferenceSegmentPartial(kv, pages, first, 77, q, 0, 0.125);
  const Partial a = ReferenceSegmentPartial(kv, pages, first, 30, q, 0, 0.125);
  const Partial b = ReferenceSegmentPartial(kv, pages, first + 30, 47, q, 0, 0.125);
  Partial empty;
  empty.o.assign(64, 0.0);
  empty.lse = -std::numeric_limits<double>::infinity();
  const Partial merged = ReferenceMerge({a, empty, b});
  EXPECT_NEAR(merged.lse, whole.lse, 1e-12);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(merged.o[i], whole.o[i], 1e-12);
  const Partial none = ReferenceMerge({empty, empty});
  EXPECT_EQ(none.lse, -std::numeric_limits<double>::infinity());
}

TEST(ReferenceDecodeTest, MatchesSingleSegmentPlan) {
  Rng rng(9);
  testing::PlanOptions popt;
  popt.random_first_slot = false;
  const TreePlan tree = testing::BuildTreePlan({{-1, 101}}, popt, rng);
  const AttentionProblem p = MakeProblem(tree, {2, 8, 128, 1, 0, DType::kBf16, DType::kBf16}, rng);
  std::vector<float> out_plan(8 * 128), out_dense(8 * 128), lse_plan(8);
  std::vector<double> lse_dense(8);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, out_plan.data(), DType::kF32, lse_plan.data())));
  const KvSource kv{p.layout, DType::kBf16, p.kv.data(), 0};
  BANYAN_ASSERT_OK(ReferencePagedDecode(kv, tree.plan.page_indices, 101, p.q.data(), DType::kBf16, 8,
                                        1 / std::sqrt(128.0), out_dense.data(), DType::kF32, lse_dense.data()));
  for (int i = 0; i < 8 * 128; ++i) EXPECT_NEAR(out_plan[i], out_dense[i], 1e-6);
  for (int h = 0; h < 8; ++h) EXPECT_NEAR(lse_plan[h], lse_dense[h], 1e-5);
  EXPECT_THAT(ReferencePagedDecode(kv, tree.plan.page_indices, 100000, p.q.data(), DType::kBf16, 8, 0.1,
                                   out_dense.data(), DType::kF32, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pages cannot hold")));
}

TEST(ValidateAttentionArgsTest, RejectsBadArguments) {
  Rng rng(3);
  const TreePlan tree = MakeRandomTreePlan({}, rng);
  const AttentionProblem p = MakeProblem(tree, {2, 4, 64, 2, 1, DType::kBf16, DType::kBf16}, rng);
  std::vector<float> out(int64_t{tree.plan.num_queries} * 4 * 64);
  const AttentionArgs good = p.Args(tree.plan, out.data(), DType::kF32, nullptr);
  BANYAN_EXPECT_OK(ValidateAttentionArgs(good));
  auto expect_bad = [&](AttentionArgs a, const char* what) {
    EXPECT_THAT(ValidateAttentionArgs(a), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
    EXPECT_THAT(ReferenceAttention(a), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(what)));
  };
  AttentionArgs a = good;
  a.plan = nullptr;
  expect_bad(a, "plan is null");
  a = good;
  a.layout.head_dim = 96;
  expect_bad(a, "head_dim");
  a = good;
  a.num_q_heads = 3;
  expect_bad(a, "multiple of num_kv_heads");
  a = good;
  a.layer = 2;
  expect_bad(a, "layer 2");
  a = good;
  a.layout.dtype_bytes = 4;
  expect_bad(a, "dtype_bytes");
  a = good;
  a.layout.num_pages = 1;
  expect_bad(a, "page id");
  a = good;
  a.scale = NAN;
  expect_bad(a, "scale");
  a = good;
  a.q = nullptr;
  expect_bad(a, "non-null");
  a = good;
  a.layout.page_size = 8;
  expect_bad(a, "page_size");
  AttentionPlan broken = tree.plan;
  broken.entry_kv_limit[0] = 0;
  a = good;
  a.plan = &broken;
  expect_bad(a, "kv limit out of range");
  // kPlanValidated skips only the O(plan) checks (the caller made them).
  BANYAN_EXPECT_OK(ValidateAttentionArgs(good, PlanCheck::kPlanValidated));
  a = good;
  a.layout.head_dim = 96;
  EXPECT_THAT(ValidateAttentionArgs(a, PlanCheck::kPlanValidated),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("head_dim")));
  a = good;
  a.layout.page_size = 8;
  EXPECT_THAT(ValidateAttentionArgs(a, PlanCheck::kPlanValidated),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_size")));
  a = good;
  a.plan = nullptr;
  EXPECT_THAT(ValidateAttentionArgs(a, PlanCheck::kPlanValidated),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("plan is null")));
}

}  // namespace
}  // namespace banyan::attention
