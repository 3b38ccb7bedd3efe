#include "model/testdata/tiny_models.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "model/testdata/test_files.h"
#include "sdk/base/half.h"
#include "sdk/base/rng.h"

namespace banyan::model::testing {

TinyModel MakeTinyModel(Architecture arch, int kv_heads, bool tied, uint64_t seed) {
  TinyModel m;
  ModelConfig& c = m.config;
  c.architecture = arch;
  c.vocab_size = 64;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = kv_heads;
  c.head_dim = 8;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 50000.0f;
  c.max_position = 256;
  c.tie_word_embeddings = tied;
  c.attention_bias = arch == Architecture::kQwen2;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  Rng rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(n);
    for (float& x : v) x = rng.Normal();
    m.tensors[name] = {std::move(shape), std::move(v)};
  };
  const int64_t h = c.hidden_size, q = c.num_q_heads * c.head_dim, kv = kv_heads * c.head_dim;
  add("model.embed_tokens.weight", {c.vocab_size, h});
  add("model.norm.weight", {h});
  if (!tied) add("lm_head.weight", {c.vocab_size, h});
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat("model.layers.", i, ".");
    add(l + "input_layernorm.weight", {h});
    add(l + "post_attention_layernorm.weight", {h});
    add(l + "self_attn.q_proj.weight", {q, h});
    add(l + "self_attn.k_proj.weight", {kv, h});
    add(l + "self_attn.v_proj.weight", {kv, h});
    add(l + "self_attn.o_proj.weight", {h, q});
    add(l + "mlp.gate_proj.weight", {c.intermediate_size, h});
    add(l + "mlp.up_proj.weight", {c.intermediate_size, h});
    add(l + "mlp.down_proj.weight", {h, c.intermediate_size});
    if (c.attention_bias) {
      add(l + "self_attn.q_proj.bias", {q});
      add(l + "self_attn.k_proj.bias", {kv});
      add(l + "self_attn.v_proj.bias", {kv});
    }
  }
  return m;
}

