#include "model/safetensors/hf_model.h"

#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/gguf/mapped_file.h"
#include "model/safetensors/safetensors_file.h"
#include "nlohmann/json.hpp"

namespace banyan::model {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", what));
}

absl::StatusOr<int32_t> Int(const json& j, const char* key, int64_t min, std::optional<int32_t> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Bad(absl::StrCat("missing '", key, "'"));
  }
  if (!it->is_number_integer()) return Bad(absl::StrCat("'", key, "' is not an integer"));
  const int64_t v = it->get<int64_t>();
  if (v < min || v > std::numeric_limits<int32_t>::max()) {
    return Bad(absl::StrCat("'", key, "' = ", v, " is out of range"));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<float> Float(const json& j, const char* key, float fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) return Bad(absl::StrCat("'", key, "' is not a number"));
  return it->get<float>();
}

// A token id given as an integer or a list of integers (first one), or -1.
int32_t TokenId(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return -1;
  const json* v = &*it;
  if (v->is_array() && !v->empty()) v = &(*v)[0];
  if (!v->is_number_integer()) return -1;
  const int64_t id = v->get<int64_t>();
  return id >= 0 && id <= std::numeric_limits<int32_t>::max() ? static_cast<int32_t>(id) : -1;
}

absl::Status ParseRope(const json& j, ModelConfig* c) {
  const json* scaling = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) scaling = &*it;
  if (auto it = j.find("rope_scaling"); it != j.end() && it->is_object()) scaling = &*it;
  float theta = 10000.0f;
  BANYAN_ASSIGN_OR_RETURN(theta, Float(j, "rope_theta", theta));
  if (scaling != nullptr) {
    BANYAN_ASSIGN_OR_RETURN(theta, Float(*scaling, "rope_theta", theta));
  }
  c->rope_theta = theta;
  if (scaling == nullptr) return absl::OkStatus();
  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    if (auto it = scaling->find(key); it != scaling->end() && it->is_string()) {
      type = it->get<std::string>();
      break;
    }
  }
  RopeScaling& r = c->rope_scaling;
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    r.type = RopeScaling::Type::kLinear;
    BANYAN_ASSIGN_OR_RETURN(r.factor, Float(*scaling, "factor", 1.0f));
  } else if (type == "llama3") {
    r.type = RopeScaling::Type::kLlama3;
    BANYAN_ASSIGN_OR_RETURN(r.factor, Float(*scaling, "factor", 8.0f));
    BANYAN_ASSIGN_OR_RETURN(r.low_freq_factor, Float(*scaling, "low_freq_factor", 1.0f));
    BANYAN_ASSIGN_OR_RETURN(r.high_freq_factor, Float(*scaling, "high_freq_factor", 4.0f));
    BANYAN_ASSIGN_OR_RETURN(r.original_max_position,
                            Int(*scaling, "original_max_position_embeddings", 1, 8192));
  } else {
    return absl::UnimplementedError(absl::StrCat("config.json: RoPE scaling '", type,
                                                 "' is not supported (linear, llama3 are)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& config_json,
                                          const std::string& generation_config_json) {
  const json j = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  ModelConfig c;
  auto type_it = j.find("model_type");
  if (type_it == j.end() || !type_it->is_string()) return Bad("missing 'model_type'");
  const std::string type = type_it->get<std::string>();
  if (type == "llama") {
    c.architecture = Architecture::kLlama;
  } else if (type == "mistral") {
    c.architecture = Architecture::kMistral;
  } else if (type == "qwen2") {
    c.architecture = Architecture::kQwen2;
  } else {
    return absl::UnimplementedError(absl::StrCat("model_type '", type,
                                                 "' is not supported (llama, mistral, qwen2 are)"));
  }
  c.name = type;
  if (auto it = j.find("_name_or_path"); it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
    c.name = it->get<std::string>();
  }
  BANYAN_ASSIGN_OR_RETURN(c.vocab_size, Int(j, "vocab_size", 1, std::nullopt));
  BANYAN_ASSIGN_OR_RETURN(c.hidden_size, Int(j, "hidden_size", 1, std::nullopt));
  BANYAN_ASSIGN_OR_RETURN(c.intermediate_size, Int(j, "intermediate_size", 1, std::nullopt));
  BANYAN_ASSIGN_OR_RETURN(c.num_layers, Int(j, "num_hidden_layers", 1, std::nullopt));
  BANYAN_ASSIGN_OR_RETURN(c.num_q_heads, Int(j, "num_attention_heads", 1, std::nullopt));
  BANYAN_ASSIGN_OR_RETURN(c.num_kv_heads, Int(j, "num_key_value_heads", 1, c.num_q_heads));
  if (c.num_q_heads % c.num_kv_heads != 0) {
    return Bad(absl::StrCat(c.num_q_heads, " attention heads are not a multiple of ",
                            c.num_kv_heads, " KV heads"));
  }
  BANYAN_ASSIGN_OR_RETURN(c.head_dim, Int(j, "head_dim", 1, c.hidden_size / c.num_q_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) return Bad(absl::StrCat("head_dim ", c.head_dim, " must be even"));
  BANYAN_ASSIGN_OR_RETURN(c.rms_norm_eps, Float(j, "rms_norm_eps", 1e-6f));
  BANYAN_RETURN_IF_ERROR(ParseRope(j, &c));
  BANYAN_ASSIGN_OR_RETURN(c.max_position, Int(j, "max_position_embeddings", 1, 2048));
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && it->is_boolean()) {
    c.tie_word_embeddings = it->get<bool>();
  }
  c.attention_bias = c.architecture == Architecture::kQwen2;
  if (auto it = j.find("attention_bias"); it != j.end() && it->is_boolean()) {
    c.attention_bias = it->get<bool>() || c.architecture == Architecture::kQwen2;
  }
  c.bos_token_id = TokenId(j, "bos_token_id");
  c.eos_token_id = TokenId(j, "eos_token_id");
  if (!generation_config_json.empty()) {
    const json g = json::parse(generation_config_json, nullptr, false);
    if (g.is_discarded() || !g.is_object()) {
      return absl::InvalidArgumentError("generation_config.json: not a JSON object");
    }
    if (c.bos_token_id < 0) c.bos_token_id = TokenId(g, "bos_token_id");
    if (c.eos_token_id < 0) c.eos_token_id = TokenId(g, "eos_token_id");
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& dir) {
  BANYAN_ASSIGN_OR_RETURN(std::string config, ReadWholeFile(dir + "/config.json"));
  std::string generation;
  if (std::filesystem::exists(dir + "/generation_config.json")) {
    BANYAN_ASSIGN_OR_RETURN(generation, ReadWholeFile(dir + "/generation_config.json"));
  }
  return ParseHfConfig(config, generation);
}

namespace {

// The weight files of a directory: the index's shards, else model.safetensors.
absl::StatusOr<std::vector<std::string>> WeightFiles(const std::string& dir) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!std::filesystem::exists(index_path)) {
    if (!std::filesystem::exists(dir + "/model.safetensors")) {
      return absl::NotFoundError(absl::StrCat("no model.safetensors or model.safetensors.index.json in ", dir));
    }
    return std::vector<std::string>{"model.safetensors"};
  }
  BANYAN_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(index_path));
  const json j = json::parse(text, nullptr, false);
  auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (j.is_discarded() || !j.is_object() || map == j.end() || !map->is_object()) {
    return absl::DataLossError("model.safetensors.index.json has no weight_map object");
  }
  std::set<std::string> files;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it->is_string()) return absl::DataLossError("weight_map value is not a file name");
    const std::string f = it->get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return absl::DataLossError(absl::StrCat("weight_map names an invalid file '", f, "'"));
    }
    files.insert(f);
  }
  return std::vector<std::string>(files.begin(), files.end());
}

}  // namespace

