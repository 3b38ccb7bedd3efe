// TreeAttention: the CUDA attention runner. It takes an AttentionPlan (decode
// over a tree, prefill of new tokens over their ancestors, or plain
// per-sequence decode: every case is a plan) and computes, per query row, the
// attention over all of its entries:
//
//   BANYAN_ASSIGN_OR_RETURN(auto runner, TreeAttention::Create());
//   BANYAN_RETURN_IF_ERROR(runner->Prepare(args, PathChoice::kAuto, stream));  // host work + upload
//   BANYAN_RETURN_IF_ERROR(runner->Run(args, stream));                          // launches only
//
// Prepare validates the arguments, runs the cost model and stream-K planner
// (work_plan.h) and copies the plan and work list to device buffers sized in
// power-of-two buckets. Run issues two launches on `stream` (the persistent
// item kernel, then the merge; on compute capability 9.0+ the merge is a
// programmatic dependent launch whose start overlaps the item kernel; one
// launch with set_cluster_merge, set_fused_merge or set_grid_merge) and
// never synchronizes with the host, so it can be captured into a CUDA graph; a captured graph stays valid for later
// plans as long as Prepare keeps every plan array in the same power-of-two
// bucket (a plan that grows or shrinks across one moves the arrays) and the
// tensors stay at the same addresses. A plan whose every query row sees
// exactly one KV token (an engine's no-attention ceiling, a first step over
// one-token prompts) is one gather launch instead: out = that token's V, lse =
// its scaled score (kernels/single_token.cuh; work_plan() is then empty).
//
// Pointers in AttentionArgs are device pointers here, except args.plan
// (host). Supported: KV fp32 / bf16 / fp16 (tensor cores for 16-bit KV,
// CUDA cores for fp32), q and out of any of the three dtypes, head_dim 64 and
// 128, any GQA ratio. Errors: kInvalidArgument (ValidateAttentionArgs),
// kFailedPrecondition (Run before Prepare, after a Prepare that failed past
// its argument checks, or with a different plan shape),
// CUDA errors mapped by cuda_status.h.
// Thread-compatible: one runner per stream; distinct runners are independent.
#ifndef BANYAN_ATTENTION_TREE_ATTENTION_H_
#define BANYAN_ATTENTION_TREE_ATTENTION_H_

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "attention/attention_args.h"
#include "attention/bifurcated.h"
#include "attention/kv_tensor_map.h"
#include "attention/work_plan.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::attention {

// Tensor-core tile shape of batched items: kNarrow 16 query rows per warp
// (kTileRows per tile, tree.cuh, 4 KV stages, Q fragments in registers, one
// CTA per SM). (Two earlier variants, 32 rows per warp and a two-CTA-per-SM
// tile, measured slower on the H100 and were removed: attention/PERF_NOTES.md.)
// kWgmma (kernels/tree_wgmma.cuh): 64 rows per warpgroup on Hopper warpgroup
// MMA (wgmma, sm_90a), K and V read by the tensor cores straight from
// swizzled shared memory; needs an sm_90a image on a compute capability 9.0
// device (TreeAttention::wgmma_available()). kAuto (the default) is kTma
// (below) where it applies; else kWgmma where available, except for plans
// whose batched items are short (fewer than
// TreeAttention::kWgmmaMinMeanTiles KV tiles per item on average: there the
// kNarrow tile measured faster), and kNarrow elsewhere; variant() reports the
// resolved choice (fp32 KV, which has no batched items, resolves to kNarrow).
// kTma (kernels/tree_tma.cuh): the kWgmma tile math in a warp-specialized
// kernel: a producer warp loads K/V with TMA (kv_tensor_map.h) and the q rows
// with bulk copies ahead of two consumer warpgroups (sm_90a, like kWgmma).
// It needs 16-bit q of the KV dtype and a page size that is a power of two
// >= 8 (KvTensorMapSupported); elsewhere a kTma request resolves to kWgmma,
// and it never fuses the merge or runs the grid merge (it merges inside its
// launch only with set_cluster_merge). kAuto picks kTma
// wherever it can read the problem (H100, every shape of the sweep in one
// run: as fast as the best other variant or faster, 1.3-1.45x kWgmma on the
// long shapes; bench/RESULTS.md "Session 3, the TMA kernel").
enum class KernelVariant { kNarrow, kWgmma, kTma, kAuto };

