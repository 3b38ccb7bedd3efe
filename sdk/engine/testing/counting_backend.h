// CountingBackend and ByteTokenizer: a small, deterministic, REAL model for
// tests of the engine and of search strategies, so that they can state exact
// expectations (which text a greedy branch writes, which two tokens a sampled
// branch chooses between, the exact log-likelihood Score returns).
//
//   CountingBackendOptions model;                       // vocab 258, logits 8 / 6
//   BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<banyan::Engine> engine,
//                           CreateCountingEngine(model, banyan::EngineOptions{}));
//   // Greedy from "a" writes "bcdef...": each token predicts token + 1.
//
// The model. For a query row holding token t at position p, the logits are
//   logit[(t + 1) % V] = first_logit     (the first choice)
//   logit[(t + 2) % V] = second_logit    (the documented second choice)
//   every other logit  = 0
// where V = vocab_size. They depend on (t) only, never on the context, so a
// branch's continuation is a function of its last token: greedy decoding from
// byte 'a' gives "bcd..."; with top_k = 2 each step picks t + 1 with
// probability 1 / (1 + exp(second_logit - first_logit)) and t + 2 otherwise.
// ExpectedLogprob() gives log P(next | t) exactly as the engine should report.
// With the ByteTokenizer (V = 258): ids 0..255 are bytes, 256 is "<s>" (BOS),
// 257 is "</s>" (EOS), so counting up from byte 255 reaches BOS, then EOS.
//
// It is a real model::Backend, not a mock: Forward validates the batch like
// every backend (model::ValidateForwardBatch), writes each row's K/V into the
// caller's paged pool (fp32; K and V hold the token, its position and the
// layer), then, for every layer, walks the attention plan of every row and
// checks that the KV it would attend is exactly the row's sequence: positions
// 0..p in order, ending with the row's own token. A plan that skips, repeats or
// misorders tokens, a K/V written to the wrong slot, or pages reused while
// still read make Forward fail with kInternal (so engine tests catch a
// corrupted tree). Optional: a fixed delay per Forward (to test deadlines and
// cancellation), shared counters of calls and rows (to test batching), and
// forward passes that fail on demand (to test recovery).
//
// Thread-compatible like every Backend (one Forward at a time); the stats
// object is thread-safe.
#ifndef BANYAN_SDK_ENGINE_TESTING_COUNTING_BACKEND_H_
#define BANYAN_SDK_ENGINE_TESTING_COUNTING_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "banyan/engine.h"
#include "model/forward.h"
#include "model/tokenizer/tokenizer.h"

namespace banyan::engine::testing {

// Counters a test can read while (or after) the engine runs. Thread-safe.
struct CountingBackendStats {
  std::atomic<int64_t> forward_calls{0};
  std::atomic<int64_t> rows{0};          // query rows over all calls
  std::atomic<int64_t> max_rows{0};      // most rows in one call
  std::atomic<int64_t> logit_rows{0};    // rows whose logits were asked for
  std::atomic<int64_t> kv_tokens_read{0};  // (row, token) pairs attended, layer 0
  // Forward calls whose plan is the one attention::PredictNextDecodePlan
  // guessed from the call before (what the CUDA backend's planning ahead,
  // CudaBackendOptions::plan_ahead, keeps instead of planning again).
  std::atomic<int64_t> plans_guessed{0};
};

struct CountingBackendOptions {
  int32_t vocab_size = 258;  // ByteTokenizer's vocabulary; must be >= 3
  float first_logit = 8.0f;   // logit of (t + 1) % V
  float second_logit = 6.0f;  // logit of (t + 2) % V
  int32_t num_layers = 2;
  int32_t head_dim = 4;  // >= 4 (K/V hold token, position, layer, a constant)
  absl::Duration forward_delay = absl::ZeroDuration();  // slept in every Forward
  std::shared_ptr<CountingBackendStats> stats;          // optional
  // Fault injection (optional): while *fail_forwards > 0, a Forward decrements
  // it, fills the K/V slots of its rows with garbage (a pass that failed
  // midway) and returns kUnavailable. Any later Forward that attends those
  // slots before they are rewritten fails with kInternal.
  std::shared_ptr<std::atomic<int>> fail_forwards;
};

// The model config the backend reports: Llama architecture, 1 query head and
// 1 KV head of head_dim, bos 256 and eos 257 when vocab_size == 258 (else
// none), max_position 1 << 20.
model::ModelConfig CountingModelConfig(const CountingBackendOptions& options);

// The backend. kInvalidArgument for vocab_size < 3, num_layers < 1,
// head_dim < 4 or non-finite logits.
absl::StatusOr<std::unique_ptr<model::Backend>> CreateCountingBackend(
    const CountingBackendOptions& options);

// The token the model ranks first / second after `token`.
inline int32_t FirstChoice(const CountingBackendOptions& o, int32_t token) {
  return (token + 1) % o.vocab_size;
}
inline int32_t SecondChoice(const CountingBackendOptions& o, int32_t token) {
  return (token + 2) % o.vocab_size;
}
// log P(next | token) under the raw logits (log-softmax, double precision).
double ExpectedLogprob(const CountingBackendOptions& o, int32_t token, int32_t next);

// A byte-level tokenizer: one token per byte (ids 0..255), plus "<s>" (256,
// BOS) and "</s>" (257, EOS), recognised in text. add_special_tokens prepends
// BOS. Thread-safe (immutable).
class ByteTokenizer final : public model::Tokenizer {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  ByteTokenizer();
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              bool add_special_tokens = false) const override;
};

// An engine over CreateCountingBackend(model) and a ByteTokenizer, with
// `options` (model_path and device are ignored; KV in host memory, fp32).
// Its chat template is ChatML ("<|im_start|>role\ncontent<|im_end|>\n").
absl::StatusOr<std::unique_ptr<Engine>> CreateCountingEngine(const CountingBackendOptions& model,
                                                             const EngineOptions& options);

}  // namespace banyan::engine::testing

#endif  // BANYAN_SDK_ENGINE_TESTING_COUNTING_BACKEND_H_
