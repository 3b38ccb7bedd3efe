#include "model/gguf/gguf_model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/gguf/ggml_types.h"

namespace banyan::model {
namespace {

absl::StatusOr<int32_t> RequiredInt(const GgufFile& g, const std::string& key, int64_t min) {
  auto v = g.GetInt(key);
  if (!v.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model: ", v.status().message()));
  }
  if (*v < min || *v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model: ", key, " = ", *v, " out of range"));
  }
  return static_cast<int32_t>(*v);
}

int32_t OptionalInt(const GgufFile& g, const std::string& key, int32_t fallback) {
  auto v = g.GetInt(key);
  if (!v.ok() || *v < std::numeric_limits<int32_t>::min() ||
      *v > std::numeric_limits<int32_t>::max()) {
    return fallback;
  }
  return static_cast<int32_t>(*v);
}

float OptionalFloat(const GgufFile& g, const std::string& key, float fallback) {
  auto v = g.GetFloat(key);
  return v.ok() && std::isfinite(*v) ? static_cast<float>(*v) : fallback;
}

// Llama 3.1 stores its RoPE scaling as a `rope_freqs` tensor (one divisor
// per frequency) instead of metadata. Recover the four parameters by checking
// the usual ones against the tensor.
absl::Status InferLlama3Scaling(const GgufFile& g, const ModelConfig& c, RopeScaling* out) {
  const GgufTensorInfo* t = g.FindTensor("rope_freqs.weight");
  if (t == nullptr) return absl::OkStatus();
  if (t->num_elements != c.head_dim / 2) {
    return absl::InvalidArgumentError("GGUF rope_freqs.weight does not have head_dim/2 values");
  }
  std::vector<float> f(t->num_elements);
  BANYAN_RETURN_IF_ERROR(DequantizeGgml(t->type, t->data, absl::MakeSpan(f)));
  for (float factor : {8.0f, 32.0f, 16.0f, 4.0f, 2.0f}) {
    for (int32_t orig : {8192, 4096, 2048, 16384, 32768}) {
      for (float low : {1.0f, 2.0f}) {
        for (float high : {4.0f, 8.0f}) {
          bool ok = true;
          const double lw = orig / low, hw = orig / high;
          for (size_t i = 0; i < f.size() && ok; ++i) {
            const double freq = std::pow(c.rope_theta, -2.0 * i / c.head_dim);
            const double wavelen = 2 * M_PI / freq;
            double expect = 1.0;
            if (wavelen > lw) {
              expect = factor;
            } else if (wavelen >= hw) {
              const double smooth = (orig / wavelen - low) / (high - low);
              expect = 1.0 / ((1 - smooth) / factor + smooth);
            }
            ok = std::fabs(expect - f[i]) <= 1e-3 * expect;
          }
          if (ok) {
            out->type = RopeScaling::Type::kLlama3;
            out->factor = factor;
            out->low_freq_factor = low;
            out->high_freq_factor = high;
            out->original_max_position = orig;
            return absl::OkStatus();
          }
        }
      }
    }
  }
  return absl::UnimplementedError("GGUF rope_freqs.weight matches no known llama3 RoPE scaling");
}

}  // namespace

absl::StatusOr<ModelConfig> GgufModelConfig(const GgufFile& g) {
  auto arch_or = g.GetString("general.architecture");
  if (!arch_or.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model: ", arch_or.status().message()));
  }
  const std::string& arch = *arch_or;
  ModelConfig c;
  if (arch == "llama") {
    c.architecture = Architecture::kLlama;
  } else if (arch == "mistral") {
    c.architecture = Architecture::kMistral;
  } else if (arch == "qwen2") {
    c.architecture = Architecture::kQwen2;
  } else {
    return absl::UnimplementedError(absl::StrCat("GGUF architecture '", arch,
                                                 "' is not supported (llama, mistral, qwen2 are)"));
  }
  const std::string p = arch + ".";
  c.name = g.GetString("general.name").value_or(arch);
  BANYAN_ASSIGN_OR_RETURN(c.hidden_size, RequiredInt(g, p + "embedding_length", 1));
  BANYAN_ASSIGN_OR_RETURN(c.num_layers, RequiredInt(g, p + "block_count", 1));
  BANYAN_ASSIGN_OR_RETURN(c.intermediate_size, RequiredInt(g, p + "feed_forward_length", 1));
  BANYAN_ASSIGN_OR_RETURN(c.num_q_heads, RequiredInt(g, p + "attention.head_count", 1));
  c.num_kv_heads = OptionalInt(g, p + "attention.head_count_kv", c.num_q_heads);
  if (c.num_kv_heads <= 0 || c.num_q_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model: ", c.num_q_heads, " query heads are not a multiple of ",
                                                   c.num_kv_heads, " KV heads"));
  }
  c.head_dim = OptionalInt(g, p + "attention.key_length", c.hidden_size / c.num_q_heads);
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model: head_dim ", c.head_dim, " must be even"));
  }
  const int32_t rope_dims = OptionalInt(g, p + "rope.dimension_count", c.head_dim);
  if (rope_dims != c.head_dim) {
    return absl::UnimplementedError(absl::StrCat("GGUF model: partial RoPE (", rope_dims, " of ",
                                                 c.head_dim, " dimensions) is not supported"));
  }
  c.rms_norm_eps = OptionalFloat(g, p + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.rope_theta = OptionalFloat(g, p + "rope.freq_base", 10000.0f);
  c.max_position = OptionalInt(g, p + "context_length", 2048);
  // Vocabulary: the token list is authoritative, vocab_size a fallback.
  if (auto tokens = g.Find("tokenizer.ggml.tokens");
      tokens != nullptr && tokens->type == GgufValueType::kArray) {
    c.vocab_size = static_cast<int32_t>(tokens->array.size());
  } else {
    c.vocab_size = OptionalInt(g, p + "vocab_size", 0);
  }
  if (const GgufTensorInfo* emb = g.FindTensor("token_embd.weight");
      emb != nullptr && emb->dims.size() == 2) {
    c.vocab_size = static_cast<int32_t>(std::min<int64_t>(emb->dims[1], INT32_MAX));
  }
  if (c.vocab_size <= 0) return absl::InvalidArgumentError("GGUF model: unknown vocabulary size");
  c.tie_word_embeddings = g.FindTensor("output.weight") == nullptr;
  c.attention_bias = g.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.bos_token_id = OptionalInt(g, "tokenizer.ggml.bos_token_id", -1);
  c.eos_token_id = OptionalInt(g, "tokenizer.ggml.eos_token_id", -1);
  // RoPE scaling from metadata (linear, llama3), else from rope_freqs.
  const std::string scaling = g.GetString(p + "rope.scaling.type").value_or("none");
  if (scaling == "linear") {
    c.rope_scaling.type = RopeScaling::Type::kLinear;
    c.rope_scaling.factor = OptionalFloat(g, p + "rope.scaling.factor", 1.0f);
  } else if (scaling == "llama3") {
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = OptionalFloat(g, p + "rope.scaling.factor", 8.0f);
    c.rope_scaling.low_freq_factor = OptionalFloat(g, p + "rope.scaling.low_freq_factor", 1.0f);
    c.rope_scaling.high_freq_factor = OptionalFloat(g, p + "rope.scaling.high_freq_factor", 4.0f);
    c.rope_scaling.original_max_position =
        OptionalInt(g, p + "rope.scaling.original_context_length", 8192);
  } else if (scaling != "none") {
    return absl::UnimplementedError(absl::StrCat("GGUF RoPE scaling '", scaling, "' is not supported"));
  } else {
    BANYAN_RETURN_IF_ERROR(InferLlama3Scaling(g, c, &c.rope_scaling));
  }
  return c;
}

