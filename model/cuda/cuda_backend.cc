#include "model/cuda/cuda_backend.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "attention/attention_args.h"
#include "banyan/status_macros.h"
#include "model/cuda/attention_call.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/ops.h"
#include "model/sampling/greedy_cuda.h"
#include "model/sampling/sample_cuda.h"
#include "sdk/base/logging.h"
#include "sdk/gpu/blas.h"
#include "sdk/gpu/cuda_status.h"
#include "sdk/gpu/device_buffer.h"

namespace banyan::model {
namespace {

using cuda::bf16_bits;

absl::Status CheckConfig(const ModelConfig& c) {
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 ||
      c.num_q_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0) {
    return absl::InvalidArgumentError("CUDA backend: config has a non-positive size");
  }
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError("CUDA backend: odd head_dim (RoPE needs pairs)");
  if (c.num_q_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: ", c.num_q_heads,
                                                   " query heads not a multiple of ", c.num_kv_heads,
                                                   " KV heads"));
  }
  if (!(c.rms_norm_eps > 0)) return absl::InvalidArgumentError("CUDA backend: rms_norm_eps must be positive");
  return absl::OkStatus();  // RoPE parameters are checked by RopeInvFreq.
}

// Grows `buf` to at least `bytes` (contents are not kept).
absl::Status Reserve(gpu::DeviceBuffer& buf, size_t bytes) {
  if (buf.size() >= bytes) return absl::OkStatus();
  buf = gpu::DeviceBuffer();  // free first: the old size may be most of the device
  BANYAN_ASSIGN_OR_RETURN(buf, gpu::DeviceBuffer::Allocate(bytes));
  return absl::OkStatus();
}

// ForwardValidated's queue_results where nothing is read back beyond what Run queues.
absl::Status NoResults() { return absl::OkStatus(); }

class CudaBackend final : public Backend {
 public:
  CudaBackend(ModelConfig config, const CudaBackendOptions& options, gpu::Stream stream, gpu::BlasHandle blas,
              cuda::DeviceWeights weights, gpu::Event results_ready)
      : config_(std::move(config)),
        device_(options.device),
        stream_(std::move(stream)),
        blas_(std::move(blas)),
        w_(std::move(weights)),
        attention_(options.attention),
        plan_ahead_(options.plan_ahead),
        results_ready_(std::move(results_ready)),
        split_(options.activations == Activations::kSplitBf16 ? 2 : 1) {}
  // Split weights: the lo parts were uploaded (CreateCudaBackend).
  bool split_weights() const { return w_.embed_lo.data() != nullptr; }

