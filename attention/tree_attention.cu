// Host side of the CUDA attention: bucketed device buffers, the upload of
// plan and work list, and the one dispatch layer that turns (KV dtype,
// head_dim) into template instantiations of the kernels in kernels/.
#include "attention/tree_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "attention/kernels/merge.cuh"
#include "attention/kernels/persistent.cuh"
#include "attention/kernels/single_token.cuh"
#include "attention/kernels/tree_tma.cuh"
#include "attention/kernels/tree_wgmma.cuh"
#include "attention/kv_tensor_map.h"
#include "attention/next_decode_plan.h"
#include "attention/work_plan_cluster.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::attention {
namespace {

template <typename T>
struct TypeTag {
  using type = T;
};

// The dispatch layer: calls fn(TypeTag<T>{}, std::integral_constant<int, D>{})
// for the KV element type and head dimension. REQUIRES: validated arguments.
template <typename Fn>
absl::Status Dispatch(DType kv_dtype, int32_t head_dim, Fn&& fn) {
  auto with_dim = [&](auto tag) -> absl::Status {
    if (head_dim == 64) return fn(tag, std::integral_constant<int, 64>{});
    if (head_dim == 128) return fn(tag, std::integral_constant<int, 128>{});
    return absl::InvalidArgumentError(absl::StrCat("attention: unsupported head_dim ", head_dim));
  };
  switch (kv_dtype) {
    case DType::kF32: return with_dim(TypeTag<float>{});
    case DType::kBf16: return with_dim(TypeTag<__nv_bfloat16>{});
    case DType::kF16: return with_dim(TypeTag<__half>{});
  }
  return absl::InvalidArgumentError("attention: unsupported KV dtype");
}

// Sets a persistent kernel's shared-memory limit; returns how many CTAs of
// `threads` threads fit on an SM.
template <typename Kernel>
absl::StatusOr<int> ConfigureKernel(Kernel* kernel, int threads, int smem_bytes) {
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  int blocks = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
  return std::max(1, blocks);
}

// The merge launch's kernel: partials as the item kernel stores them (fp32, or
// kernels::TmaPartial after the TMA kernel), every slot of a few (row, head)
// pairs preloaded (wide) or the first 4.
using MergeFn = void (*)(kernels::TreeParams);
template <int D, typename PartialT>
MergeFn MergeKernelOf(bool wide) {
  if (wide) return kernels::MergeKernel<D, 24, kernels::MergeLanes(D, true), PartialT>;
  return kernels::MergeKernel<D, 4, kernels::MergeLanes(D, false), PartialT>;
}
// tma_lean: the TMA kernel ran with the lean register split (16-bit partials at D 128 too).
template <typename T, int D>
MergeFn MergeKernelFor(bool tma, bool tma_lean, bool wide) {
  if constexpr (sizeof(T) == 2) {
    if (tma && tma_lean) return MergeKernelOf<D, kernels::TmaPartial<T, D, true>>(wide);
    if (tma) return MergeKernelOf<D, kernels::TmaPartial<T, D>>(wide);
  }
  return MergeKernelOf<D, float>(wide);
}

// Whether Run launches the TMA kernel of the lean register split (kernels::TmaProducerRegsFor).
bool TmaLean(int32_t head_dim, bool split_kv) {
  return kernels::TmaProducerRegsFor(head_dim, split_kv) == kernels::kTmaLeanProducer;
}

// The cluster-merge instantiation of the TMA kernel (set_cluster_merge; a
// cluster placement has no light CTAs, so at D 128 the one without their
// code) for the register split: lean only where that split exists (D 128).
// Prepare sizes the grid from this kernel's occupancy and Run launches it.
using TmaKernelFn = void (*)(kernels::TreeParams, CUtensorMap, CUtensorMap, int32_t, int32_t);
template <typename T, int D>
TmaKernelFn TmaClusterKernel(bool lean) {
  if constexpr (kernels::TmaProducerRegsFor(D, false) == kernels::kTmaLeanProducer) {
    if (lean) return kernels::PersistentTmaKernel<T, D, kernels::kTmaLeanProducer, false, true>;
  }
  return kernels::PersistentTmaKernel<T, D, kernels::kTmaFedProducer, D == kLightHeadDim, true>;
}

// Whether the image loaded for the current device has the sm_90a kernels.
absl::StatusOr<bool> ProbeWgmma(int device) {
  int major = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major != 9) return false;
  BANYAN_ASSIGN_OR_RETURN(gpu::DeviceBuffer flag, gpu::DeviceBuffer::Allocate(sizeof(int32_t)));
  kernels::WgmmaProbeKernel<><<<1, 1>>>(flag.As<int32_t>());
  if (cudaGetLastError() != cudaSuccess) return false;  // no image for this device: no wgmma
  int32_t value = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpy(&value, flag.data(), sizeof(value), cudaMemcpyDeviceToHost));
  return value == 1;
}

