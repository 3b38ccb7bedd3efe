// GPU tests: every kernel path against the double CPU reference on fresh
// random inputs and random plans, outputs poisoned (NaN) before each run.
#include "attention/tree_attention.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention/next_decode_plan.h"
#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;
using testing::RelativeError;
using testing::ToDoubles;

struct GpuCase {
  int32_t levels, leaves, max_length, kv_heads, q_heads, head_dim;
  DType kv_dtype, q_dtype, out_dtype;
  bool prefill;
  PathChoice path;
  int32_t page_size;
  // PlanOptions::shuffle_run, 0 for page ids in order (leaf by leaf: whole
  // 64-token tiles of consecutive pages, the TMA kernels' one-box loads).
  int32_t shuffle_run = 1;
};

// Device copies of one problem and its outputs.
struct DeviceProblem {
  gpu::DeviceBuffer kv, q, out, lse;
};

absl::StatusOr<DeviceProblem> Upload(const testing::AttentionProblem& p, int64_t out_bytes, int64_t lse_count) {
  DeviceProblem d;
  BANYAN_ASSIGN_OR_RETURN(d.kv, gpu::DeviceBuffer::Allocate(p.kv.size()));
  BANYAN_ASSIGN_OR_RETURN(d.q, gpu::DeviceBuffer::Allocate(p.q.size()));
  BANYAN_ASSIGN_OR_RETURN(d.out, gpu::DeviceBuffer::Allocate(out_bytes));
  BANYAN_ASSIGN_OR_RETURN(d.lse, gpu::DeviceBuffer::Allocate(lse_count * 4));
  BANYAN_RETURN_IF_ERROR(d.kv.CopyFromHost(p.kv.data(), p.kv.size()));
  BANYAN_RETURN_IF_ERROR(d.q.CopyFromHost(p.q.data(), p.q.size()));
  return d;
}

// Relative errors of a run's fp32 out and lse (on the device in d) against
// the reference's.
struct RunErrors {
  double out, lse;
};
absl::StatusOr<RunErrors> ErrorsAgainst(const DeviceProblem& d, const std::vector<float>& want,
                                        const std::vector<float>& want_lse) {
  const int64_t n = static_cast<int64_t>(want.size()), nl = static_cast<int64_t>(want_lse.size());
  std::vector<float> got(n), got_lse(nl);
  BANYAN_RETURN_IF_ERROR(d.out.CopyToHost(got.data(), n * 4));
  BANYAN_RETURN_IF_ERROR(d.lse.CopyToHost(got_lse.data(), nl * 4));
  return RunErrors{
      RelativeError(ToDoubles(got.data(), DType::kF32, n), ToDoubles(want.data(), DType::kF32, n)),
      RelativeError(ToDoubles(got_lse.data(), DType::kF32, nl), ToDoubles(want_lse.data(), DType::kF32, nl))};
}

// A random bf16 decode problem over `tree` with its fp32 reference out and
// lse, and its device copies (fp32 outputs).
struct DecodeProblem {
  testing::AttentionProblem p;
  std::vector<float> want, want_lse;
  DeviceProblem d;
};
absl::StatusOr<DecodeProblem> MakeDecodeProblem(const testing::TreePlan& tree, int32_t kv_heads, int32_t q_heads,
                                                int32_t head_dim, Rng& rng) {
  DecodeProblem x;
  x.p = testing::MakeProblem(tree, {kv_heads, q_heads, head_dim, 2, 1, DType::kBf16, DType::kBf16}, rng);
  const int64_t nl = int64_t{tree.plan.num_queries} * q_heads, n = nl * head_dim;
  x.want.resize(n);
  x.want_lse.resize(nl);
  BANYAN_RETURN_IF_ERROR(ReferenceAttention(x.p.Args(tree.plan, x.want.data(), DType::kF32, x.want_lse.data())));
  BANYAN_ASSIGN_OR_RETURN(x.d, Upload(x.p, n * 4, nl));
  return x;
}

// Its arguments on the device, outputs poisoned (NaN) on `stream` first.
absl::StatusOr<AttentionArgs> PoisonedArgs(DecodeProblem& x, const AttentionPlan& plan, cudaStream_t stream) {
  BANYAN_RETURN_IF_ERROR(x.d.out.Fill(0xff, stream));
  BANYAN_RETURN_IF_ERROR(x.d.lse.Fill(0xff, stream));
  AttentionArgs args = x.p.Args(plan, x.d.out.data(), DType::kF32, x.d.lse.As<float>());
  args.kv_pool = x.d.kv.data();
  args.q = x.d.q.data();
  return args;
}

