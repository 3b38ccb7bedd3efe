// TokenizerFromJson (tokenizer_loaders.h): Hugging Face tokenizer.json.
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "nlohmann/json.hpp"

namespace banyan::model {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", what));
}

std::string TypeOf(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool BoolField(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

absl::Status ParseNormalizer(const json& n, BpeSpec* spec) {
  if (n.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(n);
  if (type == "NFC") {
    spec->nfc = true;
    return absl::OkStatus();
  }
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const json& sub : n["normalizers"]) BANYAN_RETURN_IF_ERROR(ParseNormalizer(sub, spec));
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer.json normalizer '", type, "' is not supported"));
}

absl::Status ParsePreTokenizer(const json& p, BpeSpec* spec) {
  const std::string type = TypeOf(p);
  auto byte_level_ok = [](const json& b, bool regex) -> absl::Status {
    if (BoolField(b, "add_prefix_space", false)) {
      return absl::UnimplementedError("ByteLevel add_prefix_space is not supported");
    }
    if (BoolField(b, "use_regex", true) != regex) {
      return absl::UnimplementedError("this ByteLevel use_regex combination is not supported");
    }
    return absl::OkStatus();
  };
  if (type == "ByteLevel") {
    BANYAN_RETURN_IF_ERROR(byte_level_ok(p, true));
    spec->pre_tokenizer = PreTokenizerKind::kGpt2;
    return absl::OkStatus();
  }
  if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array() &&
      p["pretokenizers"].size() == 2) {
    const json& first = p["pretokenizers"][0];
    const json& second = p["pretokenizers"][1];
    if (TypeOf(first) == "Split" && TypeOf(second) == "ByteLevel") {
      BANYAN_RETURN_IF_ERROR(byte_level_ok(second, false));
      const json* pattern = nullptr;
      if (first.contains("pattern") && first["pattern"].is_object() &&
          first["pattern"].contains("Regex") && first["pattern"]["Regex"].is_string()) {
        pattern = &first["pattern"]["Regex"];
      }
      if (pattern == nullptr || !first.contains("behavior") || first["behavior"] != "Isolated" ||
          BoolField(first, "invert", false)) {
        return absl::UnimplementedError("only Split(Regex, Isolated) pre-tokenizers are supported");
      }
      BANYAN_ASSIGN_OR_RETURN(spec->pre_tokenizer, PreTokenizerFromPattern(pattern->get<std::string>()));
      return absl::OkStatus();
    }
    if (TypeOf(first) == "Digits" && BoolField(first, "individual_digits", false) &&
        TypeOf(second) == "ByteLevel") {
      BANYAN_RETURN_IF_ERROR(byte_level_ok(second, true));
      spec->pre_tokenizer = PreTokenizerKind::kSmolLm;
      return absl::OkStatus();
    }
  }
  return absl::UnimplementedError(absl::StrCat("tokenizer.json pre-tokenizer '", type,
                                               "' is not supported"));
}

// Leading special tokens of a TemplateProcessing "single" template.
void ParsePostProcessor(const json& p, const absl::flat_hash_map<std::string, int32_t>& ids,
                        std::vector<int32_t>* prefix) {
  const std::string type = TypeOf(p);
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (const json& sub : p["processors"]) ParsePostProcessor(sub, ids, prefix);
    return;
  }
  if (type != "TemplateProcessing" || !p.contains("single") || !p["single"].is_array()) return;
  for (const json& item : p["single"]) {
    if (!item.is_object() || !item.contains("SpecialToken")) break;
    const json& st = item["SpecialToken"];
    if (!st.is_object() || !st.contains("id") || !st["id"].is_string()) break;
    auto it = ids.find(st["id"].get<std::string>());
    if (it != ids.end()) prefix->push_back(it->second);
  }
}