class TreeAttention {
 public:
  // A runner for the current CUDA device. kUnavailable without a device.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TreeAttention>> Create();

  TreeAttention(const TreeAttention&) = delete;
  TreeAttention& operator=(const TreeAttention&) = delete;
  ~TreeAttention();

  // Plans `args` and uploads the plan asynchronously on `stream`. Blocks only
  // until the previous Prepare's upload has left the staging buffer. `check`:
  // ValidateAttentionArgs' (attention_args.h); kPlanValidated only for a
  // caller that has itself validated this plan against this layout.
  [[nodiscard]] absl::Status Prepare(const AttentionArgs& args, PathChoice path, cudaStream_t stream,
                                     PlanCheck check = PlanCheck::kFull);
  // Runs the prepared plan: writes args.out and, when not null, args.lse.
  // REQUIRES: args describes the same plan shape as the last Prepare.
  [[nodiscard]] absl::Status Run(const AttentionArgs& args, cudaStream_t stream);
  // Plans the next decode step ahead of time: the step after the last
  // Prepare's plan in which every query row's leaf grows by one token
  // (next_decode_plan.h; `args` are the last Prepare's, its plan included),
  // and queues that plan's upload on `stream` behind the work already there
  // (the current step's Runs, which it does not disturb). Call it after the
  // step's last Run: the host plans while the GPU runs the step. The next
  // Prepare whose plan is exactly the guess, with the same other arguments,
  // path and stream, and no Prepare setting changed since, keeps that work
  // and returns after comparing the plans (O(plan size)); any other Prepare
  // plans as usual. Until that Prepare, Run fails with kFailedPrecondition.
  // Does nothing where the guess cannot be made (a leaf needs a new page, not
  // a decode plan) or for a one-token plan. Not while `stream` is being
  // captured into a graph (it may wait for the previous upload, as Prepare
  // does). Errors: those of Prepare.
  [[nodiscard]] absl::Status PrepareAhead(const AttentionArgs& args, PathChoice path, cudaStream_t stream);
  // Whether the last Prepare kept the work of a PrepareAhead.
  bool last_prepared_ahead() const { return last_prepared_ahead_; }
  // Prepare + Run.
  [[nodiscard]] absl::Status Attend(const AttentionArgs& args, PathChoice path, cudaStream_t stream);