// BANYAN_ATTENTION_TEST_CONFIGS="auto,narrow,..." runs only the named kernel
// configurations of MatchesReference (all when unset), e.g. to keep the
// cooperative one-launch configurations out of a sanitizer run.
bool ConfigSelected(const std::string& name) {
  const char* only = std::getenv("BANYAN_ATTENTION_TEST_CONFIGS");
  if (only == nullptr || *only == '\0') return true;
  const std::string list = std::string(",") + only + ",";
  return list.find("," + name + ",") != std::string::npos;
}

class TreeAttentionGpuTest : public ::testing::TestWithParam<GpuCase> {};

TEST_P(TreeAttentionGpuTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const GpuCase c = GetParam();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  for (int trial = 0; trial < 2; ++trial) {
    Rng rng(uint64_t{0x5eed} + trial * 7919 + c.leaves * 31 + c.levels * 3 + c.head_dim + static_cast<int>(c.path));
    testing::RandomTreeOptions opt;
    opt.levels = c.levels;
    opt.leaves = c.leaves;
    opt.max_length = c.max_length;
    opt.plan.prefill = c.prefill;
    opt.plan.page_size = c.page_size;
    opt.plan.shuffle_pages = c.shuffle_run > 0;
    opt.plan.shuffle_run = std::max(1, c.shuffle_run);
    const testing::TreePlan tree = testing::MakeRandomTreePlan(opt, rng);
    // NaN in every pool slot outside the plan's segments: no kernel may let
    // the KV around its tokens (whole pages, whole tiles) into its sums. The
    // second trial scales each page's keys by its own factor (2^-3 .. 2^3), so
    // that rows' running maxima jump by more than the lazy rescaling's slack.
    const testing::AttentionProblem p = testing::MakeProblem(
        tree,
        {c.kv_heads, c.q_heads, c.head_dim, 2, 1, c.kv_dtype, c.q_dtype, /*poison_unused_slots=*/true,
         /*page_key_scales=*/trial == 1},
        rng);
    const int64_t n = int64_t{tree.plan.num_queries} * c.q_heads * c.head_dim;
    const int64_t nl = int64_t{tree.plan.num_queries} * c.q_heads;
    std::vector<float> want(n), want_lse(nl);
    BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, want_lse.data())));
    BANYAN_ASSERT_OK_AND_ASSIGN(DeviceProblem d, Upload(p, n * DTypeSize(c.out_dtype), nl));
    // The default kernel (kAuto: wgmma where available) and kNarrow with each
    // merge path: a programmatic dependent launch (default), one cooperative
    // launch merging after a grid barrier (onelaunch), merged inside the
    // persistent kernel by the CTA of a row's last item (fused), a plain
    // second launch with every item draining its own KV pipeline (unchained).
    // kNarrow runs small items in groups and each CTA's first item from its
    // head by default; nohead-nogroup turns both off. kTma at head dim 64 gives
    // light items CTAs of their own where the model says so; tma-light8 always
    // (8 CTAs, where a plan has light and heavy items), tma-nolight never.
    // cluster / cluster16 / cluster2: one launch of thread-block clusters (8,
    // 16 or 2 CTAs), each merging its own rows (kTma only; elsewhere the
    // defaults; with 2 most clusters own more rows than they have warps, the
    // merge's batched path).
    struct Config {
      const char* name;
      KernelVariant variant;
      bool fused, overlap, chain, grid;
      bool head = true, group = true;
      int32_t light_ctas = -1;
      bool cluster = false;
      int32_t cluster_size = TreeAttention::kClusterSize;
    };
    for (const Config& config :
         {Config{"auto", KernelVariant::kAuto, false, true, true, false},
          Config{"tma-light8", KernelVariant::kTma, false, true, true, false, true, true, 8},
          Config{"tma-nolight", KernelVariant::kTma, false, true, true, false, true, true, 0},
          Config{"auto-onelaunch", KernelVariant::kAuto, false, false, true, true},
          Config{"narrow", KernelVariant::kNarrow, false, true, true, false},
          Config{"narrow-onelaunch", KernelVariant::kNarrow, false, false, true, true},
          Config{"narrow-fused", KernelVariant::kNarrow, true, false, true, false},
          Config{"narrow-plain-unchained", KernelVariant::kNarrow, false, false, false, false},
          Config{"narrow-nohead-nogroup", KernelVariant::kNarrow, false, true, true, false, false, false},
          Config{"cluster", KernelVariant::kAuto, false, true, true, false, true, true, -1, true},
          Config{"cluster16", KernelVariant::kAuto, false, true, true, false, true, true, -1, true, 16},
          Config{"cluster2", KernelVariant::kAuto, false, true, true, false, true, true, -1, true, 2}}) {
      if (!ConfigSelected(config.name)) continue;
      if (config.variant == KernelVariant::kTma && !runner->wgmma_available()) continue;
      if (config.cluster && !runner->cluster_available()) continue;
      const char* merge = config.name;
      runner->set_variant(config.variant);
      runner->set_chain_items(config.chain);
      runner->set_grid_merge(config.grid);
      runner->set_cta_head(config.head);
      runner->set_group_items(config.group);
      runner->set_light_ctas(config.light_ctas);
      runner->set_cluster_merge(config.cluster);
      runner->set_cluster_size(config.cluster_size);
      BANYAN_ASSERT_OK(d.out.Fill(0xff, stream.get()));  // NaN in every float dtype
      BANYAN_ASSERT_OK(d.lse.Fill(0xff, stream.get()));
      AttentionArgs args = p.Args(tree.plan, d.out.data(), c.out_dtype, d.lse.As<float>());
      args.kv_pool = d.kv.data();
      args.q = d.q.data();
      runner->set_fused_merge(config.fused);
      runner->set_overlap_merge(config.overlap);
      BANYAN_ASSERT_OK(runner->Attend(args, c.path, stream.get()));
      BANYAN_ASSERT_OK(stream.Synchronize());
      std::vector<uint8_t> got(n * DTypeSize(c.out_dtype));
      std::vector<float> got_lse(nl);
      BANYAN_ASSERT_OK(d.out.CopyToHost(got.data(), got.size()));
      BANYAN_ASSERT_OK(d.lse.CopyToHost(got_lse.data(), nl * 4));
      const bool wide = c.kv_dtype == DType::kF32 && c.q_dtype == DType::kF32 && c.out_dtype == DType::kF32;
      const double err = RelativeError(ToDoubles(got.data(), c.out_dtype, n), ToDoubles(want.data(), DType::kF32, n));
      const double lse_err =
          RelativeError(ToDoubles(got_lse.data(), DType::kF32, nl), ToDoubles(want_lse.data(), DType::kF32, nl));
      int32_t grouped = 0;
      for (const WorkItem& it : runner->work_plan().items) grouped += it.group;
      std::printf(
          "[ case ] %s rows %d entries %d items %zu grouped %d light_ctas %d cluster_grid %d rel_err %.3g lse_rel_err "
          "%.3g\n",
          merge, tree.plan.num_queries, tree.plan.num_entries(), runner->work_plan().items.size(), grouped,
          runner->work_plan().light_ctas(runner->grid_size()),
          runner->cluster_placed() ? runner->grid_size() : 0, err, lse_err);
      EXPECT_LT(err, wide ? 1e-4 : 1e-2) << "rows " << tree.plan.num_queries;
      EXPECT_LT(lse_err, wide ? 1e-5 : 2e-3);
    }
  }
}