// Ints after the fused merge's counters: the grid merge's barrier.
constexpr int64_t kBarrierInts = 2;

// KV tiles per batched item, averaged over the plan's batched items
// (infinity without any).
double MeanBatchedTiles(const WorkPlan& work) {
  int64_t items = 0, tiles = 0;
  for (const WorkItem& it : work.items) {
    if (it.kind != static_cast<int32_t>(ItemKind::kBatched)) continue;
    ++items;
    tiles += it.kv_end > it.kv_begin ? (it.kv_end - it.kv_begin + kKvTile - 1) / kKvTile : 0;
  }
  return items > 0 ? static_cast<double>(tiles) / static_cast<double>(items) : HUGE_VAL;
}

// True when every query row sees exactly one KV token over all its entries
// (kernels/single_token.cuh then runs the plan); row_token then holds each
// row's token as (page id, slot), two ints per row.
bool FindSingleTokens(const AttentionPlan& plan, std::vector<int32_t>& row_token) {
  if (plan.num_queries == 0) return false;
  row_token.assign(2 * static_cast<size_t>(plan.num_queries), -1);
  for (int32_t s = 0; s < plan.num_segments(); ++s) {
    for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
      const int32_t limit = plan.entry_kv_limit[e];
      if (limit == 0) continue;
      int32_t* token = &row_token[2 * static_cast<size_t>(plan.entry_query[e])];
      if (limit != 1 || token[0] >= 0) return false;  // more than one token
      // The segment's token 0 (first_slot < page_size: in its first page).
      token[0] = plan.page_indices[plan.segment_page_indptr[s]];
      token[1] = plan.segment_first_slot[s];
    }
  }
  return std::none_of(row_token.begin(), row_token.end(), [](int32_t x) { return x < 0; });
}

int64_t Bucket(int64_t n) {
  int64_t c = 64;
  while (c < n) c *= 2;
  return c;
}

enum Array {
  kSegPageIndptr,
  kPages,
  kFirstSlot,
  kSegEntryIndptr,
  kEntryQuery,
  kEntryLimit,
  kQueryIndptr,
  kQueryEntries,
  kQueryItems,
  kItems,
  kCtaIndptr,
  kCtaHead,
  kPartialBase,
  kNumChunks,
  kRowSlotIndptr,
  kNumQueries,
  kItemEntry,
  kRowToken,
  kClusterRows,
  kNumArrays
};

}  // namespace

absl::StatusOr<std::unique_ptr<TreeAttention>> TreeAttention::Create() {
  int device = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  std::unique_ptr<TreeAttention> runner(new TreeAttention());
  BANYAN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&runner->num_sms_, cudaDevAttrMultiProcessorCount, device));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&runner->staging_free_, cudaEventDisableTiming));
  int major = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  runner->pdl_supported_ = major >= 9;
  BANYAN_ASSIGN_OR_RETURN(runner->wgmma_available_, ProbeWgmma(device));
  return runner;
}

TreeAttention::~TreeAttention() {
  if (staging_free_ != nullptr) (void)cudaEventDestroy(staging_free_);
}

