#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "attention/kernels/sparq.cuh"
#include "attention/kernels/sparq_cluster.cuh"
#include "attention/sparq.h"
#include "banyan/status_macros.h"
#include "sdk/gpu/cuda_status.h"

namespace banyan::attention {
namespace {

using kernels::SparqParams;

int64_t Align(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Dynamic shared memory of a cluster CTA that keeps its logits there: two
// CTAs per SM (228 KB on sm_90) with room for the static arrays.
constexpr int64_t kClusterSharedLogitsBytes = 88 * 1024;

// Byte offsets of the scratch arrays (kernels/sparq.cuh SparqParams).
struct ScratchLayout {
  int64_t logits, chunk_stats, lse2, score, hist, chunk_counts, positions, alpha_part, partial, total;
};
// Hands out consecutive 256-byte aligned byte ranges of the scratch.
struct ScratchCursor {
  int64_t at = 0;
  int64_t Take(int64_t bytes) {
    const int64_t here = at;
    at += Align(bytes);
    return here;
  }
};

ScratchLayout LayoutFor(int64_t pairs, int32_t group, int32_t max_length, int32_t score_chunks, int32_t select_chunks,
                        int32_t k, int32_t att_chunks, int32_t head_dim) {
  ScratchLayout s{};
  ScratchCursor cursor;
  auto take = [&](int64_t bytes) { return cursor.Take(bytes); };
  s.logits = take(pairs * group * int64_t{max_length} * 4);
  s.chunk_stats = take(pairs * score_chunks * group * 2 * 4);
  s.lse2 = take(pairs * group * 4);
  s.score = take(pairs * int64_t{max_length} * 4);
  s.hist = take(pairs * 3 * kernels::kSparqBins * 4);
  s.chunk_counts = take(pairs * select_chunks * 2 * 4);
  s.positions = take(pairs * int64_t{k} * 4);
  s.alpha_part = take(pairs * select_chunks * group * 4);
  s.partial = take(pairs * group * att_chunks * int64_t{head_dim + 2} * 4);
  s.total = cursor.at;
  return s;
}

// The cluster kernel's scratch: logits [pairs][size][group][cap] when they
// do not stay in shared memory, positions, alpha per CTA.
ScratchLayout ClusterLayoutFor(int64_t pairs, int32_t group, int32_t size, int32_t cap, bool logits_global, int32_t k) {
  ScratchLayout s{};
  ScratchCursor cursor;
  s.logits = cursor.Take(logits_global ? pairs * size * group * int64_t{cap} * 4 : 0);
  s.positions = cursor.Take(pairs * int64_t{k} * 4);
  s.alpha_part = cursor.Take(pairs * size * group * 4);
  s.total = cursor.at;
  return s;
}

template <typename T, int D, int G>
absl::Status Launch(const SparqParams& p, int32_t num_seqs, cudaStream_t stream) {
  const dim3 score_grid(p.score_chunks, p.num_kv_heads, num_seqs);
  kernels::SparqApproxLogits<T, D, G><<<score_grid, kernels::kSparqScoreThreads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  kernels::SparqScores<<<score_grid, kernels::kSparqScoreThreads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  const dim3 select_grid(p.select_chunks, p.num_kv_heads, num_seqs);
  for (const int level : {2, 3}) {
    kernels::SparqRefine<<<select_grid, kernels::kSparqSelectThreads, 0, stream>>>(p, level);
    BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  kernels::SparqCount<<<select_grid, kernels::kSparqSelectThreads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  kernels::SparqWrite<<<select_grid, kernels::kSparqSelectThreads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  kernels::SparqGatherAttend<T, D, G>
      <<<dim3(p.att_chunks, p.num_kv_heads, num_seqs), kernels::kSparqAttThreads, 0, stream>>>(p);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  kernels::SparqFinalize<D><<<dim3(p.group, p.num_kv_heads, num_seqs), D, 0, stream>>>(p);
  return BANYAN_CUDA_STATUS(cudaGetLastError());
}

template <typename T, int D>
absl::Status LaunchForGroup(const SparqParams& p, int32_t num_seqs, cudaStream_t stream) {
  // The group rounded up to a power of two: register arrays sized at compile time.
  if (p.group <= 1) return Launch<T, D, 1>(p, num_seqs, stream);
  if (p.group <= 2) return Launch<T, D, 2>(p, num_seqs, stream);
  if (p.group <= 4) return Launch<T, D, 4>(p, num_seqs, stream);
  if (p.group <= 8) return Launch<T, D, 8>(p, num_seqs, stream);
  return Launch<T, D, kernels::kSparqMaxGroup>(p, num_seqs, stream);
}

template <typename T>
absl::Status LaunchFor(int32_t head_dim, const SparqParams& p, int32_t num_seqs, cudaStream_t stream) {
  return head_dim == 64 ? LaunchForGroup<T, 64>(p, num_seqs, stream) : LaunchForGroup<T, 128>(p, num_seqs, stream);
}

// The second K copy's steps (KvTransposedOffset).
kernels::SparqKtStrides KtStridesOf(const KvLayout& layout) {
  return {KvTransposedOffset(layout, 1, 0, 0, 0, 0), KvTransposedOffset(layout, 0, 1, 0, 0, 0),
          KvTransposedOffset(layout, 0, 0, 1, 0, 0), KvTransposedOffset(layout, 0, 0, 0, 1, 0)};
}

template <typename T>
void LaunchTransposeK(const KvLayout& layout, const void* kv_pool, void* k_transposed, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(layout.num_pages), layout.num_layers);
  kernels::SparqTransposeK<<<grid, 256, 0, stream>>>(static_cast<const T*>(kv_pool), static_cast<T*>(k_transposed),
                                                     layout.num_pages, layout.num_kv_heads, layout.page_size,
                                                     layout.head_dim, KtStridesOf(layout));
}

using ClusterKernel = void (*)(SparqParams);

template <typename T, int D>
ClusterKernel ClusterKernelForGroup(int32_t group) {
  if (group <= 1) return kernels::SparqCluster<T, D, 1>;
  if (group <= 2) return kernels::SparqCluster<T, D, 2>;
  if (group <= 4) return kernels::SparqCluster<T, D, 4>;
  if (group <= 8) return kernels::SparqCluster<T, D, 8>;
  return kernels::SparqCluster<T, D, kernels::kSparqMaxGroup>;
}

ClusterKernel ClusterKernelFor(DType dtype, int32_t head_dim, int32_t group) {
  if (dtype == DType::kBf16) {
    return head_dim == 64 ? ClusterKernelForGroup<__nv_bfloat16, 64>(group)
                          : ClusterKernelForGroup<__nv_bfloat16, 128>(group);
  }
  return head_dim == 64 ? ClusterKernelForGroup<__half, 64>(group) : ClusterKernelForGroup<__half, 128>(group);
}

cudaLaunchConfig_t ClusterConfig(int32_t size, int32_t kv_heads, int32_t seqs, int64_t smem, cudaStream_t stream,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(size, kv_heads, seqs);
  config.blockDim = dim3(kernels::kSparqClusterThreads);
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = size;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return config;
}

// How many clusters of `size` CTAs with `smem` dynamic bytes each run at
// once on the current device; 0 where none can (a CUDA error of the probe
// counts as none). Raises the kernel's shared-memory limit to all the device
// offers (so that runners of other sizes sharing the kernel never undercut
// each other) and, for sizes above 8, allows them.
int32_t ClustersAtOnce(ClusterKernel kernel, int32_t size, int64_t smem) {
  int device = 0, optin = 0;
  cudaFuncAttributes attrs{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess ||
      cudaFuncGetAttributes(&attrs, kernel) != cudaSuccess ||
      static_cast<int64_t>(attrs.sharedSizeBytes) + smem > optin ||
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           optin - static_cast<int>(attrs.sharedSizeBytes)) != cudaSuccess ||
      (size > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaLaunchAttribute attr{};
  const cudaLaunchConfig_t config = ClusterConfig(size, 1, 1, smem, nullptr, &attr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

}  // namespace

SparqAttention::SparqAttention() : params_(std::make_unique<SparqParams>()) {}
SparqAttention::~SparqAttention() = default;

absl::StatusOr<std::unique_ptr<SparqAttention>> SparqAttention::Create() {
  return std::unique_ptr<SparqAttention>(new SparqAttention());
}

absl::Status SparqAttention::Prepare(const SparqArgs& args, cudaStream_t stream) {
  ready_ = false;
  BANYAN_RETURN_IF_ERROR(ValidateSparqArgs(args, /*plan_on_host=*/true));
  if (args.kv_dtype == DType::kF32 || args.q_dtype != args.kv_dtype) {
    return absl::InvalidArgumentError("sparq (GPU): KV and q must both be bf16 or both fp16");
  }
  if (args.group_size() > kernels::kSparqMaxGroup) {
    return absl::InvalidArgumentError(absl::StrCat("sparq (GPU): ", args.group_size(),
                                                   " query heads per KV head, at most ", kernels::kSparqMaxGroup));
  }
  if (args.layout.page_size % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparq (GPU): page_size ", args.layout.page_size, " not a multiple of 4"));
  }
  const int32_t d = args.head_dim(), group = args.group_size();
  const int64_t pairs = int64_t{args.num_seqs} * args.layout.num_kv_heads;
  // Rows of the per-token scratch padded to 16 tokens (16-byte vector loads).
  const int32_t stride = (args.max_length + 15) / 16 * 16;
  const int32_t score_chunks = (args.max_length + kernels::kSparqScoreChunk - 1) / kernels::kSparqScoreChunk;
  const int32_t select_chunks = (args.max_length + kernels::kSparqSelectChunk - 1) / kernels::kSparqSelectChunk;
  const int32_t k = std::min(args.config.k, args.max_length);  // no sequence selects more
  const int32_t att_chunks = (k + kernels::kSparqAttChunk - 1) / kernels::kSparqAttChunk;
  if (att_chunks > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("sparq (GPU): k = ", k, " above ", 1024 * kernels::kSparqAttChunk));
  }
  // The plan on the device: indptr, page ids, lengths (copied before Prepare returns).
  const int64_t pages = args.num_seqs == 0 ? 0 : args.seq_page_indptr[args.num_seqs];
  const int64_t plan_ints = (int64_t{args.num_seqs} + 1) + pages + args.num_seqs;
  if (plan_.size() < static_cast<size_t>(plan_ints * 4)) {
    BANYAN_ASSIGN_OR_RETURN(plan_, gpu::DeviceBuffer::Allocate(static_cast<size_t>(plan_ints * 4)));
  }
  int32_t* dev_plan = plan_.As<int32_t>();
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_plan, args.seq_page_indptr, (int64_t{args.num_seqs} + 1) * 4,
                                              cudaMemcpyHostToDevice, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dev_plan + args.num_seqs + 1, args.page_indices, pages * 4, cudaMemcpyHostToDevice, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dev_plan + args.num_seqs + 1 + pages, args.seq_length,
                                              int64_t{args.num_seqs} * 4, cudaMemcpyHostToDevice, stream));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));  // the host arrays may go once Prepare returns
  // The path: one cluster launch where pages hold a multiple of 8 slots, a
  // cluster's shared memory holds the longest sequence's scores and (unless
  // asked for) its logits, and every pair's cluster runs at once; else the
  // eight launches.
  cluster_ = 0;
  if (cluster_request_ > 0 && args.layout.page_size % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparq (GPU): the cluster kernel needs pages of a multiple of 8 slots, not ", args.layout.page_size));
  }
  if (cluster_request_ >= 0 && args.layout.page_size % 8 == 0) {
    const ClusterKernel kernel = ClusterKernelFor(args.kv_dtype, d, group);
    for (const int32_t size : {16, 8}) {
      if (cluster_request_ != 0 && size != cluster_request_) continue;
      const int32_t cap = kernels::SparqClusterSlice(args.max_length, size);
      // The logits stay in shared memory where two CTAs per SM still fit, else go to global memory.
      const bool logits_shared = kernels::SparqClusterSmemBytes(group, cap, true) <= kClusterSharedLogitsBytes;
      const int64_t smem = kernels::SparqClusterSmemBytes(group, cap, logits_shared);
      const int32_t at_once = cap <= kernels::kSparqClusterMaxCap ? ClustersAtOnce(kernel, size, smem) : 0;
      // Asked for: wherever it runs. Picked: where every pair's cluster runs at once and keeps its logits in
      // shared memory (H100, bench/RESULTS.md "SparQ (GPU)": a second wave of clusters, or logits through
      // global memory, cost more than the eight launches).
      if (cluster_request_ == size ? at_once > 0 : at_once >= pairs && logits_shared) {
        cluster_kernel_ = kernel;
        cluster_ = size;
        cluster_cap_ = cap;
        cluster_smem_ = smem;
        cluster_logits_global_ = !logits_shared;
        break;
      }
    }
    if (cluster_request_ > 0 && cluster_ == 0) {
      return absl::InvalidArgumentError(absl::StrCat("sparq (GPU): clusters of ", cluster_request_,
                                                     " CTAs do not fit sequences of ", args.max_length, " tokens"));
    }
  }
  const ScratchLayout s = cluster_ > 0
                              ? ClusterLayoutFor(pairs, group, cluster_, cluster_cap_, cluster_logits_global_, k)
                              : LayoutFor(pairs, group, stride, score_chunks, select_chunks, k, att_chunks, d);
  if (scratch_.size() < static_cast<size_t>(s.total)) {
    BANYAN_ASSIGN_OR_RETURN(scratch_,
                            gpu::DeviceBuffer::Allocate(static_cast<size_t>(std::max<int64_t>(s.total, 256))));
  }
  char* base = static_cast<char*>(scratch_.data());
  SparqParams& p = *params_;
  p = SparqParams{};
  p.k_plane = args.layout.PlaneOffset(args.layer, 0);
  p.v_plane = args.layout.PlaneOffset(args.layer, 1);
  p.kt_plane = KvTransposedOffset(args.layout, args.layer, 0, 0, 0, 0);
  p.kt = KtStridesOf(args.layout);
  p.page_elems = args.layout.PageElements();
  p.num_kv_heads = args.layout.num_kv_heads;
  p.page_size = args.layout.page_size;
  p.group = group;
  p.seq_page_indptr = dev_plan;
  p.page_indices = dev_plan + args.num_seqs + 1;
  p.seq_length = dev_plan + args.num_seqs + 1 + pages;
  p.q_dtype = static_cast<int32_t>(args.q_dtype);
  p.scale_log2 = args.scale * kernels::kLog2e;
  p.r = args.config.r;
  p.k = k;
  p.window = args.config.local_window;
  p.reallocate_mean = args.config.reallocate_mean ? 1 : 0;
  p.out_dtype = static_cast<int32_t>(args.out_dtype);
  p.max_length = stride;
  p.score_chunks = score_chunks;
  p.select_chunks = select_chunks;
  p.att_chunks = att_chunks;
  p.cap = cluster_cap_;
  p.logits = reinterpret_cast<float*>(base + s.logits);
  if (cluster_ > 0 && !cluster_logits_global_) p.logits = nullptr;  // the cluster kernel's logits in shared memory
  p.chunk_stats = reinterpret_cast<float*>(base + s.chunk_stats);
  p.lse2 = reinterpret_cast<float*>(base + s.lse2);
  p.score = reinterpret_cast<float*>(base + s.score);
  p.hist = reinterpret_cast<uint32_t*>(base + s.hist);
  p.chunk_counts = reinterpret_cast<uint32_t*>(base + s.chunk_counts);
  p.positions = reinterpret_cast<int32_t*>(base + s.positions);
  p.alpha_part = reinterpret_cast<float*>(base + s.alpha_part);
  p.partial = reinterpret_cast<float*>(base + s.partial);
  hist_offset_ = s.hist;
  hist_bytes_ = pairs * 3 * kernels::kSparqBins * 4;
  positions_offset_ = s.positions;
  alpha_offset_ = s.alpha_part;
  last_select_chunks_ = cluster_ > 0 ? cluster_ : select_chunks;
  last_k_ = k;
  last_group_ = group;
  last_kv_heads_ = args.layout.num_kv_heads;
  prepared_ = args;
  prepared_.seq_page_indptr = prepared_.page_indices = prepared_.seq_length = nullptr;
  ready_ = true;
  return absl::OkStatus();
}