constexpr DType kB = DType::kBf16, kH = DType::kF16, kF = DType::kF32;
INSTANTIATE_TEST_SUITE_P(
    RandomPlans, TreeAttentionGpuTest,
    ::testing::Values(
        // levels, leaves, max_len, kv_heads, q_heads, D, kv, q, out, prefill, path, page_size
        GpuCase{1, 1, 700, 1, 1, 128, kB, kB, kF, false, PathChoice::kAuto, 16},
        GpuCase{2, 64, 300, 1, 8, 128, kB, kB, kB, false, PathChoice::kAuto, 16},
        GpuCase{2, 256, 200, 8, 32, 128, kB, kB, kF, false, PathChoice::kAuto, 16},
        GpuCase{3, 100, 150, 2, 8, 64, kH, kH, kH, false, PathChoice::kAuto, 16},
        GpuCase{4, 300, 90, 1, 4, 128, kB, kF, kF, false, PathChoice::kBatched, 7},
        GpuCase{5, 500, 60, 2, 2, 64, kB, kB, kF, false, PathChoice::kAuto, 16},
        GpuCase{2, 4096, 24, 1, 8, 64, kB, kB, kF, false, PathChoice::kAuto, 16},
        GpuCase{3, 80, 120, 1, 8, 128, kB, kB, kF, false, PathChoice::kPerSequence, 16},
        GpuCase{3, 80, 120, 1, 8, 128, kB, kB, kF, false, PathChoice::kFlattened, 16},
        GpuCase{2, 40, 200, 2, 8, 64, kH, kH, kF, false, PathChoice::kFlattened, 5},
        GpuCase{3, 50, 100, 2, 8, 128, kF, kF, kF, false, PathChoice::kAuto, 16},
        GpuCase{2, 30, 90, 1, 4, 64, kF, kF, kF, false, PathChoice::kAuto, 8},
        GpuCase{1, 2, 3000, 1, 80, 128, kB, kB, kF, false, PathChoice::kAuto, 16},
        GpuCase{2, 6, 100, 1, 8, 128, kB, kB, kF, true, PathChoice::kAuto, 16},
        GpuCase{3, 4, 70, 2, 8, 64, kH, kH, kF, true, PathChoice::kAuto, 16},
        GpuCase{2, 5, 80, 2, 4, 128, kF, kF, kF, true, PathChoice::kAuto, 16},
        // One token per row (one level of one-token leaves): the gather path.
        GpuCase{1, 300, 1, 8, 32, 64, kB, kB, kB, false, PathChoice::kAuto, 16},
        GpuCase{1, 70, 1, 2, 8, 128, kH, kH, kF, false, PathChoice::kAuto, 8},
        GpuCase{1, 33, 1, 1, 4, 64, kF, kF, kF, false, PathChoice::kAuto, 16},
        // D 64, 16-bit KV, pages of 8, 32 and 128 slots: the TMA kernel's page boxes at each (light warps and
        // heavy tiles: eight 8-slot boxes, two 32-slot boxes, 64 slots inside a 128-slot page).
        GpuCase{3, 120, 160, 2, 8, 64, kB, kB, kF, false, PathChoice::kAuto, 8},
        GpuCase{2, 90, 200, 2, 8, 64, kB, kB, kF, false, PathChoice::kAuto, 32},
        GpuCase{3, 60, 300, 1, 4, 64, kH, kH, kF, false, PathChoice::kAuto, 128},
        // Page ids in order (as a fresh pool gives them) and in tile-sized runs: whole tiles in one box each,
        // also in light CTAs (tma-light8) at D 128 (shared rings, the lean register split) and at D 64.
        GpuCase{2, 256, 200, 8, 32, 128, kB, kB, kF, false, PathChoice::kAuto, 16, 0},
        GpuCase{3, 90, 260, 2, 8, 128, kH, kH, kF, false, PathChoice::kAuto, 8, 8},
        GpuCase{2, 200, 150, 8, 32, 64, kB, kB, kF, false, PathChoice::kAuto, 16, 0}));