absl::Status TreeAttention::Upload(const AttentionPlan& plan, cudaStream_t stream) {
  static_assert(kNumArrays == kNumUploadArrays, "offsets_ must hold every uploaded array");
  const int32_t nq = plan.num_queries;
  const std::pair<const void*, int64_t> arrays[kNumArrays] = {
      {plan.segment_page_indptr.data(), static_cast<int64_t>(plan.segment_page_indptr.size())},
      {plan.page_indices.data(), static_cast<int64_t>(plan.page_indices.size())},
      {plan.segment_first_slot.data(), static_cast<int64_t>(plan.segment_first_slot.size())},
      {plan.segment_entry_indptr.data(), static_cast<int64_t>(plan.segment_entry_indptr.size())},
      {plan.entry_query.data(), static_cast<int64_t>(plan.entry_query.size())},
      {plan.entry_kv_limit.data(), static_cast<int64_t>(plan.entry_kv_limit.size())},
      {plan.query_entry_indptr.data(), static_cast<int64_t>(plan.query_entry_indptr.size())},
      {plan.query_entries.data(), static_cast<int64_t>(plan.query_entries.size())},
      {work().query_items.data(), static_cast<int64_t>(work().query_items.size())},
      {work().items.data(), static_cast<int64_t>(work().items.size() * sizeof(WorkItem) / 4)},
      {work().cta_item_indptr.data(), static_cast<int64_t>(work().cta_item_indptr.size())},
      {work().cta_head.data(), static_cast<int64_t>(work().cta_head.size())},
      {work().entry_partial_base.data(), static_cast<int64_t>(work().entry_partial_base.size())},
      {work().entry_num_chunks.data(), static_cast<int64_t>(work().entry_num_chunks.size())},
      {work().row_slot_indptr.data(), static_cast<int64_t>(work().row_slot_indptr.size())},
      {&nq, 1},
      {work().item_entry.data(), static_cast<int64_t>(work().item_entry.size())},
      {row_token_.data(), single_token_ ? static_cast<int64_t>(row_token_.size()) : 0},
      {work().cluster_rows.data(), static_cast<int64_t>(work().cluster_rows.size())},
  };
  // Offsets from each array's power-of-two bucket: the layout changes only
  // when an array crosses one, in either direction (the copy below moves the
  // whole layout at every Prepare, and a decode step after a long prefill
  // used to copy the prefill's capacities with it).
  int64_t offsets[kNumArrays + 1];
  offsets[0] = 0;
  for (int a = 0; a < kNumArrays; ++a) offsets[a + 1] = offsets[a] + Bucket(arrays[a].second);
  // The previous upload must have left the staging buffer before it is rewritten.
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging_free_));
  const size_t bytes = static_cast<size_t>(offsets[kNumArrays]) * 4;
  if (blob_.size() < bytes) {  // the buffers only grow
    BANYAN_ASSIGN_OR_RETURN(blob_, gpu::DeviceBuffer::Allocate(bytes));
    BANYAN_ASSIGN_OR_RETURN(staging_, gpu::PinnedBuffer::Allocate(bytes));
  }
  std::copy(offsets, offsets + kNumArrays + 1, offsets_);
  int32_t* host = staging_.As<int32_t>();
  for (int a = 0; a < kNumArrays; ++a) {
    if (arrays[a].second > 0) std::memcpy(host + offsets_[a], arrays[a].first, arrays[a].second * 4);
  }
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(blob_.data(), host, bytes, cudaMemcpyHostToDevice, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging_free_, stream));
  return absl::OkStatus();
}

template <typename Kernel>
absl::StatusOr<int> TreeAttention::Configured(Kernel* kernel, int threads, int smem_bytes) {
  const void* key = reinterpret_cast<const void*>(kernel);
  for (const auto& [configured, ctas] : configured_) {
    if (configured == key) return ctas;
  }
  BANYAN_ASSIGN_OR_RETURN(const int ctas, ConfigureKernel(kernel, threads, smem_bytes));
  configured_.emplace_back(key, ctas);
  return ctas;
}

template <typename Kernel>
absl::StatusOr<int> TreeAttention::ActiveClusters(Kernel* kernel, int threads, int smem_bytes) {
  const void* key = reinterpret_cast<const void*>(kernel);
  for (const ClusterCount& c : cluster_counts_) {
    if (c.kernel == key && c.size == cluster_size_) return c.clusters;
  }
  BANYAN_RETURN_IF_ERROR(Configured(kernel, threads, smem_bytes).status());
  if (cluster_size_ > 8) {  // past the portable size: allowed per kernel
    BANYAN_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(cluster_size_ * num_sms_);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem_bytes;
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = cluster_size_;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  int clusters = 0;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  if (clusters < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("attention: no cluster of ", cluster_size_, " CTAs of the cluster kernel fits this device"));
  }
  cluster_counts_.push_back(ClusterCount{key, cluster_size_, clusters});
  return clusters;
}