std::vector<float> PermuteForGguf(const std::vector<float>& w, int64_t heads, int64_t cols) {
  // convert_hf_to_gguf.py: w.reshape(heads, 2, rows/heads/2, cols).swapaxes(1, 2):
  // GGUF row (h, j, i) = HF row (h, i, j).
  const int64_t rows = static_cast<int64_t>(w.size()) / cols, d = rows / heads, half = d / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < half; ++j) {
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t dst = h * d + j * 2 + i, src = h * d + i * half + j;
        std::copy(w.begin() + src * cols, w.begin() + (src + 1) * cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

std::string TinyModelGguf(const TinyModel& m) {
  const ModelConfig& c = m.config;
  const std::string arch = c.architecture == Architecture::kQwen2 ? "qwen2"
                           : c.architecture == Architecture::kMistral ? "mistral" : "llama";
  GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddString("general.name", "tiny-" + arch);
  w.AddU32(arch + ".block_count", c.num_layers);
  w.AddU32(arch + ".context_length", c.max_position);
  w.AddU32(arch + ".embedding_length", c.hidden_size);
  w.AddU32(arch + ".feed_forward_length", c.intermediate_size);
  w.AddU32(arch + ".attention.head_count", c.num_q_heads);
  w.AddU32(arch + ".attention.head_count_kv", c.num_kv_heads);
  w.AddF32(arch + ".attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.AddF32(arch + ".rope.freq_base", c.rope_theta);
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "qwen2");
  std::vector<std::string> tokens;
  for (int i = 0; i < c.vocab_size; ++i) tokens.push_back(absl::StrCat("t", i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddStringArray("tokenizer.ggml.merges", {});
  w.AddU32("tokenizer.ggml.bos_token_id", c.bos_token_id);
  w.AddU32("tokenizer.ggml.eos_token_id", c.eos_token_id);
  const bool permute = c.architecture != Architecture::kQwen2;
  auto put = [&](const std::string& gguf_name, const std::string& hf_name, int64_t heads) {
    const auto& [shape, values] = m.tensors.at(hf_name);
    std::vector<float> v = values;
    if (permute && heads > 0) v = PermuteForGguf(v, heads, shape.size() == 2 ? shape[1] : 1);
    std::vector<uint64_t> dims(shape.rbegin(), shape.rend());
    w.AddTensor(gguf_name, dims, 0, FloatsToBytes(v));
  };
  put("token_embd.weight", "model.embed_tokens.weight", 0);
  put("output_norm.weight", "model.norm.weight", 0);
  if (!c.tie_word_embeddings) put("output.weight", "lm_head.weight", 0);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string b = absl::StrCat("blk.", i, "."), l = absl::StrCat("model.layers.", i, ".");
    put(b + "attn_norm.weight", l + "input_layernorm.weight", 0);
    put(b + "ffn_norm.weight", l + "post_attention_layernorm.weight", 0);
    put(b + "attn_q.weight", l + "self_attn.q_proj.weight", c.num_q_heads);
    put(b + "attn_k.weight", l + "self_attn.k_proj.weight", c.num_kv_heads);
    put(b + "attn_v.weight", l + "self_attn.v_proj.weight", 0);
    put(b + "attn_output.weight", l + "self_attn.o_proj.weight", 0);
    put(b + "ffn_gate.weight", l + "mlp.gate_proj.weight", 0);
    put(b + "ffn_up.weight", l + "mlp.up_proj.weight", 0);
    put(b + "ffn_down.weight", l + "mlp.down_proj.weight", 0);
    if (c.attention_bias) {
      put(b + "attn_q.bias", l + "self_attn.q_proj.bias", c.num_q_heads);
      put(b + "attn_k.bias", l + "self_attn.k_proj.bias", c.num_kv_heads);
      put(b + "attn_v.bias", l + "self_attn.v_proj.bias", 0);
    }
  }
  return w.Finish();
}

void WriteTinyModelDirectory(const TinyModel& m, const std::string& dir, int shards,
                             const std::string& dtype) {
  std::filesystem::create_directories(dir);
  const ModelConfig& c = m.config;
  const std::string type = c.architecture == Architecture::kQwen2 ? "qwen2"
                           : c.architecture == Architecture::kMistral ? "mistral" : "llama";
  WriteFile(dir + "/config.json",
            absl::StrCat("{\"model_type\": \"", type, "\", \"architectures\": [\"X\"],",
                         "\"vocab_size\": ", c.vocab_size, ", \"hidden_size\": ", c.hidden_size,
                         ", \"intermediate_size\": ", c.intermediate_size,
                         ", \"num_hidden_layers\": ", c.num_layers,
                         ", \"num_attention_heads\": ", c.num_q_heads,
                         ", \"num_key_value_heads\": ", c.num_kv_heads,
                         ", \"rms_norm_eps\": 1e-06, \"max_position_embeddings\": ", c.max_position,
                         ", \"rope_parameters\": {\"rope_theta\": ", c.rope_theta,
                         ", \"rope_type\": \"default\"}, \"tie_word_embeddings\": ",
                         c.tie_word_embeddings ? "true" : "false", ", \"bos_token_id\": 1}"));
  WriteFile(dir + "/generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": [2, 3]}");
  std::vector<std::vector<SafetensorsEntry>> parts(shards);
  std::string weight_map;
  int k = 0;
  for (const auto& [name, tensor] : m.tensors) {
    const int shard = k++ % shards;
    SafetensorsEntry e{name, dtype, tensor.first, ""};
    if (dtype == "F32") {
      e.data = FloatsToBytes(tensor.second);
    } else {
      for (float v : tensor.second) {
        const uint16_t bits = dtype == "F16" ? FloatToFp16Bits(v) : FloatToBf16Bits(v);
        AppendRaw<uint16_t>(&e.data, bits);
      }
    }
    parts[shard].push_back(std::move(e));
    absl::StrAppend(&weight_map, weight_map.empty() ? "" : ",", "\"", name, "\": \"model-0000",
                    shard + 1, "-of-0000", shards, ".safetensors\"");
  }
  if (shards == 1) {
    WriteFile(dir + "/model.safetensors", WriteSafetensors(parts[0]));
    return;
  }
  for (int s = 0; s < shards; ++s) {
    WriteFile(absl::StrCat(dir, "/model-0000", s + 1, "-of-0000", shards, ".safetensors"),
              WriteSafetensors(parts[s]));
  }
  WriteFile(dir + "/model.safetensors.index.json",
            absl::StrCat("{\"metadata\": {}, \"weight_map\": {", weight_map, "}}"));
}

}  // namespace banyan::model::testing