// The decode loops' trees: the engine's shape (one 1,200-token prefix, 96
// leaves; h32/8, D 64) and a 3-level one (h8/2, D 128).
struct DecodeShape {
  std::vector<int32_t> fanout, length;
  int32_t kv_heads, q_heads, head_dim;
};
std::vector<DecodeShape> DecodeShapes() {
  return {DecodeShape{{1, 96}, {1200, 1}, 8, 32, 64}, DecodeShape{{1, 4, 16}, {700, 300, 1}, 2, 8, 128}};
}

// A decode loop on one runner: the same tree with every leaf a token longer
// at each step (new KV, queries, page ids and first slots), the engine's
// shape (h32/8, D 64, bf16) and a 3-level one. The runner refreshes its work
// plan on most steps (WorkPlanner) and every step matches the reference.
TEST(TreeAttentionGpuDecodeTest, RefreshedPlansMatchTheReferenceEveryStep) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  for (const DecodeShape& shape : DecodeShapes()) {
    BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
    Rng rng(shape.fanout.back() * 11 + shape.head_dim);
    std::vector<testing::TreeNode> nodes = testing::UniformTree(shape.fanout, shape.length);
    std::vector<bool> inner(nodes.size(), false);
    for (const testing::TreeNode& n : nodes) {
      if (n.parent >= 0) inner[n.parent] = true;
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!inner[i]) nodes[i].length = 1 + static_cast<int32_t>(rng.UniformInt(100));
    }
    int refreshed = 0;
    for (int step = 0; step < 10; ++step) {
      const testing::TreePlan tree = testing::BuildTreePlan(nodes, {}, rng);
      BANYAN_ASSERT_OK_AND_ASSIGN(DecodeProblem x,
                                  MakeDecodeProblem(tree, shape.kv_heads, shape.q_heads, shape.head_dim, rng));
      BANYAN_ASSERT_OK_AND_ASSIGN(const AttentionArgs args, PoisonedArgs(x, tree.plan, stream.get()));
      BANYAN_ASSERT_OK(runner->Attend(args, PathChoice::kAuto, stream.get()));
      BANYAN_ASSERT_OK(stream.Synchronize());
      refreshed += runner->plan_refreshed() ? 1 : 0;
      BANYAN_ASSERT_OK_AND_ASSIGN(const RunErrors errors, ErrorsAgainst(x.d, x.want, x.want_lse));
      const double err = errors.out, lse_err = errors.lse;
      std::printf("[ step ] levels %zu step %d refreshed %d items %zu rel_err %.3g lse_rel_err %.3g\n",
                  shape.fanout.size(), step, runner->plan_refreshed() ? 1 : 0, runner->work_plan().items.size(), err,
                  lse_err);
      EXPECT_LT(err, 1e-2) << "step " << step;
      EXPECT_LT(lse_err, 2e-3) << "step " << step;
      for (size_t i = 0; i < nodes.size(); ++i) {
        if (!inner[i]) ++nodes[i].length;
      }
    }
    EXPECT_GE(refreshed, 6);
  }
}