absl::Status TreeAttention::Prepare(const AttentionArgs& args, PathChoice path, cudaStream_t stream,
                                    PlanCheck check) {
  last_prepared_ahead_ = false;
  BANYAN_RETURN_IF_ERROR(ValidateAttentionArgs(args, check));
  last_prepared_ahead_ = std::exchange(ahead_ready_, false) && AheadMatches(args, path, stream);
  if (last_prepared_ahead_) {  // PrepareAhead planned and uploaded this very plan
    RememberPreparedShape(args);
    return absl::OkStatus();
  }
  // From here the work plan, the variant and the device copies change: a
  // Prepare that fails past this point leaves no plan to Run.
  prepared_queries_ = -1;
  cluster_placed_ = false;
  single_token_ = FindSingleTokens(*args.plan, row_token_);
  if (single_token_) {
    planner_.Clear();
    BANYAN_RETURN_IF_ERROR(Upload(*args.plan, stream));
    RememberPreparedShape(args);
    return absl::OkStatus();
  }
  int ctas_per_sm = 1;
  variant_ = next_variant_;
  if ((variant_ == KernelVariant::kWgmma || variant_ == KernelVariant::kTma) && !wgmma_available_) {
    return absl::FailedPreconditionError(
        "attention: the wgmma and tma variants need an sm_90a kernel image on a compute capability 9.0 device");
  }
  const bool tma_reads = KvTensorMapSupported(args.layout, args.kv_dtype) && args.q_dtype == args.kv_dtype &&
                         !grid_merge_ && reinterpret_cast<uintptr_t>(args.q) % 16 == 0 &&
                         path != PathChoice::kFlattened;
  if (variant_ == KernelVariant::kTma && !tma_reads) {
    variant_ = KernelVariant::kWgmma;  // the TMA kernel cannot read this layout or q dtype
  }
  const bool auto_variant = variant_ == KernelVariant::kAuto;
  if (auto_variant) {
    variant_ = !wgmma_available_ ? KernelVariant::kNarrow : tma_reads ? KernelVariant::kTma : KernelVariant::kWgmma;
  }
  if (args.kv_dtype == DType::kF32) variant_ = KernelVariant::kNarrow;  // no batched items
  // Configures variant_'s kernel and plans for its occupancy.
  const WorkShape kv_shape{args.num_q_heads, args.layout.num_kv_heads, args.head_dim(),
                           static_cast<int32_t>(DTypeSize(args.kv_dtype))};
  const bool cluster_fits = cluster_merge_ && cluster_available() && ClusterPlacementFits(kv_shape) &&
                            (path == PathChoice::kAuto || path == PathChoice::kBatched);
  auto configure_and_plan = [&]() -> absl::Status {
    // A cluster placement (set_cluster_merge): the clusters of the variant's cluster kernel that fit at once.
    const bool place_cluster = cluster_fits && variant_ == KernelVariant::kTma;
    int clusters = 0, lean_clusters = 0;
    BANYAN_RETURN_IF_ERROR(Dispatch(args.kv_dtype, args.head_dim(), [&](auto tag, auto dim) -> absl::Status {
      using T = typename decltype(tag)::type;
      constexpr int D = decltype(dim)::value;
      if constexpr (sizeof(T) == 2) {
        if (variant_ == KernelVariant::kWgmma) {
          BANYAN_ASSIGN_OR_RETURN(ctas_per_sm, Configured(kernels::PersistentWgmmaKernel<T, D>, kernels::kThreads,
                                                          kernels::kWgmmaSmemBytes<T, D>));
          return absl::OkStatus();
        }
        if (variant_ == KernelVariant::kTma) {
          // Both register splits at D = 128 (the rings, which pick one, are decided after the plan).
          BANYAN_ASSIGN_OR_RETURN(ctas_per_sm, Configured(kernels::PersistentTmaKernel<T, D, kernels::kTmaFedProducer>,
                                                          kernels::kTmaThreads, kernels::kTmaSmemBytes<T, D>));
          if constexpr (kernels::TmaProducerRegsFor(D, false) == kernels::kTmaLeanProducer) {
            BANYAN_ASSIGN_OR_RETURN(const int lean_ctas_per_sm,
                                    Configured(kernels::PersistentTmaKernel<T, D, kernels::kTmaLeanProducer>,
                                               kernels::kTmaThreads, kernels::kTmaSmemBytes<T, D>));
            ctas_per_sm = std::min(ctas_per_sm, lean_ctas_per_sm);
            if (place_cluster) {  // the lean split's cluster kernel too (Run picks one by the rings)
              BANYAN_ASSIGN_OR_RETURN(lean_clusters, ActiveClusters(TmaClusterKernel<T, D>(true), kernels::kTmaThreads,
                                                                    kernels::kTmaSmemBytes<T, D>));
            }
            if (light_ctas_ != 0) {  // light CTAs at D 128 (forced or the model's): the instantiations that run them
              BANYAN_RETURN_IF_ERROR(
                  Configured(kernels::PersistentTmaKernel<T, D, kernels::kTmaFedProducer, true>, kernels::kTmaThreads,
                             kernels::kTmaSmemBytes<T, D, true>)
                      .status());
              BANYAN_RETURN_IF_ERROR(
                  Configured(kernels::PersistentTmaKernel<T, D, kernels::kTmaLeanProducer, true>, kernels::kTmaThreads,
                             kernels::kTmaSmemBytes<T, D, true>)
                      .status());
            }
          }
          if (place_cluster) {
            BANYAN_ASSIGN_OR_RETURN(clusters, ActiveClusters(TmaClusterKernel<T, D>(false), kernels::kTmaThreads,
                                                             kernels::kTmaSmemBytes<T, D>));
            if (lean_clusters > 0) clusters = std::min(clusters, lean_clusters);
          }
          return absl::OkStatus();
        }
      }
      BANYAN_ASSIGN_OR_RETURN(ctas_per_sm, Configured(kernels::PersistentAttentionKernel<T, D>, kernels::kThreads,
                                                      kernels::kPersistentSmemBytes<T, D>));
      return absl::OkStatus();
    }));
    cluster_placed_ = clusters > 0;
    if (cluster_placed_) {
      planner_.Clear();
      cluster_plan_ =
          BuildClusterWorkPlan(*args.plan, kv_shape,
                               ClusterGrid{cluster_size_, clusters, cluster_query_parts_});
      grid_ = clusters * cluster_size_;
      return absl::OkStatus();
    }
    DeviceModel device = cost_rates_;
    device.num_sms = num_sms_;
    device.ctas_per_sm = ctas_per_sm;
    device.min_chunk = min_chunk_;
    const WorkShape shape{args.num_q_heads, args.layout.num_kv_heads,
                          args.head_dim(),  static_cast<int32_t>(DTypeSize(args.kv_dtype)),
                          kTileRows,        variant_ == KernelVariant::kNarrow && group_items_ ? kernels::kStages : 0,
                          spread_light_,    variant_ == KernelVariant::kTma ? light_ctas_ : 0,
                          stream_k_,        light_chunks_};
    planner_.Plan(*args.plan, shape, device, path);
    grid_ = device.num_ctas();
    return absl::OkStatus();
  };
  BANYAN_RETURN_IF_ERROR(configure_and_plan());
  if (variant_ == KernelVariant::kTma &&
      std::any_of(work().items.begin(), work().items.end(),
                  [](const WorkItem& it) { return it.kind != static_cast<int32_t>(ItemKind::kBatched); })) {
    variant_ = KernelVariant::kWgmma;  // the TMA kernel runs batched items only
    BANYAN_RETURN_IF_ERROR(configure_and_plan());
  }
  if (auto_variant && variant_ == KernelVariant::kWgmma && MeanBatchedTiles(work()) < kWgmmaMinMeanTiles) {
    variant_ = KernelVariant::kNarrow;  // short items: the mma.sync tile measured faster
    BANYAN_RETURN_IF_ERROR(configure_and_plan());
  }
  const bool short_plan = variant_ == KernelVariant::kTma && tma_short_plan_boxes_ && tma_rings_ == TmaRings::kAuto &&
                          args.head_dim() == 128 && BatchedTilesPerCta(work()) <= kTmaShortPlanTilesPerCta;
  // The page order's share is judged when the work plan is built: a refresh
  // keeps the build's items, and a decode step's new tokens move the share
  // little (4-5 us per step at 2,272 items on a workplace CPU, which the GPU
  // waited for at every decode step).
  if (!planner_.last_refreshed()) consecutive_share_ = -1.0;  // a new build: judged again where needed
  if (variant_ == KernelVariant::kTma && tma_rings_ == TmaRings::kAuto && !short_plan && consecutive_share_ < 0.0) {
    consecutive_share_ = ConsecutivePageTileShare(*args.plan, work());
  }
  tma_split_kv_ =
      variant_ == KernelVariant::kTma && (tma_rings_ == TmaRings::kSplit || short_plan ||
                                          (tma_rings_ == TmaRings::kAuto && consecutive_share_ < kTmaSharedMinShare));
  tma_page_boxes_ = short_plan;
  BANYAN_RETURN_IF_ERROR(Upload(*args.plan, stream));
  const int64_t slots = Bucket(int64_t{work().num_partials} * args.num_q_heads);
  const size_t partial_bytes = static_cast<size_t>(slots) * (args.head_dim() + 1) * sizeof(float);
  if (partials_.size() < partial_bytes) {
    BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // the old partials may still be in use
    BANYAN_ASSIGN_OR_RETURN(partials_, gpu::DeviceBuffer::Allocate(partial_bytes));
  }
  const size_t done_bytes = static_cast<size_t>(Bucket(args.plan->num_queries) + kBarrierInts) * sizeof(int32_t);
  if (query_done_.size() < done_bytes) {
    BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // a launch may still use the old counters
    BANYAN_ASSIGN_OR_RETURN(query_done_, gpu::DeviceBuffer::Allocate(done_bytes));
    BANYAN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(query_done_.data(), 0, done_bytes, stream));
  }
  // The merge's grid is one wave of its kernel, from the kernel's own
  // occupancy: the D 128 merge has 72 registers (7 CTAs per SM), and a grid
  // of 8 per SM ran its last 132 CTAs as a second wave (H100: h32/8 L1024
  // P2048 S64 219 -> 210 us, headline 169 -> 168 with one wave).
  const bool wide = WideMerge(args.plan->num_queries, args.num_q_heads);
  BANYAN_RETURN_IF_ERROR(Dispatch(args.kv_dtype, args.head_dim(), [&](auto tag, auto dim) -> absl::Status {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(dim)::value;
    const MergeFn merge = MergeKernelFor<T, D>(variant_ == KernelVariant::kTma, TmaLean(D, tma_split_kv_), wide);
    BANYAN_ASSIGN_OR_RETURN(merge_ctas_per_sm_, Configured(merge, kernels::kMergeThreads, 0));
    merge_kernel_ = reinterpret_cast<const void*>(merge);
    return absl::OkStatus();
  }));
  RememberPreparedShape(args);
  return absl::OkStatus();
}