  // Takes effect at the next Prepare. Default kAuto. Prepare fails with
  // kFailedPrecondition for kWgmma and kTma where wgmma_available() is false.
  void set_variant(KernelVariant variant) { SetPlanning(next_variant_, variant); }
  // The variant the last Prepare resolved (never kAuto).
  KernelVariant variant() const { return variant_; }
  // Whether the loaded kernel image has the sm_90a wgmma kernels (probed once
  // by Create).
  bool wgmma_available() const { return wgmma_available_; }
  // Whether the device runs thread-block clusters (compute capability 9.0+).
  bool cluster_available() const { return pdl_supported_; }
  // true: one launch of thread-block clusters instead of the item kernel and
  // the merge kernel: the plan is placed so that every partial of a set of rows
  // is written by the CTAs of one cluster (work_plan_cluster.h), which merge
  // those rows after a cluster barrier (PersistentTmaKernel with
  // kClusterMerge). Rows read a shared segment once per cluster, so this is
  // for small plans only. Applies where the resolved variant is kTma (16-bit
  // KV, compute capability 9.0+) and the path kAuto or kBatched; elsewhere the
  // usual plan and launches. Default false: H100, sessions 38 and 40
  // (bench/RESULTS.md), as fast as the default on the 64-leaf / 2,048 / 64
  // shape (16.1 us both, session 40; the merge phase ~2 us shorter, the items
  // ~1.3 us longer), slower on the one-row probe (10.8 vs 9.9 us) and on
  // every other shape of the sweep (a shared prefix read once per cluster, in
  // smaller row tiles). Takes effect at the next Prepare; cluster_placed()
  // says whether the last Prepare used it.
  void set_cluster_merge(bool on) { SetPlanning(cluster_merge_, on); }
  bool cluster_placed() const { return cluster_placed_; }
  // With the cluster merge: the query ranges the plan's rows are cut into
  // (ClusterGrid::query_parts; 0, the default: the planner's). Benchmarks.
  // Takes effect at the next Prepare.
  void set_cluster_query_parts(int32_t parts) { SetPlanning(cluster_query_parts_, parts); }
  // With the cluster merge: CTAs per cluster, 2-16 (past 8 the device's
  // non-portable sizes). Default kClusterSize (H100, session 38: 16-CTA
  // clusters, of which 7 fit at once, ran the small shape in 17.3 us, 8-CTA
  // ones in 15.7; session 40: clusters of 2 on the large h32/8 plans, whose
  // per-CTA work they match, ran 7-39% slower than the default placement and
  // its merge kernel, the headline 169.6 vs 153.0 us). Takes effect at the
  // next Prepare.
  static constexpr int32_t kClusterSize = 8;
  void set_cluster_size(int32_t size) { SetPlanning(cluster_size_, std::clamp<int32_t>(size, 2, 16)); }
  // kWgmma only: batched items of at most `rows` rows run the kNarrow tile
  // inside the same launch instead of a 64-row warpgroup tile. Default
  // kWgmmaNarrowRows (0: every batched item on wgmma, measured faster on
  // every shape of the sweep). Takes effect at the next Run.
  static constexpr int32_t kWgmmaNarrowRows = 0;
  // kAuto picks kWgmma only when the work plan's batched items average at
  // least this many 64-token KV tiles. H100, the 28 bench shapes
  // (bench/RESULTS.md): at >= 4 tiles per item kWgmma ran at 0.98-1.39x the
  // speed of kNarrow (faster on 19 of 21), at <= 2.53 kNarrow was 1.02-1.23x
  // faster on all 7 (short prefixes, 64-token suffixes).
  static constexpr double kWgmmaMinMeanTiles = 3.0;
  void set_wgmma_narrow_rows(int32_t rows) { wgmma_narrow_rows_ = rows; }
  // Fewest KV tokens of a split-K chunk (DeviceModel::min_chunk). Takes
  // effect at the next Prepare. Default kMinChunk.
  void set_min_chunk(int32_t tokens) { SetPlanning(min_chunk_, tokens); }
  // true (default): a Prepare whose plan has the previous Prepare's topology
  // (a decode step after the last) refreshes the previous work plan instead of
  // building one (WorkPlanner, work_plan.h); false: every Prepare builds.
  void set_refresh_plans(bool refresh) {
    planner_.set_refresh(refresh);
    ahead_ready_ = false;  // planned with the old setting
  }
  // true: the persistent kernel merges each query row itself (the CTA that
  // finishes the row's last item), one launch instead of two, where every row
  // has an item. Measured slower on the H100 for large tiles (a 128-row item
  // can finish 32 rows at once and its CTA then merges them alone, while the
  // merge kernel spreads rows over every SM), so false by default. Takes
  // effect at the next Run.
  void set_fused_merge(bool fused) { fused_merge_ = fused; }
  // true (default): on compute capability 9.0+ the merge kernel is launched
  // as a programmatic dependent launch (its launch and prologue overlap the
  // item kernel); false: a plain second launch. Takes effect at the next Run.
  void set_overlap_merge(bool overlap) { overlap_merge_ = overlap; }
  // true (default): on compute capability 9.0+ the kTma item kernel is a
  // programmatic dependent launch too: its CTAs start (barriers, plan data)
  // while the kernel before it in the stream finishes, and wait for that
  // kernel only before their first q and KV loads (kernels/tree_tma.cuh).
  // false: a plain launch. Takes effect at the next Run.
  void set_overlap_start(bool overlap) { overlap_start_ = overlap; }
  // true (default): a CTA's consecutive batched items share one KV pipeline
  // (the next item's first KV tiles load during the current item); false:
  // every item fills and drains its own. Takes effect at the next Run.
  void set_chain_items(bool chain) { chain_items_ = chain; }
  // true: one launch: the persistent kernel is a cooperative launch (every
  // CTA resident) and, after a grid-wide barrier, all CTAs merge the rows
  // (spread like the merge kernel). Overrides the fused and overlapped merge.
  // Default false. Takes effect at the next Run; a kTma launch ignores it (a
  // Prepare after setting it resolves kTma to kWgmma).
  void set_grid_merge(bool grid_merge) { SetPlanning(grid_merge_, grid_merge); }
  // kNarrow only. true (default): batched items of at most kGroupRows rows
  // and one KV tile are planned in groups (WorkItem::group) that the kernel
  // runs at once, one warp per item, in plans with at least kGroupMinPerCta
  // such items per CTA (H100: 12-25% faster there, slower with fewer;
  // attention/PERF_NOTES.md session 3). Takes effect at the next Prepare.
  void set_group_items(bool group) { SetPlanning(group_items_, group); }
  // kNarrow only. true (default): each CTA's first item reads its page ids
  // and q rows from the CTA's head (work_plan.h) instead of the plan arrays.
  // Takes effect at the next Run.
  void set_cta_head(bool use) { use_head_ = use; }
  // true (default): each CTA's light items (per-sequence suffix tiles, bound
  // by memory) run partly before and partly after its first heavy item
  // (WorkShape::spread_light) instead of all at its end. Takes effect at the
  // next Prepare.
  void set_spread_light(bool spread) { SetPlanning(spread_light_, spread); }
  // How plans of a few long runs (e.g. a few long sequences' decode) are
  // placed (work_plan.h StreamKMode): kAuto (default) stream-K style where
  // the cost model expects that to pay; kOff split-K chunks placed whole (the
  // fixed split); kAlways stream-K wherever it can take the plan (tests and
  // benchmarks). Takes effect at the next Prepare.
  void set_stream_k(StreamKMode mode) { SetPlanning(stream_k_, mode); }
  // kTma (head dims 64 and 128): how many of the grid's CTAs run the light items
  // (a few rows of one entry, e.g. leaves' own suffixes: WorkShape::light_ctas,
  // work_plan.h) on SMs of their own, one item per warp (kernels/light.cuh),
  // beside the heavy CTAs' tensor-core work. -1 (default): the cost model's
  // count (0 where splitting does not pay; H100: the engine's 256 x 2K decode
  // step splits, 13% faster, bench/RESULTS.md session 8); 0: none; n: n (at
  // most all but one CTA, and none for a plan without heavy items). Takes
  // effect at the next Prepare.
  void set_light_ctas(int32_t n) { SetPlanning(light_ctas_, n); }
  // Benchmarks only (timing the light split's choices apart): the dominant
  // heavy segment's chunk count when there are light CTAs
  // (WorkShape::light_chunks); 0 (default): the cost model's. Takes effect at
  // the next Prepare.
  void set_light_chunks(int32_t n) { SetPlanning(light_chunks_, n); }
  // Benchmarks and tuning only: the cost model's rates (work_plan.h
  // DeviceModel; its num_sms, ctas_per_sm and min_chunk are this device's and
  // set_min_chunk's whatever `rates` says), e.g. to time a refit of the light
  // split's rates before it is compiled in. Default DeviceModel{}. Takes
  // effect at the next Prepare.
  void set_cost_rates(const DeviceModel& rates) { SetPlanning(cost_rates_, rates); }
  // Benchmarks only: device buffers that the next Runs fill with timestamps
  // (kernels/params.cuh kTraceItemWords per item CTA, grid_size() CTAs;
  // kTraceMergeWords per merge CTA, merge_grid_size() CTAs); nullptr: none.
  void set_trace(unsigned long long* items, unsigned long long* merge) {
    trace_items_ = items;
    trace_merge_ = merge;
  }
  // CTAs of the merge launch for the prepared plan.
  int32_t merge_grid_size() const;