// Long-context decode placed from whole runs (WorkPlan::placement): stream-K
// (runs cut into unequal pieces over every CTA) and, by default for these
// memory-bound plans, one wave of equal pieces; a few sequences of 34K-60K
// tokens (ragged, unaligned starts, scattered pages), head dims 64 and 128,
// GQA 4:1 and 8:1, on the tensor-core path and the SIMT one, against the
// reference.
TEST(TreeAttentionGpuDecodeTest, LongRunPlansMatchTheReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  struct Case {
    int32_t seqs, kv_heads, q_heads, head_dim;
    PathChoice path;
  };
  for (const Case& c : {Case{1, 8, 32, 128, PathChoice::kAuto}, Case{3, 2, 16, 64, PathChoice::kAuto},
                        Case{2, 4, 16, 128, PathChoice::kFlattened}, Case{3, 2, 8, 64, PathChoice::kPerSequence}}) {
    SCOPED_TRACE(::testing::Message() << "seqs " << c.seqs << " h" << c.q_heads << "/" << c.kv_heads << " D"
                                      << c.head_dim);
    Rng rng(c.seqs * 101 + c.head_dim);
    std::vector<testing::TreeNode> nodes;
    for (int32_t s = 0; s < c.seqs; ++s) nodes.push_back({-1, 34000 + static_cast<int32_t>(rng.UniformInt(26000))});
    const testing::TreePlan tree = testing::BuildTreePlan(nodes, {}, rng);
    BANYAN_ASSERT_OK_AND_ASSIGN(DecodeProblem x, MakeDecodeProblem(tree, c.kv_heads, c.q_heads, c.head_dim, rng));
    for (const StreamKMode mode : {StreamKMode::kAlways, StreamKMode::kAuto}) {
      BANYAN_ASSERT_OK_AND_ASSIGN(const AttentionArgs args, PoisonedArgs(x, tree.plan, stream.get()));
      BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
      runner->set_stream_k(mode);
      BANYAN_ASSERT_OK(runner->Attend(args, c.path, stream.get()));
      BANYAN_ASSERT_OK(stream.Synchronize());
      const Placement placement = runner->work_plan().placement;
      EXPECT_EQ(placement, mode == StreamKMode::kAlways ? Placement::kStreamK : Placement::kOneWave);
      BANYAN_ASSERT_OK_AND_ASSIGN(const RunErrors errors, ErrorsAgainst(x.d, x.want, x.want_lse));
      const double err = errors.out, lse_err = errors.lse;
      std::printf("[ runs ] seqs %d h%d/%d D%d placement %d items %zu rel_err %.3g lse_rel_err %.3g\n", c.seqs,
                  c.q_heads, c.kv_heads, c.head_dim, static_cast<int>(placement), runner->work_plan().items.size(), err,
                  lse_err);
      EXPECT_LT(err, 1e-2);
      EXPECT_LT(lse_err, 2e-3);
    }
  }
}