absl::Status SparqAttention::Run(const SparqArgs& args, cudaStream_t stream) {
  const SparqArgs& was = prepared_;
  if (!ready_ || !SameKvLayout(args.layout, was.layout) || args.num_seqs != was.num_seqs ||
      args.num_q_heads != was.num_q_heads || args.max_length != was.max_length || args.kv_dtype != was.kv_dtype ||
      args.q_dtype != was.q_dtype || args.out_dtype != was.out_dtype || args.layer != was.layer ||
      args.scale != was.scale || args.config.r != was.config.r || args.config.k != was.config.k ||
      args.config.local_window != was.config.local_window ||
      args.config.reallocate_mean != was.config.reallocate_mean) {
    return absl::FailedPreconditionError("sparq (GPU): Run without a Prepare of these sizes");
  }
  if (args.num_seqs == 0) return absl::OkStatus();
  if (args.kv_pool == nullptr || args.k_transposed == nullptr || args.q == nullptr || args.out == nullptr ||
      (args.config.reallocate_mean && args.v_mean == nullptr)) {
    return absl::InvalidArgumentError(
        "sparq (GPU): kv_pool, k_transposed, q, out (and v_mean with reallocate_mean) must be set");
  }
  SparqParams& p = *params_;
  p.kv_pool = args.kv_pool;
  p.k_t = args.k_transposed;
  p.q = args.q;
  p.v_mean = args.v_mean;
  p.out = args.out;
  if (cluster_ > 0) {
    cudaLaunchAttribute attr{};
    const cudaLaunchConfig_t config =
        ClusterConfig(cluster_, args.layout.num_kv_heads, args.num_seqs, cluster_smem_, stream, &attr);
    return BANYAN_CUDA_STATUS(cudaLaunchKernelEx(&config, cluster_kernel_, p));
  }
  char* base = static_cast<char*>(scratch_.data());
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(base + hist_offset_, 0, hist_bytes_, stream));
  return args.kv_dtype == DType::kBf16 ? LaunchFor<__nv_bfloat16>(args.head_dim(), p, args.num_seqs, stream)
                                       : LaunchFor<__half>(args.head_dim(), p, args.num_seqs, stream);
}