  // kTma only: the two consumer warpgroups take turns issuing their
  // products (FlashAttention-3's ping-pong) instead of running freely.
  // Default kTmaPingPong. Takes effect at the next Run.
  static constexpr bool kTmaPingPong = false;
  void set_tma_pingpong(bool pingpong) { tma_pingpong_ = pingpong; }
  // kTma only: items of at most 64 packed rows (one warpgroup's worth) go
  // to the two consumer warpgroups alternately, so that both compute; false:
  // warpgroup 0 runs every such item while warpgroup 1 waits. Default
  // kTmaSplitSmall. Takes effect at the next Run.
  static constexpr bool kTmaSplitSmall = true;
  void set_tma_split_small(bool split) { tma_split_small_ = split; }
  // kTma only. true (default): at head dim 128 with shared rings (the lean
  // register split's launches; the kernel compiles the gate into those only),
  // each CTA's KV producer issues one tile, then waits until the first item's
  // q rows are on their way before filling the rest of its ring
  // (kernels/tree_tma.cuh kTmaGateStart); false: never. Takes effect at the
  // next Run.
  void set_tma_gate_start(bool gate) { tma_gate_start_ = gate; }
  // kTma only: how the producer feeds K and V. kShared: one warp loads both
  // into stages released as a whole; kSplit: two warps, K and V on barriers
  // of their own (K released after S, V after P . V). kAuto: kShared where
  // at least kTmaSharedMinShare of the plan's tiles have pages with
  // consecutive ids (ConsecutivePageTileShare), else kSplit. H100
  // (bench/RESULTS.md session 5): kSplit 11-14% faster with scattered page
  // ids on the large shapes, 2-4% slower with ordered ones. Takes effect at
  // the next Prepare.
  enum class TmaRings { kAuto, kShared, kSplit };
  static constexpr double kTmaSharedMinShare = 0.5;
  void set_tma_rings(TmaRings rings) { SetPlanning(tma_rings_, rings); }
  bool tma_split_kv() const { return tma_split_kv_; }
  // kTma at head dim 128 with kAuto rings: a short plan (at most
  // kTmaShortPlanTilesPerCta KV tiles per CTA, BatchedTilesPerCta) is fed by
  // split rings with one box per page and 64 columns whatever its page order:
  // its time goes to the first, cold loads, which many small boxes bring in
  // sooner than one whole-tile box. H200 (bench/RESULTS.md session 12): small
  // shape 15.7 -> 15.0 us, h8/1 L64 P2048 S512 21.0 -> 19.7; a plan of 124
  // tiles per CTA 3% slower so fed. Measured at head dim 128 only. Takes
  // effect at the next Prepare.
  static constexpr double kTmaShortPlanTilesPerCta = 8.0;
  void set_tma_short_plan_boxes(bool on) { SetPlanning(tma_short_plan_boxes_, on); }
  bool tma_page_boxes() const { return tma_page_boxes_; }