absl::Status TreeAttention::PrepareAhead(const AttentionArgs& args, PathChoice path, cudaStream_t stream) {
  ahead_ready_ = false;
  if (args.plan == nullptr || args.plan != prepared_plan_ || prepared_queries_ < 0 || single_token_ ||
      !PredictNextDecodePlan(*args.plan, &ahead_plan_)) {
    return absl::OkStatus();  // no guess (a one-token plan's next is one-token again, not grown)
  }
  AttentionArgs ahead = args;
  ahead.plan = &ahead_plan_;
  // The guess is valid wherever the last Prepare's plan was (next_decode_plan.h).
  BANYAN_RETURN_IF_ERROR(Prepare(ahead, path, stream, PlanCheck::kPlanValidated));
  prepared_queries_ = -1;  // nothing to Run until a Prepare takes the guess or plans
  ahead_args_ = args;
  ahead_args_.plan = nullptr;
  ahead_path_ = path;
  ahead_stream_ = stream;
  ahead_ready_ = true;
  return absl::OkStatus();
}

bool TreeAttention::AheadMatches(const AttentionArgs& args, PathChoice path, cudaStream_t stream) const {
  // What Prepare reads of the arguments besides the plan.
  const AttentionArgs& a = ahead_args_;
  return path == ahead_path_ && stream == ahead_stream_ && SameKvLayout(args.layout, a.layout) &&
         args.kv_dtype == a.kv_dtype && args.q_dtype == a.q_dtype && args.out_dtype == a.out_dtype &&
         args.num_q_heads == a.num_q_heads && args.q == a.q && SamePlan(*args.plan, ahead_plan_);
}

