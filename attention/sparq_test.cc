// GPU tests of SparqAttention against the double reference
// (reference/sparq_reference.h) on fresh random inputs, outputs poisoned
// (NaN) before each run: the selection (positions and alpha) against
// ReferenceSparqSelect up to a few near-tied positions, the output against
// ReferenceSparqOutput of the GPU's own selection, and the second K copy
// against the host's.
#include "attention/sparq.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <vector>

#include "attention/reference/reference_attention.h"
#include "attention/reference/sparq_reference.h"
#include "attention/testing/random_plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"
#include "sdk/gpu/device_buffer.h"
#include "sdk/gpu/gpu_test_util.h"

namespace banyan::attention {
namespace {

using ::banyan::testing::StatusIs;

struct Case {
  std::vector<int32_t> lengths;
  int32_t kv_heads, q_heads, head_dim, page_size;
  DType dtype;
  SparqConfig config;  // k <= 0: length / 8 of the longest sequence
};

absl::StatusOr<gpu::DeviceBuffer> Upload(const void* data, size_t bytes) {
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer b, gpu::DeviceBuffer::Allocate(std::max<size_t>(bytes, 4)));
  BANYAN_RETURN_IF_ERROR(b.CopyFromHost(data, bytes));
  return b;
}

TEST(SparqGpuTest, MatchesTheReference) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  const std::vector<Case> cases = {
      {{20000}, 8, 32, 128, 16, DType::kBf16, {16, 0, 64, true}},
      {{9000, 3000, 14000}, 2, 8, 64, 16, DType::kBf16, {32, 0, 16, true}},
      {{12000, 700}, 4, 4, 128, 8, DType::kF16, {8, 1500, 32, false}},
      {{5000}, 1, 8, 64, 16, DType::kF16, {64, 0, 0, true}},
      {{3000, 2500}, 2, 16, 128, 16, DType::kBf16, {128, 6000, 8, true}},  // k >= length: dense
      {{6000, 100}, 2, 8, 64, 16, DType::kBf16, {16, 40, 8, true}},        // the short one leaves CTAs without tokens
      {{60000}, 1, 8, 64, 16, DType::kBf16, {16, 0, 16, true}},        // the cluster kernel's logits in global memory
      {{7000, 3000}, 2, 8, 128, 12, DType::kBf16, {16, 0, 16, true}},  // pages of 12: the eight launches
  };
  int idx = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case " << idx++);
    Rng rng(97 + idx);
    std::vector<testing::TreeNode> nodes;
    for (int32_t n : c.lengths) nodes.push_back({-1, n});
    testing::PlanOptions popt;
    popt.random_first_slot = false;
    popt.page_size = c.page_size;
    const testing::TreePlan tree = testing::BuildTreePlan(nodes, popt, rng);
    const testing::AttentionProblem p =
        testing::MakeProblem(tree, {c.kv_heads, c.q_heads, c.head_dim, 2, 1, c.dtype, c.dtype}, rng);
    const AttentionPlan& plan = tree.plan;
    const int32_t seqs = plan.num_segments();
    const int32_t max_length = *std::max_element(c.lengths.begin(), c.lengths.end());
    // Queries: one per sequence, q of segment s = query row s (BuildTreePlan numbers leaves in order).
    std::vector<int32_t> row_of(seqs);
    for (int32_t s = 0; s < seqs; ++s) row_of[s] = plan.entry_query[plan.segment_entry_indptr[s]];
    const int32_t d = c.head_dim, hq = c.q_heads;
    const size_t qbytes = DTypeSize(c.dtype);
    std::vector<uint8_t> q(static_cast<size_t>(seqs) * hq * d * qbytes);
    for (int32_t s = 0; s < seqs; ++s) {
      std::copy_n(p.q.data() + static_cast<size_t>(row_of[s]) * hq * d * qbytes, static_cast<size_t>(hq) * d * qbytes,
                  q.begin() + static_cast<size_t>(s) * hq * d * qbytes);
    }
    std::vector<uint8_t> kt(p.layout.TotalBytes() / 2);
    ReferenceFillKTransposed(p.layout, c.dtype, p.kv.data(), kt.data());
    std::vector<float> v_mean(static_cast<size_t>(seqs) * c.kv_heads * d);
    const KvSource src{p.layout, c.dtype, p.kv.data(), 1};
    for (int32_t s = 0; s < seqs; ++s) {
      const absl::Span<const int32_t> pages(plan.page_indices.data() + plan.segment_page_indptr[s],
                                            plan.segment_page_indptr[s + 1] - plan.segment_page_indptr[s]);
      BANYAN_ASSERT_OK(ReferenceValueMean(src, pages, plan.segment_length[s],
                                          v_mean.data() + static_cast<size_t>(s) * c.kv_heads * d));
    }
    SparqArgs host;
    host.layout = p.layout;
    host.kv_dtype = c.dtype;
    host.kv_pool = p.kv.data();
    host.layer = 1;
    host.num_seqs = seqs;
    host.seq_page_indptr = plan.segment_page_indptr.data();
    host.page_indices = plan.page_indices.data();
    host.seq_length = plan.segment_length.data();
    host.max_length = max_length;
    host.v_mean = v_mean.data();
    host.q = q.data();
    host.q_dtype = c.dtype;
    host.num_q_heads = hq;
    host.scale = 1.0f / std::sqrt(static_cast<float>(d));
    host.config = c.config;
    if (host.config.k <= 0) host.config.k = max_length / 8;
    std::vector<float> out(static_cast<size_t>(seqs) * hq * d);
    host.out = out.data();
    host.out_dtype = DType::kF32;
    // Device copies.
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_kv, Upload(p.kv.data(), p.kv.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_kt, Upload(kt.data(), kt.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_kt2, gpu::DeviceBuffer::Allocate(kt.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_q, Upload(q.data(), q.size()));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_vm, Upload(v_mean.data(), v_mean.size() * 4));
    BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer d_out, gpu::DeviceBuffer::Allocate(out.size() * 4));
    // The second K copy written on the device equals the host's.
    BANYAN_ASSERT_OK(WriteKTransposed(p.layout, c.dtype, d_kv.data(), d_kt2.data(), stream.get()));
    std::vector<uint8_t> kt_gpu(kt.size());
    BANYAN_ASSERT_OK(stream.Synchronize());
    BANYAN_ASSERT_OK(d_kt2.CopyToHost(kt_gpu.data(), kt_gpu.size()));
    EXPECT_TRUE(kt_gpu == kt) << "WriteKTransposed";
    SparqArgs dev = host;  // the plan arrays stay the host's: Prepare validates and uploads them
    dev.kv_pool = d_kv.data();
    dev.k_transposed = d_kt.data();
    dev.v_mean = d_vm.As<float>();
    dev.q = d_q.data();
    dev.out = d_out.data();
    // Every path: the cluster kernel at 16 and 8 CTAs, the eight launches.
    for (const int32_t path : {16, 8, -1}) {
      SCOPED_TRACE(::testing::Message() << "cluster size asked " << path);
      BANYAN_ASSERT_OK_AND_ASSIGN(auto sparq, SparqAttention::Create());
      sparq->set_cluster_size(path);
      BANYAN_ASSERT_OK(d_out.Fill(0xff, stream.get()));  // NaN
      if (path > 0 && c.page_size % 8 != 0) {
        EXPECT_THAT(sparq->Prepare(dev, stream.get()), StatusIs(absl::StatusCode::kInvalidArgument));
        continue;
      }
      BANYAN_ASSERT_OK(sparq->Prepare(dev, stream.get()));
      EXPECT_EQ(sparq->cluster_size(), std::max(path, 0));
      BANYAN_ASSERT_OK(sparq->Run(dev, stream.get()));
      BANYAN_ASSERT_OK(stream.Synchronize());
      std::vector<float> got(out.size());
      BANYAN_ASSERT_OK(d_out.CopyToHost(got.data(), got.size() * 4));
      const int32_t group = hq / c.kv_heads;
      for (int32_t s = 0; s < seqs; ++s) {
        for (int32_t h = 0; h < c.kv_heads; ++h) {
          const int32_t count = std::min(host.config.k, plan.segment_length[s]);
          SparqSelection gpu_sel;
          BANYAN_ASSERT_OK(sparq->CopySelection(s, h, plan.segment_length[s], &gpu_sel, stream.get()));
          const SparqSelection want = ReferenceSparqSelect(host, s, h);
          ASSERT_EQ(static_cast<int32_t>(want.positions.size()), count);
          EXPECT_TRUE(std::is_sorted(gpu_sel.positions.begin(), gpu_sel.positions.end()));
          EXPECT_TRUE(std::adjacent_find(gpu_sel.positions.begin(), gpu_sel.positions.end()) ==
                      gpu_sel.positions.end());
          std::vector<int32_t> only_one;
          std::set_symmetric_difference(want.positions.begin(), want.positions.end(), gpu_sel.positions.begin(),
                                        gpu_sel.positions.end(), std::back_inserter(only_one));
          // fp32 vs double approximate scores: a few positions near the k-th may swap.
          EXPECT_LE(only_one.size(), std::max<size_t>(4, count / 200)) << "seq " << s << " head " << h;
          for (int32_t j = 0; j < group; ++j) {
            EXPECT_NEAR(gpu_sel.alpha[j], want.alpha[j], 2e-3) << "seq " << s << " head " << h << " q head " << j;
          }
          // The output of the GPU's own selection.
          const std::vector<double> ref = ReferenceSparqOutput(host, s, h, gpu_sel);
          std::vector<double> mine(ref.size());
          for (size_t i = 0; i < ref.size(); ++i) {
            mine[i] = got[(static_cast<size_t>(s) * hq + static_cast<size_t>(h) * group) * d + i];
          }
          const double err = testing::RelativeError(mine, ref);
          EXPECT_LT(err, 1e-2) << "seq " << s << " head " << h;
          if (h == 0) {
            std::printf("[ sparq ] case %d cluster %d seq %d length %d k %d mismatched %zu rel_err %.3g\n", idx - 1,
                        sparq->cluster_size(), s, plan.segment_length[s], count, only_one.size(), err);
          }
        }
      }
    }
  }
}