// PrepareAhead after each step's Run: the next Prepare keeps the guess where
// the next plan is it (every leaf one token longer), plans afresh where it is
// not (step 5: one leaf did not grow), and every step matches the reference.
TEST(TreeAttentionGpuDecodeTest, PlansAheadAndKeepsTheGuessWhereItHolds) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  for (const DecodeShape& shape : DecodeShapes()) {
    BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
    Rng rng(shape.fanout.back() * 13 + shape.head_dim);
    testing::PlanOptions plan_options;
    plan_options.random_first_slot = false;  // the leaves start pages: 15 steps before one needs a new page
    const testing::TreePlan tree =
        testing::BuildTreePlan(testing::UniformTree(shape.fanout, shape.length), plan_options, rng);
    const testing::ProblemOptions options{shape.kv_heads, shape.q_heads, shape.head_dim, 2, 1,
                                          DType::kBf16,   DType::kBf16};
    const testing::AttentionProblem p = testing::MakeProblem(tree, options, rng);  // every pool slot random
    const int64_t n = int64_t{tree.plan.num_queries} * shape.q_heads * shape.head_dim;
    BANYAN_ASSERT_OK_AND_ASSIGN(DeviceProblem d, Upload(p, n * 4, 1));
    AttentionPlan plan = tree.plan, guess;
    int kept = 0;
    for (int step = 0; step < 10; ++step) {
      AttentionArgs args = p.Args(plan, d.out.data(), DType::kF32, nullptr);
      args.kv_pool = d.kv.data();
      args.q = d.q.data();
      std::vector<float> want(n);
      BANYAN_ASSERT_OK(ReferenceAttention(p.Args(plan, want.data(), DType::kF32, nullptr)));
      BANYAN_ASSERT_OK(d.out.Fill(0xff, stream.get()));  // NaN
      BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get()));
      EXPECT_EQ(runner->last_prepared_ahead(), step != 0 && step != 5) << "step " << step;
      kept += runner->last_prepared_ahead() ? 1 : 0;
      BANYAN_ASSERT_OK(runner->Run(args, stream.get()));
      BANYAN_ASSERT_OK(runner->PrepareAhead(args, PathChoice::kAuto, stream.get()));
      EXPECT_THAT(runner->Run(args, stream.get()), StatusIs(absl::StatusCode::kFailedPrecondition));
      BANYAN_ASSERT_OK(stream.Synchronize());
      std::vector<float> got(n);
      BANYAN_ASSERT_OK(d.out.CopyToHost(got.data(), n * 4));
      const double err = RelativeError(ToDoubles(got.data(), kF, n), ToDoubles(want.data(), kF, n));
      EXPECT_LT(err, 1e-2) << "head dim " << shape.head_dim << " step " << step;
      ASSERT_TRUE(PredictNextDecodePlan(plan, &guess)) << "step " << step;
      plan = guess;
      if (step == 4) {  // the last leaf does not grow: not the guess
        const int32_t s = plan.num_segments() - 1;
        --plan.segment_length[s];
        --plan.entry_kv_limit[plan.segment_entry_indptr[s]];
        ASSERT_EQ(plan.Validate(), "");
      }
    }
    EXPECT_EQ(kept, 8);
  }
}