absl::Status SparqAttention::CopySelection(int32_t seq, int32_t kv_head, int32_t length, SparqSelection* out,
                                           cudaStream_t stream) const {
  // The alpha parts of the pair: one per CTA of the cluster, or per select chunk of the sequence.
  const int32_t chunks =
      cluster_ > 0 ? cluster_ : (length + kernels::kSparqSelectChunk - 1) / kernels::kSparqSelectChunk;
  if (last_k_ == 0 || length < 1 || kv_head < 0 || kv_head >= last_kv_heads_ || seq < 0 ||
      chunks > last_select_chunks_) {
    return absl::InvalidArgumentError("sparq (GPU): no such selection in the last Run");
  }
  BANYAN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const int64_t pair = int64_t{seq} * last_kv_heads_ + kv_head;
  const int32_t count = std::min(last_k_, length);
  const char* base = static_cast<const char*>(scratch_.data());
  out->positions.resize(count);
  std::vector<float> parts(static_cast<size_t>(chunks) * last_group_);
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpy(out->positions.data(), base + positions_offset_ + pair * last_k_ * 4,
                                         int64_t{count} * 4, cudaMemcpyDeviceToHost));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpy(parts.data(),
                                         base + alpha_offset_ + pair * last_select_chunks_ * last_group_ * 4,
                                         parts.size() * 4, cudaMemcpyDeviceToHost));
  out->alpha.assign(last_group_, 0.0);
  for (int32_t c = 0; c < chunks; ++c) {
    for (int32_t h = 0; h < last_group_; ++h) out->alpha[h] += parts[static_cast<size_t>(c) * last_group_ + h];
  }
  out->components.clear();
  return absl::OkStatus();
}

absl::Status WriteKTransposed(const KvLayout& layout, DType dtype, const void* kv_pool, void* k_transposed,
                              cudaStream_t stream) {
  if (dtype == DType::kF32 || layout.dtype_bytes != static_cast<int32_t>(DTypeSize(dtype))) {
    return absl::InvalidArgumentError("write k transposed: a 16-bit pool whose layout says so");
  }
  if (layout.num_pages == 0 || layout.num_layers == 0) return absl::OkStatus();
  if (dtype == DType::kBf16) {
    LaunchTransposeK<__nv_bfloat16>(layout, kv_pool, k_transposed, stream);
  } else {
    LaunchTransposeK<__half>(layout, kv_pool, k_transposed, stream);
  }
  return BANYAN_CUDA_STATUS(cudaGetLastError());
}

}  // namespace banyan::attention
