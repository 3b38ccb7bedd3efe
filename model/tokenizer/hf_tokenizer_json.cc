// TokenizerFromJson (tokenizer_loaders.h): Hugging Face tokenizer.json.
#include <algorithm>
#include <cctype>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/spm_tokenizer.h"
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

constexpr char kMetaspace[] = "\xe2\x96\x81";  // U+2581 "▁"

// A Prepend("▁") or Replace(" " -> "▁") normalizer step; sets the flag it matches.
bool SpaceNormalizer(const json& n, bool* prepend, bool* replace) {
  const std::string type = TypeOf(n);
  if (type == "Prepend" && n.value("prepend", "") == kMetaspace) return *prepend = true;
  if (type == "Replace" && n.value("content", "") == kMetaspace && n.contains("pattern") &&
      n["pattern"].is_object() && n["pattern"].value("String", "") == " ") {
    return *replace = true;
  }
  return false;
}

// The "▁" handling of a byte-fallback (SentencePiece-converted) tokenizer.json:
// either the legacy normalizer Prepend("▁") + Replace(" ", "▁") with no
// pre-tokenizer, or no normalizer and a Metaspace pre-tokenizer (split false).
absl::Status ParseSpaceHandling(const json& j, SpmSpec* spec) {
  const json normalizer = j.contains("normalizer") ? j["normalizer"] : json();
  const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  if (!normalizer.is_null()) {
    bool prepend = false, replace = false;
    const bool ok = TypeOf(normalizer) == "Sequence" && normalizer.contains("normalizers") &&
                            normalizer["normalizers"].is_array()
                        ? std::all_of(normalizer["normalizers"].begin(), normalizer["normalizers"].end(),
                                      [&](const json& n) { return SpaceNormalizer(n, &prepend, &replace); })
                        : SpaceNormalizer(normalizer, &prepend, &replace);
    if (!ok || !replace || !pre.is_null()) {
      return absl::UnimplementedError(
          "byte_fallback tokenizer.json: only the normalizer Prepend(\"▁\") + Replace(\" \", \"▁\") "
          "without a pre-tokenizer, or a Metaspace pre-tokenizer, is supported");
    }
    spec->add_space_prefix = prepend;
    spec->space_prefix = SpacePrefix::kEveryRun;
    return absl::OkStatus();
  }
  if (TypeOf(pre) != "Metaspace" || pre.value("replacement", "") != kMetaspace || BoolField(pre, "split", false)) {
    return absl::UnimplementedError(absl::StrCat("byte_fallback tokenizer.json: pre-tokenizer '", TypeOf(pre),
                                                 "' is not supported (Metaspace without split is)"));
  }
  std::string scheme = pre.value("prepend_scheme", "");
  if (scheme.empty()) scheme = BoolField(pre, "add_prefix_space", true) ? "always" : "never";
  spec->add_space_prefix = scheme != "never";
  if (scheme == "first") {
    spec->space_prefix = SpacePrefix::kFirstRunUnlessSpace;
  } else if (scheme == "always" || scheme == "never") {
    spec->space_prefix = SpacePrefix::kEveryRunUnlessSpace;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: Metaspace prepend_scheme '", scheme, "'"));
  }
  return absl::OkStatus();
}

// A byte-fallback BPE (Llama 2 / Mistral) as SpmTokenizer runs it: vocabulary,
// merges and special tokens from the parsed BpeSpec, token types from the
// added tokens and the <0xNN> names.
absl::StatusOr<std::unique_ptr<Tokenizer>> ByteFallbackTokenizer(const json& j, const json& model, BpeSpec bpe) {
  SpmSpec spec;
  BANYAN_RETURN_IF_ERROR(ParseSpaceHandling(j, &spec));
  const size_t n = bpe.vocab.size();
  spec.vocab = std::move(bpe.vocab);
  spec.scores.assign(n, 0.0f);
  spec.types.assign(n, static_cast<int32_t>(SpmTokenType::kNormal));
  for (size_t id = 0; id < n; ++id) {
    const std::string& t = spec.vocab[id];
    if (t.empty()) {
      spec.types[id] = static_cast<int32_t>(SpmTokenType::kUnused);
    } else if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
               std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4]))) {
      spec.types[id] = static_cast<int32_t>(SpmTokenType::kByte);
    }
  }
  for (const AddedToken& a : bpe.added_tokens) {
    spec.vocab[a.id] = a.content;
    spec.types[a.id] = static_cast<int32_t>(a.special ? SpmTokenType::kControl : SpmTokenType::kUserDefined);
  }
  spec.merges = std::move(bpe.merges);
  spec.fuse_unk = BoolField(model, "fuse_unk", false);
  spec.unk_id = bpe.unk_id;
  spec.add_bos = !bpe.prefix_ids.empty();
  spec.bos_id = bpe.bos_id;
  spec.eos_id = bpe.eos_id;
  BANYAN_ASSIGN_OR_RETURN(auto tokenizer, SpmTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
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
  const bool byte_fallback = BoolField(model, "byte_fallback", false);
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
  // A byte-fallback file's normalizer and pre-tokenizer: ParseSpaceHandling.
  if (!byte_fallback) {
    if (j.contains("normalizer")) BANYAN_RETURN_IF_ERROR(ParseNormalizer(j["normalizer"], &spec));
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null()) {
      spec.pre_tokenizer = PreTokenizerKind::kNone;
    } else {
      BANYAN_RETURN_IF_ERROR(ParsePreTokenizer(j["pre_tokenizer"], &spec));
    }
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
  if (byte_fallback) return ByteFallbackTokenizer(j, model, std::move(spec));
  BANYAN_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace banyan::model