absl::StatusOr<ModelWeights> LoadHfDirectory(const std::string& dir) {
  ModelWeights w;
  BANYAN_ASSIGN_OR_RETURN(w.config, LoadHfConfig(dir));
  const ModelConfig& c = w.config;
  BANYAN_ASSIGN_OR_RETURN(std::vector<std::string> names, WeightFiles(dir));
  std::vector<std::unique_ptr<MappedFile>> mapped;
  std::vector<SafetensorsFile> files;
  std::map<std::string, const SafetensorsTensor*> all;
  for (const std::string& name : names) {
    BANYAN_ASSIGN_OR_RETURN(auto m, MappedFile::Open(dir + "/" + name));
    auto parsed = SafetensorsFile::Parse(m->bytes());
    if (!parsed.ok()) {
      return absl::Status(parsed.status().code(), absl::StrCat(name, ": ", parsed.status().message()));
    }
    mapped.push_back(std::move(m));
    files.push_back(std::move(*parsed));
  }
  for (const SafetensorsFile& f : files) {
    for (const auto& [name, t] : f.tensors()) all[name] = &t;
  }
  const int64_t h = c.hidden_size, v = c.vocab_size, ff = c.intermediate_size;
  const int64_t q = int64_t{c.num_q_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> wanted = {
      {"model.embed_tokens.weight", {v, h}}, {"model.norm.weight", {h}}};
  if (!c.tie_word_embeddings) wanted.push_back({"lm_head.weight", {v, h}});
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat("model.layers.", i, ".");
    wanted.push_back({l + "input_layernorm.weight", {h}});
    wanted.push_back({l + "post_attention_layernorm.weight", {h}});
    wanted.push_back({l + "self_attn.q_proj.weight", {q, h}});
    wanted.push_back({l + "self_attn.k_proj.weight", {kv, h}});
    wanted.push_back({l + "self_attn.v_proj.weight", {kv, h}});
    wanted.push_back({l + "self_attn.o_proj.weight", {h, q}});
    wanted.push_back({l + "mlp.gate_proj.weight", {ff, h}});
    wanted.push_back({l + "mlp.up_proj.weight", {ff, h}});
    wanted.push_back({l + "mlp.down_proj.weight", {h, ff}});
    if (c.attention_bias) {
      wanted.push_back({l + "self_attn.q_proj.bias", {q}});
      wanted.push_back({l + "self_attn.k_proj.bias", {kv}});
      wanted.push_back({l + "self_attn.v_proj.bias", {kv}});
    }
  }
  for (auto& [name, shape] : wanted) {
    auto it = all.find(name);
    if (it == all.end()) {
      return absl::InvalidArgumentError(absl::StrCat("safetensors: missing tensor '", name, "'"));
    }
    const SafetensorsTensor& t = *it->second;
    if (t.shape != shape) {
      std::string want, got;
      for (int64_t d : shape) absl::StrAppend(&want, want.empty() ? "" : "x", d);
      for (int64_t d : t.shape) absl::StrAppend(&got, got.empty() ? "" : "x", d);
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name, "' has shape ",
                                                     got, ", the config implies ", want));
    }
    HostTensor ht;
    ht.shape = shape;
    ht.data.resize(static_cast<size_t>(t.num_elements));
    BANYAN_RETURN_IF_ERROR(SafetensorsToFloat(t, absl::MakeSpan(ht.data)));
    w.tensors[name] = std::move(ht);
  }
  return w;
}

}  // namespace banyan::model
