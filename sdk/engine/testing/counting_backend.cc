#include "sdk/engine/testing/counting_backend.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "attention/next_decode_plan.h"
#include "banyan/status_macros.h"
#include "model/chat/chat_format.h"
#include "sdk/engine/engine_testing.h"

namespace banyan::engine::testing {
namespace {

// K and V of one token: {token, position, layer, tag}; the rest of head_dim is 0.
constexpr float kKeyTag = 1.0f;
constexpr float kValueTag = 7.0f;

void UpdateMax(std::atomic<int64_t>& target, int64_t value) {
  int64_t seen = target.load(std::memory_order_relaxed);
  while (value > seen && !target.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

class CountingBackend final : public model::Backend {
 public:
  CountingBackend(const CountingBackendOptions& options)
      : options_(options), config_(CountingModelConfig(options)) {}

  std::string_view name() const override { return "counting"; }
  const model::ModelConfig& config() const override { return config_; }
  MemorySpace kv_memory_space() const override { return MemorySpace::kHost; }

  absl::Status Forward(const model::ForwardBatch& batch, const model::KvCache& kv,
                       absl::Span<float> logits) override {
    BANYAN_RETURN_IF_ERROR(model::ValidateForwardBatch(config_, batch, kv, logits.size()));
    if (kv.dtype != DType::kF32) {
      return absl::InvalidArgumentError(
          absl::StrCat("counting backend: KV dtype must be f32, got ", std::string(DTypeName(kv.dtype))));
    }
    if (options_.forward_delay > absl::ZeroDuration()) absl::SleepFor(options_.forward_delay);
    const attention::KvLayout& layout = kv.layout;
    float* pool = static_cast<float*>(kv.data);
    const size_t rows = batch.tokens.size();
    const attention::AttentionPlan& plan = *batch.plan;

    // Which segment each entry belongs to.
    std::vector<int32_t> entry_segment(static_cast<size_t>(plan.num_entries()));
    for (int32_t s = 0; s < plan.num_segments(); ++s) {
      for (int32_t e = plan.segment_entry_indptr[s]; e < plan.segment_entry_indptr[s + 1]; ++e) {
        entry_segment[e] = s;
      }
    }
    int64_t tokens_read = 0;
    if (options_.fail_forwards != nullptr && options_.fail_forwards->load() > 0) {
      options_.fail_forwards->fetch_sub(1);
      for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
        for (size_t r = 0; r < rows; ++r) {
          float* k = pool + layout.Offset(layer, 0, batch.kv_pages[r], 0, batch.kv_slots[r]);
          float* v = pool + layout.Offset(layer, 1, batch.kv_pages[r], 0, batch.kv_slots[r]);
          for (int32_t d = 0; d < layout.head_dim; ++d) k[d] = v[d] = -99.0f;
        }
      }
      return absl::UnavailableError("counting backend: injected forward failure");
    }
    for (int32_t layer = 0; layer < layout.num_layers; ++layer) {
      // 1. Every row writes its K and V.
      for (size_t r = 0; r < rows; ++r) {
        float* k = pool + layout.Offset(layer, 0, batch.kv_pages[r], 0, batch.kv_slots[r]);
        float* v = pool + layout.Offset(layer, 1, batch.kv_pages[r], 0, batch.kv_slots[r]);
        for (int32_t d = 0; d < layout.head_dim; ++d) k[d] = v[d] = 0.0f;
        k[0] = v[0] = static_cast<float>(batch.tokens[r]);
        k[1] = v[1] = static_cast<float>(batch.positions[r]);
        k[2] = v[2] = static_cast<float>(layer);
        k[3] = kKeyTag;
        v[3] = kValueTag;
      }
      // 2. "Attention": each row reads what its plan entries expose, in order,
      // and must see exactly positions 0..p ending with its own token.
      for (size_t r = 0; r < rows; ++r) {
        int64_t expect_position = 0;
        float last_token = -1.0f;
        for (int32_t i = plan.query_entry_indptr[r]; i < plan.query_entry_indptr[r + 1]; ++i) {
          const int32_t e = plan.query_entries[i];
          const int32_t s = entry_segment[e];
          const int32_t first_slot = plan.segment_first_slot[s];
          for (int32_t t = 0; t < plan.entry_kv_limit[e]; ++t) {
            const int32_t at = first_slot + t;
            const int32_t page = plan.page_indices[plan.segment_page_indptr[s] + at / layout.page_size];
            const float* k = pool + layout.Offset(layer, 0, page, 0, at % layout.page_size);
            const float* v = pool + layout.Offset(layer, 1, page, 0, at % layout.page_size);
            if (k[1] != static_cast<float>(expect_position) || k[2] != static_cast<float>(layer) ||
                k[3] != kKeyTag || v[3] != kValueTag || k[0] != v[0] || k[1] != v[1] || k[0] < 0 ||
                k[0] >= static_cast<float>(config_.vocab_size)) {
              return absl::InternalError(absl::StrCat(
                  "counting backend: row ", r, " (position ", batch.positions[r], ") layer ", layer,
                  " reads K/V of position ", k[1], " token ", k[0], " layer ", k[2], " tag ", k[3],
                  " where position ", expect_position, " was expected (page ", page, ", slot ",
                  at % layout.page_size, "): the plan or the KV pool is corrupt"));
            }
            last_token = k[0];
            ++expect_position;
          }
        }
        if (layer == 0) tokens_read += expect_position;
        if (expect_position != int64_t{batch.positions[r]} + 1 ||
            last_token != static_cast<float>(batch.tokens[r])) {
          return absl::InternalError(absl::StrCat(
              "counting backend: row ", r, " at position ", batch.positions[r], " with token ",
              batch.tokens[r], " attends ", expect_position, " tokens ending with token ", last_token,
              ": the plan does not match the sequence"));
        }
      }
    }
    // 3. Logits of the requested rows.
    const int32_t vocab = config_.vocab_size;
    for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
      const int32_t token = batch.tokens[batch.logit_rows[i]];
      float* out = logits.data() + i * static_cast<size_t>(vocab);
      for (int32_t v = 0; v < vocab; ++v) out[v] = 0.0f;
      out[SecondChoice(options_, token)] = options_.second_logit;
      out[FirstChoice(options_, token)] = options_.first_logit;
    }
    if (options_.stats != nullptr) {
      CountingBackendStats& s = *options_.stats;
      s.forward_calls.fetch_add(1, std::memory_order_relaxed);
      s.rows.fetch_add(static_cast<int64_t>(rows), std::memory_order_relaxed);
      s.logit_rows.fetch_add(static_cast<int64_t>(batch.logit_rows.size()), std::memory_order_relaxed);
      s.kv_tokens_read.fetch_add(tokens_read, std::memory_order_relaxed);
      UpdateMax(s.max_rows, static_cast<int64_t>(rows));
      if (guessed_ && attention::SamePlan(plan, guess_)) s.plans_guessed.fetch_add(1, std::memory_order_relaxed);
      guessed_ = attention::PredictNextDecodePlan(plan, &guess_);
    }
    return absl::OkStatus();
  }

 private:
  const CountingBackendOptions options_;
  const model::ModelConfig config_;
  // With stats: the next call's plan as guessed from this call's.
  attention::AttentionPlan guess_;
  bool guessed_ = false;
};

}  // namespace

model::ModelConfig CountingModelConfig(const CountingBackendOptions& options) {
  model::ModelConfig c;
  c.architecture = model::Architecture::kLlama;
  c.name = "counting";
  c.vocab_size = options.vocab_size;
  c.hidden_size = options.head_dim;
  c.intermediate_size = options.head_dim;
  c.num_layers = options.num_layers;
  c.num_q_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = options.head_dim;
  c.max_position = 1 << 20;
  if (options.vocab_size == 258) {
    c.bos_token_id = ByteTokenizer::kBos;
    c.eos_token_id = ByteTokenizer::kEos;
  }
  return c;
}

absl::StatusOr<std::unique_ptr<model::Backend>> CreateCountingBackend(
    const CountingBackendOptions& options) {
  if (options.vocab_size < 3 || options.num_layers < 1 || options.head_dim < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "counting backend: need vocab_size >= 3, num_layers >= 1, head_dim >= 4; got ",
        options.vocab_size, ", ", options.num_layers, ", ", options.head_dim));
  }
  if (!std::isfinite(options.first_logit) || !std::isfinite(options.second_logit)) {
    return absl::InvalidArgumentError("counting backend: logits must be finite");
  }
  return std::unique_ptr<model::Backend>(new CountingBackend(options));
}