  std::string_view name() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }
  MemorySpace kv_memory_space() const override { return MemorySpace::kDevice; }

  absl::Status Forward(const ForwardBatch& batch, const KvCache& kv, absl::Span<float> logits) override;
  // Greedy rows on the device (model/sampling/greedy_cuda.h): 12 bytes per
  // logit row come back instead of the row.
  bool supports_greedy() const override { return true; }
  absl::Status ForwardGreedy(const ForwardBatch& batch, const KvCache& kv, absl::Span<int32_t> tokens,
                             absl::Span<float> logprobs) override;
  // Sampled draws on the device (model/sampling/sample_cuda.h): 32 bytes per
  // draw go up, 12 come back.
  bool supports_sampling() const override { return true; }
  absl::Status ForwardSample(const ForwardBatch& batch, const KvCache& kv,
                             absl::Span<const sampling::DeviceDraw> draws,
                             absl::Span<sampling::DrawResult> results) override;

 private:
  // Forward after validation; logits == nullptr leaves them on the device.
  // `queue_results` queues what the caller reads back after the pass (the
  // greedy or sampling kernels and their copies): all of it is queued before
  // the host waits, so the GPU runs it without a host round trip between.
  absl::Status ForwardValidated(const ForwardBatch& batch, const KvCache& kv, float* logits,
                                absl::FunctionRef<absl::Status()> queue_results);
  // Grows a device buffer of per-row / per-draw results and its pinned host
  // copy to at least `bytes` (a power of two); called before the pass, so that
  // nothing can fail between the pass and its results.
  absl::Status ReserveResults(gpu::DeviceBuffer& device, gpu::PinnedBuffer& host, size_t bytes);
  gpu::DeviceBuffer greedy_;       // ForwardGreedy: [logit rows] tokens, logprobs, bad flags
  gpu::PinnedBuffer greedy_host_;  // the same, on the host
  gpu::DeviceBuffer draws_;        // ForwardSample: [draws] DeviceDraw, then [draws] DrawResult
  gpu::PinnedBuffer draws_host_;   // the same, on the host

 private:
  // Grows the scratch buffers to `rows` query rows and `logit_rows` logits.
  absl::Status EnsureScratch(int64_t rows, int64_t logit_rows);
  // y = x . w^T: bf16 x [rows, in] and w [out, in], fp32 y [rows, out].
  // With split weights (w_lo not empty) the first lo_rows rows of y also get
  // x . w_lo^T added (a second GEMM with beta = 1): the hi activation rows
  // only, x_lo . w_lo being skipped.
  absl::Status Linear(const void* x, const gpu::DeviceBuffer& w, const gpu::DeviceBuffer& w_lo, int64_t rows,
                      int64_t lo_rows, int64_t in, int64_t out, void* y) {
    BANYAN_RETURN_IF_ERROR(gpu::Gemm(blas_, {.m = static_cast<int>(rows), .n = static_cast<int>(out),
                                             .k = static_cast<int>(in), .a = x, .b = w.data(), .c = y,
                                             .ab_dtype = DType::kBf16, .c_dtype = DType::kF32},
                                     stream_.get()));
    if (w_lo.data() == nullptr) return absl::OkStatus();
    return gpu::Gemm(blas_, {.m = static_cast<int>(lo_rows), .n = static_cast<int>(out),
                             .k = static_cast<int>(in), .a = x, .b = w_lo.data(), .c = y,
                             .ab_dtype = DType::kBf16, .c_dtype = DType::kF32, .beta = 1.0f},
                     stream_.get());
  }
  absl::Status Run(const ForwardBatch& batch, const KvCache& kv, int64_t n, int64_t m, float* logits);

  ModelConfig config_;
  int device_;
  gpu::Stream stream_;
  gpu::BlasHandle blas_;
  cuda::DeviceWeights w_;
  cuda::AttentionRunner attention_;
  const bool plan_ahead_;  // CudaBackendOptions::plan_ahead
  // Recorded after a pass's results are queued: the host waits for it, not
  // for the next pass's attention upload that PrepareAhead queues behind it.
  gpu::Event results_ready_;
  // 2 with split activations (Activations::kSplitBf16): the GEMM inputs that
  // are split hold rows [hi; lo], their outputs [hi product; lo product].
  const int64_t split_;

  int64_t rows_capacity_ = 0;
  int64_t logits_capacity_ = 0;
  // Host staging (pinned) and its device copy: tokens, positions, pages, slots,
  // logit rows, then the embedding's bad-row flag.
  gpu::PinnedBuffer staging_;
  gpu::DeviceBuffer staging_device_;
  // Activations.
  // Activations; S = split_ (the split buffers' second half is the lo part).
  gpu::DeviceBuffer residual_;  // [rows, H] fp32
  gpu::DeviceBuffer normed_;    // [S rows, H] bf16
  gpu::DeviceBuffer qkv_;       // [S rows, (nq + 2 nkv) D] fp32
  gpu::DeviceBuffer q_;         // [rows, nq D] bf16 (rotated, contiguous)
  gpu::DeviceBuffer attn_;      // [rows, nq D] bf16
  gpu::DeviceBuffer proj_;      // [S rows, H] fp32 (o_proj: rows only; down_proj: S rows)
  gpu::DeviceBuffer gate_up_;   // [S rows, 2 I] fp32
  gpu::DeviceBuffer act_;       // [S rows, I] bf16
  gpu::DeviceBuffer picked_;    // [S logit rows, H] bf16 (hi rows, then lo rows)
  gpu::DeviceBuffer logits_;    // [logit rows, V] fp32
};

