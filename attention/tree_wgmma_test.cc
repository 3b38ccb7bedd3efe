// GPU tests of the wgmma batched item (KernelVariant::kWgmma and the
// warp-specialized KernelVariant::kTma, sm_90a):
// random trees against the double CPU reference, outputs poisoned (NaN)
// before each run; every batched item on wgmma (narrow rows 0, the default)
// and items of <= 16 rows on the mma.sync tile of the same launch (narrow
// rows 16, items not chained), the fused merge on the first; and the forced kNarrow kernel (the
// switch back to mma.sync) on the same problems. Skipped without a GPU;
// on a GPU without the sm_90a image the variant must be refused.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/testing/random_plan.h"
#include "attention/tree_attention.h"
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

struct WgmmaCase {
  int32_t levels, leaves, max_length, kv_heads, q_heads, head_dim;
  DType kv_dtype, q_dtype, out_dtype;
  bool prefill;
  PathChoice path;
  int32_t page_size;
};

class TreeWgmmaGpuTest : public ::testing::TestWithParam<WgmmaCase> {};

TEST_P(TreeWgmmaGpuTest, MatchesReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  const WgmmaCase c = GetParam();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
  if (!runner->wgmma_available()) GTEST_SKIP() << "no sm_90a image for this device";  // VariantResolution checks why
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  for (int trial = 0; trial < 2; ++trial) {
    Rng rng(uint64_t{0x3a9} + trial * 104729 + c.leaves * 37 + c.levels * 5 + c.head_dim + c.q_heads * 11);
    testing::RandomTreeOptions opt;
    opt.levels = c.levels;
    opt.leaves = c.leaves;
    opt.max_length = c.max_length;
    opt.plan.prefill = c.prefill;
    opt.plan.page_size = c.page_size;
    const testing::TreePlan tree = testing::MakeRandomTreePlan(opt, rng);
    const testing::AttentionProblem p =
        testing::MakeProblem(tree, {c.kv_heads, c.q_heads, c.head_dim, 2, 1, c.kv_dtype, c.q_dtype}, rng);
    const int64_t n = int64_t{tree.plan.num_queries} * c.q_heads * c.head_dim;
    const int64_t nl = int64_t{tree.plan.num_queries} * c.q_heads;
    std::vector<float> want(n), want_lse(nl);
    BANYAN_ASSERT_OK(ReferenceAttention(p.Args(tree.plan, want.data(), DType::kF32, want_lse.data())));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer kv, gpu::DeviceBuffer::Allocate(p.kv.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer q, gpu::DeviceBuffer::Allocate(p.q.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Allocate(n * DTypeSize(c.out_dtype)));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer lse, gpu::DeviceBuffer::Allocate(nl * 4));
    BANYAN_ASSERT_OK(kv.CopyFromHost(p.kv.data(), p.kv.size()));
    BANYAN_ASSERT_OK(q.CopyFromHost(p.q.data(), p.q.size()));
    // narrow_rows 0: all on wgmma; 16: small items on mma.sync; -1: the forced kNarrow kernel;
    // -2: the warp-specialized TMA kernel (kTma; kWgmma where it cannot read the problem); -3: kTma
    // with the consumer warpgroups in ping-pong; -4: kTma with every small item on warpgroup 0. kTma's
    // rings: split K and V at -2, shared at -5, the page-order choice (kAuto) at -3 and -4.
    const bool tma_reads = c.q_dtype == c.kv_dtype && c.page_size >= 8 && (c.page_size & (c.page_size - 1)) == 0;
    for (int32_t narrow_rows : {0, 16, -1, -2, -3, -4, -5}) {
      BANYAN_ASSERT_OK(out.Fill(0xff, stream.get()));  // NaN in every float dtype
      BANYAN_ASSERT_OK(lse.Fill(0xff, stream.get()));
      AttentionArgs args = p.Args(tree.plan, out.data(), c.out_dtype, lse.As<float>());
      args.kv_pool = kv.data();
      args.q = q.data();
      const KernelVariant want_variant = narrow_rows == -1   ? KernelVariant::kNarrow
                                         : narrow_rows <= -2 ? (tma_reads ? KernelVariant::kTma : KernelVariant::kWgmma)
                                                             : KernelVariant::kWgmma;
      runner->set_variant(narrow_rows <= -2 ? KernelVariant::kTma : want_variant);
      runner->set_tma_pingpong(narrow_rows == -3);
      runner->set_tma_split_small(narrow_rows != -4);
      using Rings = TreeAttention::TmaRings;
      runner->set_tma_rings(narrow_rows == -2 ? Rings::kSplit : narrow_rows == -5 ? Rings::kShared : Rings::kAuto);
      runner->set_wgmma_narrow_rows(std::max(narrow_rows, 0));
      runner->set_fused_merge(narrow_rows == 0);  // both merge paths
      runner->set_chain_items(narrow_rows != 16);  // chained and unchained wgmma items
      BANYAN_ASSERT_OK(runner->Attend(args, c.path, stream.get()));
      EXPECT_EQ(runner->variant(), want_variant);
      if (want_variant == KernelVariant::kTma && (narrow_rows == -2 || narrow_rows == -5)) {
        EXPECT_EQ(runner->tma_split_kv(), narrow_rows == -2);
      }
      BANYAN_ASSERT_OK(stream.Synchronize());
      std::vector<uint8_t> got(n * DTypeSize(c.out_dtype));
      std::vector<float> got_lse(nl);
      BANYAN_ASSERT_OK(out.CopyToHost(got.data(), got.size()));
      BANYAN_ASSERT_OK(lse.CopyToHost(got_lse.data(), nl * 4));
      const double err = RelativeError(ToDoubles(got.data(), c.out_dtype, n), ToDoubles(want.data(), DType::kF32, n));
      const double lse_err =
          RelativeError(ToDoubles(got_lse.data(), DType::kF32, nl), ToDoubles(want_lse.data(), DType::kF32, nl));
      int batched = 0;
      for (const WorkItem& it : runner->work_plan().items) {
        batched += narrow_rows != -1 && it.kind == static_cast<int32_t>(ItemKind::kBatched) &&
                   it.row_count > std::max(narrow_rows, 0);
      }
      std::printf("[ case ] wgmma narrow_rows %d rows %d entries %d items %zu (wgmma %d) rel_err %.3g lse_rel_err %.3g\n",
                  narrow_rows, tree.plan.num_queries, tree.plan.num_entries(), runner->work_plan().items.size(),
                  batched, err, lse_err);
      EXPECT_LT(err, 1e-2) << "rows " << tree.plan.num_queries << " narrow_rows " << narrow_rows;
      EXPECT_LT(lse_err, 2e-3) << "narrow_rows " << narrow_rows;
    }
  }
}