void UnpermuteRopeRows(int64_t heads, int64_t head_dim, int64_t cols, float* data) {
  const int64_t half = head_dim / 2;
  std::vector<float> head(static_cast<size_t>(head_dim * cols));
  for (int64_t h = 0; h < heads; ++h) {
    float* base = data + h * head_dim * cols;
    std::memcpy(head.data(), base, head.size() * sizeof(float));
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        std::memcpy(base + (i * half + j) * cols, head.data() + (2 * j + i) * cols,
                    cols * sizeof(float));
      }
    }
  }
}

namespace {

// Loads one tensor, checking its HF shape (outer dimension first).
absl::Status LoadTensor(const GgufFile& g, const std::string& gguf_name,
                        const std::string& hf_name, std::vector<int64_t> shape,
                        ModelWeights* w) {
  const GgufTensorInfo* t = g.FindTensor(gguf_name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model lacks tensor '", gguf_name, "'"));
  }
  std::vector<int64_t> hf_dims(t->dims.rbegin(), t->dims.rend());
  if (hf_dims != shape) {
    std::string want, got;
    for (int64_t d : shape) absl::StrAppend(&want, want.empty() ? "" : "x", d);
    for (int64_t d : hf_dims) absl::StrAppend(&got, got.empty() ? "" : "x", d);
    return absl::InvalidArgumentError(absl::StrCat("GGUF tensor '", gguf_name, "' has shape ", got,
                                                   ", the config implies ", want));
  }
  auto tinfo = GetGgmlTypeInfo(t->type);
  if (!tinfo.ok() || !tinfo->dequantizable) {
    return absl::UnimplementedError(absl::StrCat("GGUF tensor '", gguf_name, "' has type ",
                                                 GgmlTypeName(t->type), ", which is not supported"));
  }
  HostTensor ht;
  ht.shape = std::move(shape);
  ht.data.resize(static_cast<size_t>(t->num_elements));
  BANYAN_RETURN_IF_ERROR(DequantizeGgml(t->type, t->data, absl::MakeSpan(ht.data)));
  w->tensors[hf_name] = std::move(ht);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelWeights> GgufModelWeights(const GgufFile& g) {
  ModelWeights w;
  BANYAN_ASSIGN_OR_RETURN(w.config, GgufModelConfig(g));
  const ModelConfig& c = w.config;
  const int64_t h = c.hidden_size, v = c.vocab_size, ff = c.intermediate_size;
  const int64_t q = int64_t{c.num_q_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  BANYAN_RETURN_IF_ERROR(LoadTensor(g, "token_embd.weight", "model.embed_tokens.weight", {v, h}, &w));
  BANYAN_RETURN_IF_ERROR(LoadTensor(g, "output_norm.weight", "model.norm.weight", {h}, &w));
  if (!c.tie_word_embeddings) {
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, "output.weight", "lm_head.weight", {v, h}, &w));
  }
  const bool permuted = c.architecture != Architecture::kQwen2;
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string b = absl::StrCat("blk.", i, ".");
    const std::string l = absl::StrCat("model.layers.", i, ".");
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_norm.weight", l + "input_layernorm.weight", {h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "ffn_norm.weight", l + "post_attention_layernorm.weight", {h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_q.weight", l + "self_attn.q_proj.weight", {q, h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_k.weight", l + "self_attn.k_proj.weight", {kv, h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_v.weight", l + "self_attn.v_proj.weight", {kv, h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_output.weight", l + "self_attn.o_proj.weight", {h, q}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "ffn_gate.weight", l + "mlp.gate_proj.weight", {ff, h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "ffn_up.weight", l + "mlp.up_proj.weight", {ff, h}, &w));
    BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "ffn_down.weight", l + "mlp.down_proj.weight", {h, ff}, &w));
    if (c.attention_bias) {
      BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_q.bias", l + "self_attn.q_proj.bias", {q}, &w));
      BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_k.bias", l + "self_attn.k_proj.bias", {kv}, &w));
      BANYAN_RETURN_IF_ERROR(LoadTensor(g, b + "attn_v.bias", l + "self_attn.v_proj.bias", {kv}, &w));
    }
    if (permuted) {
      UnpermuteRopeRows(c.num_q_heads, c.head_dim, h, w.tensors[l + "self_attn.q_proj.weight"].data.data());
      UnpermuteRopeRows(c.num_kv_heads, c.head_dim, h, w.tensors[l + "self_attn.k_proj.weight"].data.data());
      if (c.attention_bias) {
        UnpermuteRopeRows(c.num_q_heads, c.head_dim, 1, w.tensors[l + "self_attn.q_proj.bias"].data.data());
        UnpermuteRopeRows(c.num_kv_heads, c.head_dim, 1, w.tensors[l + "self_attn.k_proj.bias"].data.data());
      }
    }
  }
  return w;
}

}  // namespace banyan::model