absl::Status CudaBackend::EnsureScratch(int64_t rows, int64_t logit_rows) {
  if (rows > rows_capacity_) {
    int64_t cap = 16;
    while (cap < rows) cap *= 2;
    const int64_t H = config_.hidden_size, I = config_.intermediate_size, D = config_.head_dim;
    const int64_t q_dim = config_.num_q_heads * D, qkv_dim = q_dim + 2 * config_.num_kv_heads * D;
    const size_t staging_bytes = static_cast<size_t>(5 * cap + 4) * sizeof(int32_t);
    BANYAN_ASSIGN_OR_RETURN(staging_, gpu::PinnedBuffer::Allocate(staging_bytes));
    BANYAN_RETURN_IF_ERROR(Reserve(staging_device_, staging_bytes));
    const int64_t S = split_;
    BANYAN_RETURN_IF_ERROR(Reserve(residual_, cap * H * 4));
    BANYAN_RETURN_IF_ERROR(Reserve(normed_, S * cap * H * 2));
    BANYAN_RETURN_IF_ERROR(Reserve(qkv_, S * cap * qkv_dim * 4));
    BANYAN_RETURN_IF_ERROR(Reserve(q_, cap * q_dim * 2));
    BANYAN_RETURN_IF_ERROR(Reserve(attn_, cap * q_dim * 2));
    BANYAN_RETURN_IF_ERROR(Reserve(proj_, S * cap * H * 4));
    BANYAN_RETURN_IF_ERROR(Reserve(gate_up_, S * cap * 2 * I * 4));
    BANYAN_RETURN_IF_ERROR(Reserve(act_, S * cap * I * 2));
    rows_capacity_ = cap;
  }
  if (logit_rows > logits_capacity_) {
    int64_t cap = 16;
    while (cap < logit_rows) cap *= 2;
    BANYAN_RETURN_IF_ERROR(Reserve(picked_, split_ * cap * config_.hidden_size * 2));
    BANYAN_RETURN_IF_ERROR(Reserve(logits_, cap * config_.vocab_size * 4));
    logits_capacity_ = cap;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Forward(const ForwardBatch& batch, const KvCache& kv, absl::Span<float> logits) {
  BANYAN_RETURN_IF_ERROR(ValidateForwardRows(config_, batch, kv, logits.size()));
  return ForwardValidated(batch, kv, logits.data(), NoResults);
}

absl::Status CudaBackend::ReserveResults(gpu::DeviceBuffer& device, gpu::PinnedBuffer& host, size_t bytes) {
  if (host.size() >= bytes) return absl::OkStatus();
  size_t capacity = 4096;  // powers of two: a batch that grows a little does not reallocate every step
  while (capacity < bytes) capacity *= 2;
  BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  BANYAN_RETURN_IF_ERROR(Reserve(device, capacity));
  BANYAN_ASSIGN_OR_RETURN(host, gpu::PinnedBuffer::Allocate(capacity));
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardGreedy(const ForwardBatch& batch, const KvCache& kv, absl::Span<int32_t> tokens,
                                        absl::Span<float> logprobs) {
  const size_t m = batch.logit_rows.size();
  if (tokens.size() < m || logprobs.size() < m) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: ", m, " logit rows but room for ", tokens.size(),
                                                   " tokens and ", logprobs.size(), " logprobs"));
  }
  // Validated as a Forward whose logits would fit (they stay on the device).
  BANYAN_RETURN_IF_ERROR(ValidateForwardRows(config_, batch, kv, m * static_cast<size_t>(config_.vocab_size)));
  if (m == 0) return ForwardValidated(batch, kv, nullptr, NoResults);
  BANYAN_RETURN_IF_ERROR(ReserveResults(greedy_, greedy_host_, 12 * m));
  BANYAN_RETURN_IF_ERROR(ForwardValidated(batch, kv, nullptr, [&]() -> absl::Status {
    const sampling::GreedyRowsArgs args{.logits = logits_.As<float>(),
                                        .rows = static_cast<int32_t>(m),
                                        .vocab = static_cast<int32_t>(config_.vocab_size),
                                        .tokens = greedy_.As<int32_t>(),
                                        .logprobs = greedy_.As<float>() + m,
                                        .bad = greedy_.As<int32_t>() + 2 * m};
    BANYAN_RETURN_IF_ERROR(sampling::LaunchGreedyRows(args, stream_.get()));
    BANYAN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(greedy_host_.data(), greedy_.data(), 12 * m, cudaMemcpyDeviceToHost, stream_.get()));
    return absl::OkStatus();
  }));
  const int32_t* token = greedy_host_.As<int32_t>();
  const float* logprob = greedy_host_.As<float>() + m;
  const int32_t* bad = token + 2 * m;
  for (size_t i = 0; i < m; ++i) {
    tokens[i] = bad[i] != 0 ? -1 : token[i];
    logprobs[i] = logprob[i];
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardSample(const ForwardBatch& batch, const KvCache& kv,
                                        absl::Span<const sampling::DeviceDraw> draws,
                                        absl::Span<sampling::DrawResult> results) {
  const size_t m = batch.logit_rows.size(), n = draws.size();
  if (results.size() < n) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: ", n, " draws but room for ", results.size(),
                                                   " results"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (draws[i].row < 0 || static_cast<size_t>(draws[i].row) >= m) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA backend: draw ", i, " reads logits row ", draws[i].row,
                                                     " of ", m));
    }
  }
  BANYAN_RETURN_IF_ERROR(ValidateForwardRows(config_, batch, kv, m * static_cast<size_t>(config_.vocab_size)));
  if (n == 0) return ForwardValidated(batch, kv, nullptr, NoResults);
  const size_t up = n * sizeof(sampling::DeviceDraw), down = n * sizeof(sampling::DrawResult);
  BANYAN_RETURN_IF_ERROR(ReserveResults(draws_, draws_host_, up + down));
  std::memcpy(draws_host_.data(), draws.data(), up);
  BANYAN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(draws_.data(), draws_host_.data(), up, cudaMemcpyHostToDevice, stream_.get()));
  char* host_results = draws_host_.As<char>() + up;
  BANYAN_RETURN_IF_ERROR(ForwardValidated(batch, kv, nullptr, [&]() -> absl::Status {
    auto* device_results = reinterpret_cast<sampling::DrawResult*>(draws_.As<char>() + up);
    const sampling::SampleRowsArgs args{.logits = logits_.As<float>(),
                                        .rows = static_cast<int32_t>(m),
                                        .vocab = static_cast<int32_t>(config_.vocab_size),
                                        .draws = draws_.As<sampling::DeviceDraw>(),
                                        .num_draws = static_cast<int32_t>(n),
                                        .results = device_results};
    BANYAN_RETURN_IF_ERROR(sampling::LaunchSampleRows(args, stream_.get()));
    BANYAN_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host_results, device_results, down, cudaMemcpyDeviceToHost, stream_.get()));
    return absl::OkStatus();
  }));
  std::memcpy(results.data(), host_results, down);
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardValidated(const ForwardBatch& batch, const KvCache& kv, float* logits,
                                           absl::FunctionRef<absl::Status()> queue_results) {
  if (kv.dtype != DType::kBf16) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA backend: the KV pool must be bf16, got ",
                                                   std::string(DTypeName(kv.dtype))));
  }
  const int64_t n = static_cast<int64_t>(batch.tokens.size());
  const int64_t m = static_cast<int64_t>(batch.logit_rows.size());
  if (n == 0) return ValidateForwardPlan(batch, kv);  // nothing to run; the plan is checked all the same
  if (n > INT32_MAX / 8 || m > INT32_MAX / 8) return absl::InvalidArgumentError("CUDA backend: batch too large");
  BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
  BANYAN_RETURN_IF_ERROR(EnsureScratch(n, m));
  absl::Status status = Run(batch, kv, n, m, logits);
  if (status.ok()) status = queue_results();
  if (status.ok()) status = results_ready_.Record(stream_.get());
  // The next decode pass's attention planned while the GPU runs this one. Its
  // failure costs this pass nothing (its results are queued, the next pass
  // plans as usual): logged, not returned; a sticky CUDA error shows below.
  if (status.ok() && plan_ahead_) {
    if (const absl::Status ahead = attention_.PrepareAhead(stream_.get()); !ahead.ok()) {
      BANYAN_LOG(WARNING) << "CUDA backend: planning the next pass ahead failed: " << ahead;
    }
  }
  // Never leave work in flight that reads the caller's spans or pool (the
  // upload PrepareAhead queued after the results reads neither: it may run on).
  const absl::Status sync = status.ok() ? results_ready_.Synchronize() : stream_.Synchronize();
  BANYAN_RETURN_IF_ERROR(status);
  BANYAN_RETURN_IF_ERROR(sync);
  const int32_t* flag = staging_.As<int32_t>() + 5 * rows_capacity_;
  return cuda::EmbeddingBadRowStatus(*flag);
}