constexpr DType kB = DType::kBf16, kH = DType::kF16, kF = DType::kF32;
INSTANTIATE_TEST_SUITE_P(
    RandomPlans, TreeWgmmaGpuTest,
    ::testing::Values(
        // levels, leaves, max_len, kv_heads, q_heads, D, kv, q, out, prefill, path, page_size
        WgmmaCase{2, 64, 300, 1, 8, 128, kB, kB, kB, false, PathChoice::kAuto, 16},      // GQA 8:1
        WgmmaCase{2, 256, 200, 8, 32, 128, kB, kB, kF, false, PathChoice::kAuto, 16},    // 4:1
        WgmmaCase{3, 100, 150, 2, 8, 64, kH, kH, kH, false, PathChoice::kBatched, 16},   // fp16, D 64
        WgmmaCase{3, 90, 130, 4, 4, 128, kH, kF, kF, false, PathChoice::kBatched, 16},   // 1:1, fp16
        WgmmaCase{4, 300, 90, 1, 4, 128, kB, kF, kF, false, PathChoice::kBatched, 7},    // partial pages
        WgmmaCase{5, 500, 60, 2, 2, 64, kB, kB, kF, false, PathChoice::kAuto, 16},       // 1:1, D 64
        WgmmaCase{2, 200, 100, 1, 1, 64, kB, kB, kF, false, PathChoice::kBatched, 5},    // 1:1, page 5
        WgmmaCase{2, 48, 400, 2, 16, 128, kH, kH, kF, false, PathChoice::kBatched, 16},  // 8:1, fp16
        WgmmaCase{1, 2, 3000, 1, 80, 128, kB, kB, kF, false, PathChoice::kAuto, 16},     // 80 rows / tile
        WgmmaCase{2, 6, 100, 1, 8, 128, kB, kB, kF, true, PathChoice::kBatched, 16},     // prefill (causal)
        WgmmaCase{3, 4, 70, 2, 8, 64, kH, kH, kF, true, PathChoice::kBatched, 8},
        // Pages of 32 and of more than a tile (TMA boxes inside a page, kv_tensor_map.h).
        WgmmaCase{3, 40, 300, 2, 8, 128, kB, kB, kF, false, PathChoice::kAuto, 32},
        WgmmaCase{2, 24, 500, 1, 8, 64, kH, kH, kF, false, PathChoice::kAuto, 128}));