TEST(TreeAttentionGpuApiTest, GraphCaptureAndErrors) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  Rng rng(99);
  testing::RandomTreeOptions opt;
  opt.levels = 3;
  opt.leaves = 64;
  opt.max_length = 200;
  const testing::TreePlan tree = testing::MakeRandomTreePlan(opt, rng);
  const testing::AttentionProblem p = testing::MakeProblem(tree, {8, 32, 128, 2, 1, kB, kB}, rng);
  const int64_t n = int64_t{tree.plan.num_queries} * 32 * 128;
  std::vector<float> want(n);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), kF, nullptr)));
  BANYAN_ASSERT_OK_AND_ASSIGN(DeviceProblem d, Upload(p, n * 4, 1));
  AttentionArgs args = p.Args(tree.plan, d.out.data(), kF, nullptr);
  args.kv_pool = d.kv.data();
  args.q = d.q.data();
  EXPECT_THAT(runner->Run(args, stream.get()), StatusIs(absl::StatusCode::kFailedPrecondition));
  AttentionArgs bad = args;
  bad.layout.head_dim = 96;
  EXPECT_THAT(runner->Prepare(bad, PathChoice::kAuto, stream.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(runner->Prepare(bad, PathChoice::kAuto, stream.get(), PlanCheck::kPlanValidated),
              StatusIs(absl::StatusCode::kInvalidArgument));
  AttentionPlan broken = tree.plan;
  broken.entry_kv_limit[0] = 0;
  AttentionArgs bad_plan = args;
  bad_plan.plan = &broken;
  EXPECT_THAT(runner->Prepare(bad_plan, PathChoice::kAuto, stream.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  // The graph below runs a plan prepared without repeating the plan checks (made here).
  BANYAN_ASSERT_OK(ValidateAttentionArgs(args));
  BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get(), PlanCheck::kPlanValidated));
  BANYAN_ASSERT_OK(stream.Synchronize());
  // Captured twice: two launches (the merge a programmatic dependent launch),
  // then one cooperative launch with the grid merge; each graph replayed twice.
  for (const bool grid_merge : {false, true}) {
    if (grid_merge && !ConfigSelected("auto-onelaunch")) continue;
    runner->set_grid_merge(grid_merge);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const absl::Status run = runner->Run(args, stream.get());
    ASSERT_EQ(cudaStreamEndCapture(stream.get(), &graph), cudaSuccess);
    BANYAN_ASSERT_OK(run);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
      BANYAN_ASSERT_OK(d.out.Fill(0xff, stream.get()));
      ASSERT_EQ(cudaGraphLaunch(exec, stream.get()), cudaSuccess);
      BANYAN_ASSERT_OK(stream.Synchronize());
      std::vector<float> got(n);
      BANYAN_ASSERT_OK(d.out.CopyToHost(got.data(), n * 4));
      EXPECT_LT(RelativeError(ToDoubles(got.data(), kF, n), ToDoubles(want.data(), kF, n)), 1e-2)
          << "grid merge " << grid_merge << " replay " << replay;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  runner->set_grid_merge(false);
}

TEST(TreeAttentionGpuApiTest, BifurcatedMatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  Rng rng(5);
  testing::PlanOptions popt;
  const testing::TreePlan tree = testing::BuildTreePlan(testing::UniformTree({1, 48}, {1000, 37}), popt, rng);
  const testing::AttentionProblem p = testing::MakeProblem(tree, {1, 8, 128, 1, 0, kB, kB}, rng);
  const AttentionPlan& plan = tree.plan;
  auto run_of = [&](int32_t s) {
    PagedRun r;
    r.pages.assign(plan.page_indices.begin() + plan.segment_page_indptr[s],
                   plan.page_indices.begin() + plan.segment_page_indptr[s + 1]);
    r.first_slot = plan.segment_first_slot[s];
    r.length = plan.segment_length[s];
    return r;
  };
  std::vector<PagedRun> samples;
  for (int32_t s = 1; s <= 48; ++s) samples.push_back(run_of(s));
  const int64_t n = 48 * 8 * 128;
  std::vector<float> want(n);
  BANYAN_ASSERT_OK(ReferenceAttention(p.Args(plan, want.data(), kF, nullptr)));
  BANYAN_ASSERT_OK_AND_ASSIGN(DeviceProblem d, Upload(p, n * 4, 1));
  BANYAN_ASSERT_OK(d.out.Fill(0xff, stream.get()));
  AttentionArgs args = p.Args(plan, d.out.data(), kF, nullptr);
  args.kv_pool = d.kv.data();
  args.q = d.q.data();
  BANYAN_ASSERT_OK(BifurcatedAttention(*runner, args, run_of(0), samples, stream.get()));
  BANYAN_ASSERT_OK(stream.Synchronize());
  std::vector<float> got(n);
  BANYAN_ASSERT_OK(d.out.CopyToHost(got.data(), n * 4));
  EXPECT_LT(RelativeError(ToDoubles(got.data(), kF, n), ToDoubles(want.data(), kF, n)), 1e-2);
}

}  // namespace
}  // namespace banyan::attention