// Bad input is refused before any kernel runs: Run without Prepare, a plan
// whose length passes its pages or names a page outside the pool (the host
// plan is validated), Run with sizes other than the prepared ones.
TEST(SparqGpuTest, BadArgumentsAreRefused) {
  BANYAN_SKIP_WITHOUT_GPU();
  BANYAN_ASSERT_OK_AND_ASSIGN(auto sparq, SparqAttention::Create());
  SparqArgs a;
  EXPECT_THAT(sparq->Run(a, nullptr), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(sparq->Prepare(a, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
  // A valid one-sequence plan of 40 tokens on 3 pages of 16, then broken copies of it.
  KvLayout layout;
  layout.num_layers = 1;
  layout.num_kv_heads = 1;
  layout.head_dim = 64;
  layout.page_size = 16;
  layout.num_pages = 4;
  layout.dtype_bytes = 2;
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::DeviceBuffer buf, gpu::DeviceBuffer::Allocate(layout.TotalBytes() + 4096));
  const int32_t indptr[2] = {0, 3}, pages[3] = {2, 0, 1};
  int32_t length[1] = {40};
  SparqArgs good;
  good.layout = layout;
  good.kv_pool = buf.data();
  good.k_transposed = buf.data();
  good.num_seqs = 1;
  good.seq_page_indptr = indptr;
  good.page_indices = pages;
  good.seq_length = length;
  good.max_length = 64;
  good.v_mean = buf.As<float>();
  good.q = buf.data();
  good.num_q_heads = 4;
  good.scale = 0.125f;
  good.config = {16, 8, 4, true};
  good.out = buf.data();
  good.out_dtype = DType::kF32;
  BANYAN_ASSERT_OK_AND_ASSIGN(gpu::Stream stream, gpu::Stream::Create());
  BANYAN_EXPECT_OK(sparq->Prepare(good, stream.get()));
  SparqArgs other = good;
  other.config.k = 9;
  EXPECT_THAT(sparq->Run(other, stream.get()), StatusIs(absl::StatusCode::kFailedPrecondition));
  length[0] = 49;  // past its 3 pages
  EXPECT_THAT(sparq->Prepare(good, stream.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sparq->Run(good, stream.get()), StatusIs(absl::StatusCode::kFailedPrecondition));
  length[0] = 40;
  const int32_t bad_pages[3] = {2, 7, 1};  // page 7 outside the pool
  SparqArgs bad = good;
  bad.page_indices = bad_pages;
  EXPECT_THAT(sparq->Prepare(bad, stream.get()), StatusIs(absl::StatusCode::kInvalidArgument));
  KvLayout fp32 = layout;
  fp32.dtype_bytes = 4;
  EXPECT_THAT(WriteKTransposed(fp32, DType::kF32, nullptr, nullptr, nullptr),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace banyan::attention