// KV tiles per batched item of a work plan (TreeAttention's kAuto rule).
double MeanBatchedTiles(const WorkPlan& work) {
  int64_t items = 0, tiles = 0;
  for (const WorkItem& it : work.items) {
    if (it.kind != static_cast<int32_t>(ItemKind::kBatched)) continue;
    ++items;
    tiles += (it.kv_end - it.kv_begin + kKvTile - 1) / kKvTile;
  }
  return items > 0 ? static_cast<double>(tiles) / static_cast<double>(items) : 1e30;
}

TEST(TreeWgmmaGpuApiTest, VariantResolution) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto runner, TreeAttention::Create());
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  std::printf("[ info ] compute capability major %d, wgmma_available %d\n", major, runner->wgmma_available());
  if (major != 9) {
    EXPECT_FALSE(runner->wgmma_available());
  }
  Rng rng(17);
  testing::RandomTreeOptions opt;
  opt.levels = 2;
  opt.leaves = 8;
  opt.max_length = 40;
  const testing::TreePlan short_tree = testing::MakeRandomTreePlan(opt, rng);  // 1-tile items
  testing::PlanOptions popt;
  // One 16384-token prefix, 64 suffixes: long batched items (about 6 tiles per item).
  const testing::TreePlan long_tree = testing::BuildTreePlan(testing::UniformTree({1, 64}, {16384, 64}), popt, rng);
  struct Case {
    const testing::TreePlan* tree;
    int32_t kv_heads, q_heads, head_dim;
    DType kv_dtype;
  };
  for (const Case& c : {Case{&short_tree, 1, 4, 64, kB}, Case{&short_tree, 1, 4, 64, kF},
                        Case{&long_tree, 8, 32, 128, kB}}) {
    const AttentionPlan& plan = c.tree->plan;
    const testing::AttentionProblem p =
        testing::MakeProblem(*c.tree, {c.kv_heads, c.q_heads, c.head_dim, 1, 0, c.kv_dtype, c.kv_dtype}, rng);
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer kv, gpu::DeviceBuffer::Allocate(p.kv.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer q, gpu::DeviceBuffer::Allocate(p.q.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer out, gpu::DeviceBuffer::Allocate(int64_t{plan.num_queries} *
                                                                                    c.q_heads * c.head_dim * 4));
    AttentionArgs args = p.Args(plan, out.data(), kF, nullptr);
    args.kv_pool = kv.data();
    args.q = q.data();
    runner->set_variant(KernelVariant::kAuto);
    BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get()));
    const bool wgmma = runner->wgmma_available() && c.kv_dtype != kF;
    const double mean_tiles = MeanBatchedTiles(runner->work_plan());
    std::printf("[ info ] rows %d mean tiles per batched item %.2f\n", plan.num_queries, mean_tiles);
    // kAuto: kTma wherever TMA can read the problem (16-bit q of the KV dtype, page size 16 here).
    EXPECT_EQ(runner->variant(), wgmma ? KernelVariant::kTma : KernelVariant::kNarrow);
    runner->set_grid_merge(true);  // the grid merge is a kWgmma / kNarrow feature
    BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get()));
    EXPECT_NE(runner->variant(), KernelVariant::kTma);
    runner->set_grid_merge(false);
    runner->set_variant(KernelVariant::kNarrow);  // the switch back to mma.sync
    BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get()));
    EXPECT_EQ(runner->variant(), KernelVariant::kNarrow);
    // A forced Hopper variant runs where the device has wgmma (kNarrow when the
    // plan has no wgmma work) and is refused where it has not.
    auto expect_forced = [&](KernelVariant forced) {
      runner->set_variant(forced);
      if (runner->wgmma_available()) {
        BANYAN_ASSERT_OK(runner->Prepare(args, PathChoice::kAuto, stream.get()));
        EXPECT_EQ(runner->variant(), wgmma ? forced : KernelVariant::kNarrow);
      } else {
        EXPECT_THAT(runner->Prepare(args, PathChoice::kAuto, stream.get()),
                    StatusIs(absl::StatusCode::kFailedPrecondition));
      }
    };
    expect_forced(KernelVariant::kWgmma);
    expect_forced(KernelVariant::kTma);  // 16-bit q of the KV dtype, page size 16: readable by TMA
    BANYAN_ASSERT_OK(stream.Synchronize());
  }
}

}  // namespace
}  // namespace banyan::attention