// A special token named in tokenizer_config.json: "<s>" or {"content": "<s>"}.
std::string ConfigToken(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromJson(const std::string& tokenizer_json,
                                                             const std::string& tokenizer_config_json) {
  const json j = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("not a JSON object");
  if (!j.contains("model") || !j["model"].is_object()) return Bad("no model");
  const json& model = j["model"];
  if (TypeOf(model) != "BPE" && !(TypeOf(model).empty() && model.contains("merges"))) {
    return absl::UnimplementedError(absl::StrCat("tokenizer.json model '", TypeOf(model),
                                                 "' is not supported (BPE is)"));
  }
  if (BoolField(model, "byte_fallback", false)) {
    return absl::UnimplementedError("tokenizer.json byte_fallback BPE is not supported");
  }
  BpeSpec spec;
  if (!model.contains("vocab") || !model["vocab"].is_object()) return Bad("model.vocab missing");
  const json& vocab = model["vocab"];
  std::vector<std::pair<std::string, int64_t>> entries;
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it->is_number_integer()) return Bad("vocab id is not an integer");
    const int64_t id = it->get<int64_t>();
    if (id < 0 || id >= (1 << 24)) return Bad(absl::StrCat("vocab id ", id, " out of range"));
    entries.emplace_back(it.key(), id);
    max_id = std::max(max_id, id);
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string()) {
        return Bad("malformed added token");
      }
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id >= (1 << 24)) return Bad(absl::StrCat("added token id ", id, " out of range"));
      max_id = std::max(max_id, id);
      spec.added_tokens.push_back({a["content"].get<std::string>(), static_cast<int32_t>(id),
                                   BoolField(a, "special", false), BoolField(a, "lstrip", false),
                                   BoolField(a, "rstrip", false)});
    }
  }
  spec.vocab.resize(static_cast<size_t>(max_id + 1));
  for (auto& [text, id] : entries) {
    if (!spec.vocab[id].empty()) return Bad(absl::StrCat("vocab id ", id, " is used twice"));
    spec.vocab[id] = std::move(text);
  }
  if (!model.contains("merges") || !model["merges"].is_array()) return Bad("model.merges missing");
  spec.merges.reserve(model["merges"].size());
  for (const json& m : model["merges"]) {
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) return Bad(absl::StrCat("merge '", s, "' has no space"));
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Bad("a merge is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  spec.ignore_merges = BoolField(model, "ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = vocab.find(model["unk_token"].get<std::string>());
    if (it != vocab.end() && it->is_number_integer()) spec.unk_id = it->get<int32_t>();
  }
  if (j.contains("normalizer")) BANYAN_RETURN_IF_ERROR(ParseNormalizer(j["normalizer"], &spec));
  if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null()) {
    spec.pre_tokenizer = PreTokenizerKind::kNone;
  } else {
    BANYAN_RETURN_IF_ERROR(ParsePreTokenizer(j["pre_tokenizer"], &spec));
  }
  absl::flat_hash_map<std::string, int32_t> ids;
  for (size_t id = 0; id < spec.vocab.size(); ++id) {
    if (!spec.vocab[id].empty()) ids.emplace(spec.vocab[id], static_cast<int32_t>(id));
  }
  for (const AddedToken& a : spec.added_tokens) ids[a.content] = a.id;
  if (j.contains("post_processor")) ParsePostProcessor(j["post_processor"], ids, &spec.prefix_ids);
  if (!tokenizer_config_json.empty()) {
    const json config = json::parse(tokenizer_config_json, nullptr, false);
    if (config.is_discarded()) {
      return absl::InvalidArgumentError("tokenizer_config.json: not valid JSON");
    }
    if (auto it = ids.find(ConfigToken(config, "bos_token")); it != ids.end()) spec.bos_id = it->second;
    if (auto it = ids.find(ConfigToken(config, "eos_token")); it != ids.end()) spec.eos_id = it->second;
  }
  if (spec.bos_id < 0 && !spec.prefix_ids.empty()) spec.bos_id = spec.prefix_ids[0];
  BANYAN_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace banyan::model