  const WorkPlan& work_plan() const { return work(); }
  // Whether the last Prepare refreshed its work plan instead of building one.
  bool plan_refreshed() const { return planner_.last_refreshed(); }
  int32_t grid_size() const { return grid_; }
  int32_t num_sms() const { return num_sms_; }

 private:
  // Whether the merge launch preloads every slot of its few (row, head) pairs (MergeKernel<D, 24>):
  // for the prepared plan, or for `queries` rows of `q_heads` heads.
  bool wide_merge() const;
  bool WideMerge(int64_t queries, int32_t q_heads) const;
  TreeAttention() = default;
  absl::Status Upload(const AttentionPlan& plan, cudaStream_t stream);
  // ctas_per_sm of a kernel, configured (its shared-memory limit) on first
  // use only: the driver calls cost ~6 us per Prepare on the H100's host,
  // where the GPU waits for Prepare at every decode step.
  template <typename Kernel>
  absl::StatusOr<int> Configured(Kernel* kernel, int threads, int smem_bytes);
  std::vector<std::pair<const void*, int>> configured_;
  // kv_maps_ for args' pool, layout and KV dtype, encoded only when one of
  // them changed (the maps cover every layer: one encoding serves a step).
  absl::Status UpdateKvMaps(const AttentionArgs& args);