void TreeAttention::RememberPreparedShape(const AttentionArgs& args) {
  prepared_plan_ = args.plan;
  prepared_queries_ = args.plan->num_queries;
  prepared_entries_ = args.plan->num_entries();
  prepared_q_heads_ = args.num_q_heads;
  prepared_head_dim_ = args.head_dim();
  prepared_kv_dtype_ = args.kv_dtype;
}

absl::Status TreeAttention::Run(const AttentionArgs& args, cudaStream_t stream) {
  if (args.plan == nullptr || args.plan->num_queries != prepared_queries_ ||
      args.plan->num_entries() != prepared_entries_ || args.num_q_heads != prepared_q_heads_ ||
      args.head_dim() != prepared_head_dim_ || args.kv_dtype != prepared_kv_dtype_) {
    return absl::FailedPreconditionError("attention: Run without a Prepare of the same plan shape");
  }
  if (prepared_queries_ == 0) return absl::OkStatus();
  const int32_t* blob = blob_.As<int32_t>();
  kernels::TreeParams p{};
  p.segment_page_indptr = blob + offsets_[kSegPageIndptr];
  p.page_indices = blob + offsets_[kPages];
  p.segment_first_slot = blob + offsets_[kFirstSlot];
  p.segment_entry_indptr = blob + offsets_[kSegEntryIndptr];
  p.entry_query = blob + offsets_[kEntryQuery];
  p.entry_kv_limit = blob + offsets_[kEntryLimit];
  p.query_entry_indptr = blob + offsets_[kQueryIndptr];
  p.query_entries = blob + offsets_[kQueryEntries];
  p.items = reinterpret_cast<const WorkItem*>(blob + offsets_[kItems]);
  p.cta_item_indptr = blob + offsets_[kCtaIndptr];
  p.cta_head = blob + offsets_[kCtaHead];
  p.item_entry = reinterpret_cast<const int4*>(blob + offsets_[kItemEntry]);  // offsets are multiples of 64
  p.entry_partial_base = blob + offsets_[kPartialBase];
  p.entry_num_chunks = blob + offsets_[kNumChunks];
  p.row_slot_indptr = blob + offsets_[kRowSlotIndptr];
  p.num_queries = blob + offsets_[kNumQueries];
  p.query_items = blob + offsets_[kQueryItems];
  p.cluster_rows = cluster_placed_ ? blob + offsets_[kClusterRows] : nullptr;
  const bool tma = variant_ == KernelVariant::kTma && !single_token_;
  // kTma merges inside its launch only with a cluster placement (set_cluster_merge); else its rows go to the
  // merge kernel (also when the grid merge was switched on after the Prepare that chose kTma).
  const bool cluster = cluster_placed_;  // never with single_token_ (Prepare)
  const bool grid_merge = grid_merge_ && !tma && !cluster;
  const bool fused = !tma && !grid_merge && fused_merge_ && work().fused_merge;
  if (tma) {
    if (reinterpret_cast<uintptr_t>(args.q) % 16 != 0) {
      return absl::InvalidArgumentError("attention: the tma variant needs 16-byte aligned q rows");
    }
    BANYAN_RETURN_IF_ERROR(UpdateKvMaps(args));
  }
  p.query_done = fused ? query_done_.As<int32_t>() : nullptr;
  p.grid_barrier = grid_merge ? query_done_.As<int32_t>() + (query_done_.size() / sizeof(int32_t) - kBarrierInts)
                               : nullptr;
  p.chain_items = chain_items_ ? 1 : 0;
  p.use_head = use_head_ ? 1 : 0;
  p.run_groups = 1;  // groups exist only in plans made for kNarrow with group_items (Prepare)
  p.light_cta_begin = work().light_cta_begin;
  p.trace = trace_items_;
  p.trace_merge = trace_merge_;
  p.kv_pool = args.kv_pool;
  p.k_plane = args.layout.PlaneOffset(args.layer, 0);
  p.v_plane = args.layout.PlaneOffset(args.layer, 1);
  p.num_kv_heads = args.layout.num_kv_heads;
  p.page_size = args.layout.page_size;
  p.q = args.q;
  p.q_dtype = static_cast<int32_t>(args.q_dtype);
  p.num_q_heads = args.num_q_heads;
  p.group = args.group_size();
  p.scale_log2 = args.scale * kernels::kLog2e;
  p.partial_o = partials_.As<float>();
  p.partial_lse = p.partial_o + (partials_.size() / sizeof(float) / (args.head_dim() + 1)) * args.head_dim();
  p.out = args.out;
  p.out_dtype = static_cast<int32_t>(args.out_dtype);
  p.lse = args.lse;
  if (single_token_) {  // a block per row
    return Dispatch(args.kv_dtype, args.head_dim(), [&](auto tag, auto dim) -> absl::Status {
      using T = typename decltype(tag)::type;
      constexpr int D = decltype(dim)::value;
      kernels::SingleTokenKernel<T, D>
          <<<prepared_queries_, kernels::kSingleTokenThreads, 0, stream>>>(p, blob + offsets_[kRowToken]);
      BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  }
  // The merge: a warp (a half-warp at D 64) per (row, head), grid-stride; the grid depends only on the bucket.
  const int merge_grid = merge_grid_size();
  return Dispatch(args.kv_dtype, args.head_dim(), [&](auto tag, auto dim) -> absl::Status {
    using T = typename decltype(tag)::type;
    constexpr int D = decltype(dim)::value;
    // The item kernel; a cooperative launch for the grid merge (every CTA resident).
    cudaLaunchConfig_t items = {};
    items.gridDim = dim3(grid_);
    items.blockDim = dim3(kernels::kThreads);
    items.stream = stream;
    cudaLaunchAttribute cooperative[1] = {};
    cooperative[0].id = cudaLaunchAttributeCooperative;
    cooperative[0].val.cooperative = 1;
    items.attrs = cooperative;
    items.numAttrs = grid_merge ? 1 : 0;
    // kTma: the programmatic start (set_overlap_start), then with a cluster placement the cluster shape.
    cudaLaunchAttribute tma_attrs[2] = {};
    int tma_num_attrs = 0;
    if (overlap_start_ && pdl_supported_) {
      tma_attrs[tma_num_attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      tma_attrs[tma_num_attrs++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster) {
      tma_attrs[tma_num_attrs].id = cudaLaunchAttributeClusterDimension;
      tma_attrs[tma_num_attrs++].val.clusterDim = {static_cast<unsigned>(cluster_size_), 1, 1};
    }
    if (tma) {  // 16-bit KV only (Prepare)
      if constexpr (sizeof(T) == 2) {
        items.attrs = tma_attrs;
        items.numAttrs = tma_num_attrs;
        items.blockDim = dim3(kernels::kTmaThreads);
        items.dynamicSmemBytes = kernels::kTmaSmemBytes<T, D>;
        CUtensorMap multi, single;
        std::memcpy(&multi, kv_maps_.multi.bytes, sizeof(multi));
        std::memcpy(&single, kv_maps_.single.bytes, sizeof(single));
        const int32_t flags =
            (tma_pingpong_ ? kernels::kTmaPingPong : 0) | (tma_split_small_ ? kernels::kTmaSplitSmall : 0) |
            (tma_split_kv_ ? kernels::kTmaSplitKv : 0) | (tma_gate_start_ ? kernels::kTmaGateStart : 0) |
            (tma_page_boxes_ ? kernels::kTmaPageBoxes : 0);
        // The register split (kernels::TmaProducerRegsFor): the lean one exists only where shared rings may
        // use it (D = 128).
        auto* kernel = kernels::PersistentTmaKernel<T, D, kernels::kTmaFedProducer>;
        if constexpr (kernels::TmaProducerRegsFor(D, false) == kernels::kTmaLeanProducer) {
          if (!tma_split_kv_) kernel = kernels::PersistentTmaKernel<T, D, kernels::kTmaLeanProducer>;
          if (work().light_cta_begin < grid_) {  // light CTAs at D 128: their own instantiations
            kernel = tma_split_kv_ ? kernels::PersistentTmaKernel<T, D, kernels::kTmaFedProducer, true>
                                   : kernels::PersistentTmaKernel<T, D, kernels::kTmaLeanProducer, true>;
            items.dynamicSmemBytes = kernels::kTmaSmemBytes<T, D, true>;
          }
        }
        if (cluster) kernel = TmaClusterKernel<T, D>(!tma_split_kv_);  // a cluster placement has no light CTAs
        BANYAN_CUDA_RETURN_IF_ERROR(
            cudaLaunchKernelEx(&items, kernel, p, multi, single, KvTensorMapBoxRows(args.layout), flags));
      }
    } else if (variant_ == KernelVariant::kWgmma) {  // 16-bit KV only (Prepare)
      if constexpr (sizeof(T) == 2) {
        items.dynamicSmemBytes = kernels::kWgmmaSmemBytes<T, D>;
        BANYAN_CUDA_RETURN_IF_ERROR(
            cudaLaunchKernelEx(&items, kernels::PersistentWgmmaKernel<T, D>, p, wgmma_narrow_rows_));
      }
    } else {
      items.dynamicSmemBytes = kernels::kPersistentSmemBytes<T, D>;
      BANYAN_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&items, kernels::PersistentAttentionKernel<T, D>, p));
    }
    if (fused || grid_merge || cluster) return absl::OkStatus();  // the item launch merged every row
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(merge_grid);
    config.blockDim = dim3(kernels::kMergeThreads);
    config.dynamicSmemBytes = 0;
    config.stream = stream;
    cudaLaunchAttribute attribute[1] = {};
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = overlap_merge_ && pdl_supported_ ? 1 : 0;
    // The kernel Prepare configured (MergeKernelFor), whose occupancy sized merge_grid.
    void* merge_args[] = {&p};
    BANYAN_CUDA_RETURN_IF_ERROR(cudaLaunchKernelExC(&config, merge_kernel_, merge_args));
    return absl::OkStatus();
  });
}

bool TreeAttention::WideMerge(int64_t queries, int32_t q_heads) const {
  return Bucket(queries) * q_heads <= int64_t{num_sms_} * kernels::kMergeWideWarpsPerSm;
}

bool TreeAttention::wide_merge() const { return WideMerge(prepared_queries_, prepared_q_heads_); }

int32_t TreeAttention::merge_grid_size() const {
  const int64_t pairs = Bucket(prepared_queries_) * prepared_q_heads_;
  const int64_t pairs_per_cta = kernels::kMergeThreads / kernels::MergeLanes(prepared_head_dim_, wide_merge());
  return static_cast<int32_t>(
      std::min<int64_t>(int64_t{num_sms_} * merge_ctas_per_sm_, (pairs + pairs_per_cta - 1) / pairs_per_cta));
}

absl::Status TreeAttention::UpdateKvMaps(const AttentionArgs& args) {
  if (kv_maps_pool_ == args.kv_pool && kv_maps_dtype_ == args.kv_dtype && SameKvLayout(args.layout, kv_maps_layout_)) {
    return absl::OkStatus();
  }
  kv_maps_pool_ = nullptr;  // stays unset if the encoding fails
  BANYAN_RETURN_IF_ERROR(EncodeKvTensorMaps(args.kv_pool, args.layout, args.kv_dtype, &kv_maps_));
  kv_maps_pool_ = args.kv_pool;
  kv_maps_layout_ = args.layout;
  kv_maps_dtype_ = args.kv_dtype;
  return absl::OkStatus();
}

absl::Status TreeAttention::Attend(const AttentionArgs& args, PathChoice path, cudaStream_t stream) {
  BANYAN_RETURN_IF_ERROR(Prepare(args, path, stream));
  return Run(args, stream);
}

absl::Status BifurcatedAttention(TreeAttention& runner, const AttentionArgs& args, const PagedRun& context,
                                 absl::Span<const PagedRun> samples, cudaStream_t stream) {
  BANYAN_ASSIGN_OR_RETURN(const AttentionPlan plan, MakeBifurcatedPlan(context, samples, args.layout.page_size));
  AttentionArgs with_plan = args;
  with_plan.plan = &plan;
  return runner.Attend(with_plan, PathChoice::kAuto, stream);
}

}  // namespace banyan::attention