double ExpectedLogprob(const CountingBackendOptions& o, int32_t token, int32_t next) {
  const double first = o.first_logit;
  const double second = o.second_logit;
  const double others = static_cast<double>(o.vocab_size - 2);
  const double max = std::max({first, second, 0.0});
  const double log_z =
      max + std::log(std::exp(first - max) + std::exp(second - max) + others * std::exp(-max));
  double logit = 0.0;
  if (next == FirstChoice(o, token)) {
    logit = first;
  } else if (next == SecondChoice(o, token)) {
    logit = second;
  }
  return logit - log_z;
}

ByteTokenizer::ByteTokenizer() {
  pieces_.resize(258);
  special_.assign(258, false);
  for (int i = 0; i < 256; ++i) {
    pieces_[i] = std::string(1, static_cast<char>(i));
    token_to_id_[pieces_[i]] = i;
  }
  pieces_[kBos] = "<s>";
  pieces_[kEos] = "</s>";
  special_[kBos] = special_[kEos] = true;
  token_to_id_["<s>"] = kBos;
  token_to_id_["</s>"] = kEos;
  bos_id_ = kBos;
  eos_id_ = kEos;
}

absl::StatusOr<std::vector<int32_t>> ByteTokenizer::Encode(std::string_view text,
                                                           bool add_special_tokens) const {
  if (text.size() >= (size_t{1} << 31)) return absl::InvalidArgumentError("text of 2 GiB or more");
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 1);
  if (add_special_tokens) ids.push_back(kBos);
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, 3) == "<s>") {
      ids.push_back(kBos);
      i += 3;
    } else if (text.substr(i, 4) == "</s>") {
      ids.push_back(kEos);
      i += 4;
    } else {
      ids.push_back(static_cast<uint8_t>(text[i]));
      ++i;
    }
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<Engine>> CreateCountingEngine(const CountingBackendOptions& model,
                                                             const EngineOptions& options) {
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<model::Backend> backend, CreateCountingBackend(model));
  EngineParts parts;
  parts.backend = std::move(backend);
  parts.tokenizer = std::make_unique<ByteTokenizer>();
  BANYAN_ASSIGN_OR_RETURN(
      model::ChatFormat chat,
      model::ChatFormat::FromTemplate(
          "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
          "<s>", "</s>"));
  parts.chat_format = std::move(chat);
  parts.kv_dtype = DType::kF32;
  parts.device_name = "cpu (counting model)";
  return CreateEngineFromParts(std::move(parts), options);
}

}  // namespace banyan::engine::testing