absl::Status CudaBackend::Run(const ForwardBatch& batch, const KvCache& kv, int64_t n, int64_t m,
                              float* logits) {
  const ModelConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim, V = c.vocab_size;
  const int64_t q_dim = c.num_q_heads * D, kv_dim = c.num_kv_heads * D, qkv_dim = q_dim + 2 * kv_dim;
  cudaStream_t stream = stream_.get();

  // One upload of every per-row array.
  const int64_t cap = rows_capacity_;
  int32_t* host = staging_.As<int32_t>();
  std::memcpy(host, batch.tokens.data(), n * 4);
  std::memcpy(host + cap, batch.positions.data(), n * 4);
  std::memcpy(host + 2 * cap, batch.kv_pages.data(), n * 4);
  std::memcpy(host + 3 * cap, batch.kv_slots.data(), n * 4);
  if (m > 0) std::memcpy(host + 4 * cap, batch.logit_rows.data(), m * 4);
  host[5 * cap] = INT32_MAX;
  BANYAN_RETURN_IF_ERROR(staging_device_.CopyFromHost(host, (5 * cap + 1) * 4, stream));
  const int32_t* d_tokens = staging_device_.As<int32_t>();
  const int32_t* d_positions = d_tokens + cap;
  const int32_t* d_pages = d_tokens + 2 * cap;
  const int32_t* d_slots = d_tokens + 3 * cap;
  const int32_t* d_logit_rows = d_tokens + 4 * cap;
  int32_t* d_bad_row = staging_device_.As<int32_t>() + 5 * cap;

  const int rows = static_cast<int>(n);
  const bool split = split_ == 2;
  float* residual = residual_.As<float>();
  bf16_bits* normed = normed_.As<bf16_bits>();
  bf16_bits* normed_lo = split ? normed + n * H : nullptr;
  float* qkv = qkv_.As<float>();
  float* proj = proj_.As<float>();
  float* gate_up = gate_up_.As<float>();
  bf16_bits* act = act_.As<bf16_bits>();

  BANYAN_RETURN_IF_ERROR(cuda::LaunchEmbedding(
      {.rows = rows, .dim = static_cast<int32_t>(H), .vocab = static_cast<int32_t>(V), .ids = d_tokens,
       .table = w_.embed.As<bf16_bits>(), .table_lo = w_.embed_lo.As<bf16_bits>(), .out = residual, .bad_row = d_bad_row},
      stream));
  // The down projection's lo product of the previous layer (none before layer 0).
  const float* down_lo = nullptr;
  for (int32_t layer = 0; layer < c.num_layers; ++layer) {
    const cuda::DeviceLayer& w = w_.layers[static_cast<size_t>(layer)];
    // h += mlp_out of the previous layer (none before layer 0); normed = norm(h).
    BANYAN_RETURN_IF_ERROR(cuda::LaunchRmsNorm(
        {.rows = rows, .dim = static_cast<int32_t>(H), .eps = c.rms_norm_eps, .residual = residual,
         .add = layer == 0 ? nullptr : proj, .add_lo = layer == 0 ? nullptr : down_lo,
         .weight = w.input_norm.As<float>(), .out = normed, .out_lo = normed_lo},
        stream));
    BANYAN_RETURN_IF_ERROR(Linear(normed, w.qkv, w.qkv_lo, split_ * n, n, H, qkv_dim, qkv));
    // The plan's O(plan) check (the rest of ValidateForwardBatch ran before
    // the pass) while the GPU runs what is queued so far, which writes only
    // scratch: the pool's first write, the epilogue below, comes after it.
    if (layer == 0) BANYAN_RETURN_IF_ERROR(ValidateForwardPlan(batch, kv));
    // Bias, RoPE on q (into q_) and k, and the new K/V into the pool, in one kernel.
    BANYAN_RETURN_IF_ERROR(cuda::LaunchQkvEpilogue(
        {.rows = rows, .num_q_heads = c.num_q_heads, .num_kv_heads = c.num_kv_heads, .head_dim = c.head_dim,
         .qkv = qkv, .qkv_lo = split ? qkv + n * qkv_dim : nullptr,
         .bias = w.qkv_bias.data() != nullptr ? w.qkv_bias.As<float>() : nullptr,
         .positions = d_positions, .inv_freq = w_.inv_freq_device.As<float>(), .q_out = q_.As<bf16_bits>(),
         .layer = layer, .layout = kv.layout, .page = d_pages, .slot = d_slots,
         .pool = static_cast<bf16_bits*>(kv.data)},
        stream));
    if (layer == 0) {
      // Planned only now, with the embedding and layer 0's norm, QKV product and
      // epilogue already queued: the GPU runs them while the host builds the
      // attention work plan (host time that the GPU would otherwise wait for).
      // ValidateForwardRows (the caller) and ValidateForwardPlan (above) accepted this plan.
      BANYAN_RETURN_IF_ERROR(attention_.Prepare(*batch.plan, c, kv, q_.data(), attn_.data(), stream,
                                                attention::PlanCheck::kPlanValidated));
    }
    BANYAN_RETURN_IF_ERROR(attention_.Run(layer, stream));
    BANYAN_RETURN_IF_ERROR(Linear(attn_.data(), w.o, w.o_lo, n, n, q_dim, H, proj));
    BANYAN_RETURN_IF_ERROR(cuda::LaunchRmsNorm(
        {.rows = rows, .dim = static_cast<int32_t>(H), .eps = c.rms_norm_eps, .residual = residual,
         .add = proj, .weight = w.post_norm.As<float>(), .out = normed, .out_lo = normed_lo},
        stream));
    BANYAN_RETURN_IF_ERROR(Linear(normed, w.gate_up, w.gate_up_lo, split_ * n, n, H, 2 * I, gate_up));
    BANYAN_RETURN_IF_ERROR(cuda::LaunchSwiGlu(
        {.rows = rows, .intermediate = static_cast<int32_t>(I), .gate_up = gate_up,
         .gate_up_lo = split ? gate_up + n * 2 * I : nullptr, .out = act, .out_lo = split ? act + n * I : nullptr},
        stream));
    BANYAN_RETURN_IF_ERROR(Linear(act, w.down, w.down_lo, split_ * n, n, I, H, proj));
    down_lo = split ? proj + n * H : nullptr;
  }
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host + 5 * cap, d_bad_row, sizeof(int32_t),
                                              cudaMemcpyDeviceToHost, stream));
  if (m == 0) return absl::OkStatus();
  // Final residual add and norm over every row, then the logit rows' LM head
  // (with split activations: over the hi rows, then the lo rows added in;
  // with split weights the hi rows' product with the lo head added too).
  BANYAN_RETURN_IF_ERROR(cuda::LaunchRmsNorm(
      {.rows = rows, .dim = static_cast<int32_t>(H), .eps = c.rms_norm_eps, .residual = residual,
       .add = proj, .add_lo = down_lo, .weight = w_.final_norm.As<float>(), .out = normed, .out_lo = normed_lo},
      stream));
  for (int64_t part = 0; part < split_; ++part) {
    bf16_bits* picked = picked_.As<bf16_bits>() + part * m * H;
    BANYAN_RETURN_IF_ERROR(cuda::LaunchGatherRows({.rows = static_cast<int32_t>(m), .cols = static_cast<int32_t>(H),
                                                   .src = part == 0 ? normed : normed_lo, .index = d_logit_rows,
                                                   .dst = picked},
                                                  stream));
    BANYAN_RETURN_IF_ERROR(gpu::Gemm(blas_, {.m = static_cast<int>(m), .n = static_cast<int>(V),
                                             .k = static_cast<int>(H), .a = picked, .b = w_.lm_head_ptr(),
                                             .c = logits_.data(), .ab_dtype = DType::kBf16,
                                             .c_dtype = DType::kF32, .beta = part == 0 ? 0.0f : 1.0f},
                                     stream));
    if (part == 0 && split_weights()) {
      BANYAN_RETURN_IF_ERROR(gpu::Gemm(blas_, {.m = static_cast<int>(m), .n = static_cast<int>(V),
                                               .k = static_cast<int>(H), .a = picked, .b = w_.lm_head_lo_ptr(),
                                               .c = logits_.data(), .ab_dtype = DType::kBf16,
                                               .c_dtype = DType::kF32, .beta = 1.0f},
                                       stream));
    }
  }
  if (logits == nullptr) return absl::OkStatus();  // ForwardGreedy: the logits stay on the device
  BANYAN_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits, logits_.data(), static_cast<size_t>(m * V) * 4,
                                              cudaMemcpyDeviceToHost, stream));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelWeights& weights,
                                                           const CudaBackendOptions& options) {
  BANYAN_RETURN_IF_ERROR(CheckConfig(weights.config));
  BANYAN_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
  BANYAN_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
  BANYAN_ASSIGN_OR_RETURN(gpu::BlasHandle blas, gpu::BlasHandle::Create());
  BANYAN_ASSIGN_OR_RETURN(cuda::DeviceWeights w, cuda::DeviceWeights::Upload(weights, stream.get(), options.weights == Weights::kSplitBf16));
  BANYAN_ASSIGN_OR_RETURN(gpu::Event results_ready, gpu::Event::Create());
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(
      weights.config, options, std::move(stream), std::move(blas), std::move(w), std::move(results_ready)));
}

}  // namespace banyan::model
