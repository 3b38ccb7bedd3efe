#include "model/loader.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_model.h"
#include "model/gguf/mapped_file.h"
#include "model/safetensors/hf_model.h"
#include "model/tokenizer/tokenizer_loaders.h"
#include "nlohmann/json.hpp"

namespace banyan::model {
namespace {

enum class Kind { kGguf, kDirectory, kTokenizerJson };

absl::StatusOr<Kind> KindOf(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat("model path '", path, "' does not exist"));
  }
  if (std::filesystem::is_directory(status)) return Kind::kDirectory;
  if (absl::EndsWith(path, ".json")) return Kind::kTokenizerJson;
  return Kind::kGguf;  // any other file: GGUF checks its magic
}

struct OpenGguf {
  std::unique_ptr<MappedFile> file;
  GgufFile gguf;
};

absl::StatusOr<OpenGguf> Open(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  auto gguf = GgufFile::Parse(file->bytes());
  if (!gguf.ok()) {
    return absl::Status(gguf.status().code(), absl::StrCat(path, ": ", gguf.status().message()));
  }
  return OpenGguf{std::move(file), std::move(*gguf)};
}

// A directory file's text, or "" when it does not exist.
absl::StatusOr<std::string> OptionalFile(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::string();
  return ReadWholeFile(path);
}

}  // namespace

absl::StatusOr<ModelWeights> LoadModelWeights(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(Kind kind, KindOf(path));
  if (kind == Kind::kDirectory) return LoadHfDirectory(path);
  if (kind == Kind::kTokenizerJson) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a JSON file, not a model"));
  }
  BANYAN_ASSIGN_OR_RETURN(OpenGguf g, Open(path));
  return GgufModelWeights(g.gguf);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(Kind kind, KindOf(path));
  if (kind == Kind::kDirectory) return LoadHfConfig(path);
  if (kind == Kind::kTokenizerJson) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a JSON file, not a model"));
  }
  BANYAN_ASSIGN_OR_RETURN(OpenGguf g, Open(path));
  return GgufModelConfig(g.gguf);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(Kind kind, KindOf(path));
  if (kind == Kind::kGguf) {
    BANYAN_ASSIGN_OR_RETURN(OpenGguf g, Open(path));
    return TokenizerFromGguf(g.gguf);
  }
  std::string json_path = path, config_path;
  if (kind == Kind::kDirectory) {
    json_path = path + "/tokenizer.json";
    config_path = path + "/tokenizer_config.json";
  } else {
    config_path = std::filesystem::path(path).parent_path().string() + "/tokenizer_config.json";
  }
  BANYAN_ASSIGN_OR_RETURN(std::string json, ReadWholeFile(json_path));
  BANYAN_ASSIGN_OR_RETURN(std::string config, OptionalFile(config_path));
  return TokenizerFromJson(json, config);
}

absl::StatusOr<ChatFormat> LoadChatFormat(const std::string& path) {
  BANYAN_ASSIGN_OR_RETURN(Kind kind, KindOf(path));
  if (kind == Kind::kGguf) {
    BANYAN_ASSIGN_OR_RETURN(OpenGguf g, Open(path));
    auto tmpl = g.gguf.GetString("tokenizer.chat_template");
    if (!tmpl.ok()) {
      return absl::NotFoundError(absl::StrCat(path, " has no tokenizer.chat_template"));
    }
    std::string bos, eos;
    auto tokens = g.gguf.Find("tokenizer.ggml.tokens");
    auto token_text = [&](const char* key) -> std::string {
      auto id = g.gguf.GetInt(key);
      if (!id.ok() || tokens == nullptr || *id < 0 ||
          static_cast<size_t>(*id) >= tokens->array.size()) {
        return "";
      }
      return tokens->array[*id].s;
    };
    return ChatFormat::FromTemplate(*tmpl, token_text("tokenizer.ggml.bos_token_id"),
                                    token_text("tokenizer.ggml.eos_token_id"));
  }
  const std::string dir =
      kind == Kind::kDirectory ? path : std::filesystem::path(path).parent_path().string();
  BANYAN_ASSIGN_OR_RETURN(std::string config_text, OptionalFile(dir + "/tokenizer_config.json"));
  const nlohmann::json config = nlohmann::json::parse(config_text, nullptr, false);
  auto field = [&](const char* key) -> std::string {
    if (!config.is_object() || !config.contains(key)) return "";
    const auto& v = config[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
    return "";
  };
  std::string tmpl = field("chat_template");
  if (tmpl.empty()) {
    BANYAN_ASSIGN_OR_RETURN(tmpl, OptionalFile(dir + "/chat_template.jinja"));
  }
  if (tmpl.empty()) return absl::NotFoundError(absl::StrCat("no chat template found in ", dir));
  return ChatFormat::FromTemplate(tmpl, field("bos_token"), field("eos_token"));
}

}  // namespace banyan::model