  KernelVariant next_variant_ = KernelVariant::kAuto;
  KernelVariant variant_ = KernelVariant::kNarrow;
  bool wgmma_available_ = false;
  int32_t wgmma_narrow_rows_ = kWgmmaNarrowRows;
  int32_t min_chunk_ = kMinChunk;
  bool fused_merge_ = false;
  bool overlap_merge_ = true;
  bool overlap_start_ = true;
  bool chain_items_ = true;
  bool grid_merge_ = false;
  bool tma_pingpong_ = kTmaPingPong;
  bool tma_split_small_ = kTmaSplitSmall;
  bool tma_gate_start_ = true;
  TmaRings tma_rings_ = TmaRings::kAuto;
  bool tma_split_kv_ = false;
  // ConsecutivePageTileShare of the work plan's last build (-1: not judged
  // yet); refreshes reuse it.
  double consecutive_share_ = -1.0;
  bool tma_short_plan_boxes_ = true;
  bool tma_page_boxes_ = false;
  bool group_items_ = true;
  bool use_head_ = true;
  bool spread_light_ = true;
  StreamKMode stream_k_ = StreamKMode::kAuto;
  int32_t light_ctas_ = -1;
  int32_t light_chunks_ = 0;
  DeviceModel cost_rates_;
  unsigned long long* trace_items_ = nullptr;
  unsigned long long* trace_merge_ = nullptr;
  bool pdl_supported_ = false;  // compute capability >= 9.0
  int32_t num_sms_ = 0;
  int32_t grid_ = 0;
  int merge_ctas_per_sm_ = 8;  // resident CTAs of the prepared plan's merge kernel (Prepare)
  const void* merge_kernel_ = nullptr;  // that merge kernel (Prepare: MergeKernelFor), launched by Run
  const WorkPlan& work() const { return cluster_placed_ ? cluster_plan_ : planner_.plan(); }
  WorkPlanner planner_;  // the work plan; refreshed across decode steps (work_plan.h)
  // The cluster merge's plan (work_plan_cluster.h), built at every Prepare that places one.
  WorkPlan cluster_plan_;
  bool cluster_merge_ = false;
  bool cluster_placed_ = false;
  int32_t cluster_query_parts_ = 0;
  int32_t cluster_size_ = kClusterSize;
  // Clusters of a cluster-merge kernel the device holds at once, per kernel
  // and cluster size (probed once each): the grid is that many clusters.
  struct ClusterCount {
    const void* kernel;
    int32_t size;
    int clusters;
  };
  std::vector<ClusterCount> cluster_counts_;
  template <typename Kernel>
  absl::StatusOr<int> ActiveClusters(Kernel* kernel, int threads, int smem_bytes);
  // The kTma kernel's tensor maps and what they were encoded for.
  KvTensorMaps kv_maps_;
  const void* kv_maps_pool_ = nullptr;
  KvLayout kv_maps_layout_;
  DType kv_maps_dtype_ = DType::kBf16;
  // Completion counters of the fused merge, one per query row (bucketed),
  // then the two ints of the grid merge's barrier; zero between launches
  // (each launch resets what it used).
  gpu::DeviceBuffer query_done_;
  void RememberPreparedShape(const AttentionArgs& args);
  // The prepared plan has every query row seeing exactly one KV token: Run
  // gathers V (kernels/single_token.cuh) instead of items and a merge.
  bool single_token_ = false;
  std::vector<int32_t> row_token_;  // then each row's token: page id, slot
  // Shape of the prepared plan, checked by Run.
  const AttentionPlan* prepared_plan_ = nullptr;
  int32_t prepared_queries_ = -1;
  int32_t prepared_entries_ = -1;
  int32_t prepared_q_heads_ = 0;
  int32_t prepared_head_dim_ = 0;
  DType prepared_kv_dtype_ = DType::kBf16;
  // PrepareAhead's guess, and what it was prepared with (ahead_ready_: the
  // blob, the work plan and the variant are the guess's).
  bool ahead_ready_ = false;
  bool last_prepared_ahead_ = false;
  AttentionPlan ahead_plan_;
  AttentionArgs ahead_args_;
  PathChoice ahead_path_ = PathChoice::kAuto;
  cudaStream_t ahead_stream_ = nullptr;
  // A setting that Prepare reads: a PrepareAhead's work was planned with the
  // old value, so it is dropped.
  template <typename T>
  void SetPlanning(T& setting, T value) {
    setting = value;
    ahead_ready_ = false;
  }
  // Whether the next Prepare can keep PrepareAhead's work for these arguments.
  bool AheadMatches(const AttentionArgs& args, PathChoice path, cudaStream_t stream) const;
  // Device copies: one int32 blob with arrays at bucketed offsets, the partials.
  gpu::DeviceBuffer blob_;
  gpu::PinnedBuffer staging_;
  gpu::DeviceBuffer partials_;
  cudaEvent_t staging_free_ = nullptr;
  static constexpr int kNumUploadArrays = 19;  // the arrays Upload copies (tree_attention.cu)
  int64_t offsets_[kNumUploadArrays + 1] = {};
};

// Bifurcated attention (bifurcated-attention 4.2-4.3): one shared context and
// one suffix per sample, row i = sample i. A thin entry point: builds the
// two-level plan (bifurcated.h) and runs it with `runner`. `args.plan` is
// ignored; the other fields are as for Run.
[[nodiscard]] absl::Status BifurcatedAttention(TreeAttention& runner, const AttentionArgs& args,
                                               const PagedRun& context, absl::Span<const PagedRun> samples,
                                               cudaStream_t stream);

}  // namespace banyan::attention

#endif  // BANYAN_ATTENTION_TREE_ATTENTION_H_
