// TokenizerFromGguf (tokenizer_loaders.h): vocabularies embedded in GGUF.
#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/tokenizer/bpe_tokenizer.h"
#include "model/tokenizer/spm_tokenizer.h"
#include "model/tokenizer/tokenizer_loaders.h"

namespace banyan::model {
namespace {

absl::Status Bad(const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer: ", s.message()));
}

int32_t IdOr(const GgufFile& g, const std::string& key, size_t vocab) {
  auto v = g.GetInt(key);
  return v.ok() && *v >= 0 && static_cast<uint64_t>(*v) < vocab ? static_cast<int32_t>(*v) : -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const GgufFile& g) {
  auto model = g.GetString("tokenizer.ggml.model");
  if (!model.ok()) return Bad(model.status());
  auto tokens = g.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return Bad(tokens.status());
  const size_t n = tokens->size();
  std::vector<int64_t> types;
  if (g.Find("tokenizer.ggml.token_type") != nullptr) {
    auto t = g.GetIntArray("tokenizer.ggml.token_type");
    if (!t.ok()) return Bad(t.status());
    if (t->size() != n) return absl::InvalidArgumentError("GGUF tokenizer: token_type length differs");
    types = std::move(*t);
  }
  const int32_t bos = IdOr(g, "tokenizer.ggml.bos_token_id", n);
  const int32_t eos = IdOr(g, "tokenizer.ggml.eos_token_id", n);
  if (*model == "llama") {
    SpmSpec spec;
    spec.vocab = std::move(*tokens);
    auto scores = g.GetFloatArray("tokenizer.ggml.scores");
    if (!scores.ok()) return Bad(scores.status());
    spec.scores.assign(scores->begin(), scores->end());
    spec.types.assign(types.begin(), types.end());
    spec.add_space_prefix = g.GetBool("tokenizer.ggml.add_space_prefix").value_or(true);
    spec.add_bos = g.GetBool("tokenizer.ggml.add_bos_token").value_or(true);
    spec.bos_id = bos;
    spec.eos_id = eos;
    spec.unk_id = IdOr(g, "tokenizer.ggml.unknown_token_id", n);
    BANYAN_ASSIGN_OR_RETURN(auto t, SpmTokenizer::Create(std::move(spec)));
    return std::unique_ptr<Tokenizer>(std::move(t));
  }
  if (*model != "gpt2") {
    return absl::UnimplementedError(absl::StrCat("GGUF tokenizer model '", *model,
                                                 "' is not supported (gpt2, llama are)"));
  }
  BpeSpec spec;
  const std::string pre = g.GetString("tokenizer.ggml.pre").value_or("default");
  BANYAN_ASSIGN_OR_RETURN(spec.pre_tokenizer, PreTokenizerFromGgufName(pre));
  spec.ignore_merges = spec.pre_tokenizer == PreTokenizerKind::kLlama3;
  spec.nfc = spec.pre_tokenizer == PreTokenizerKind::kQwen2;
  auto merges = g.GetStringArray("tokenizer.ggml.merges");
  if (!merges.ok()) return Bad(merges.status());
  spec.merges.reserve(merges->size());
  for (const std::string& m : *merges) {
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer: merge '", m, "' has no space"));
    }
    spec.merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  for (size_t id = 0; id < n; ++id) {
    const int64_t type = types.empty() ? 1 : types[id];
    if (type == 3 || type == 4) {  // control, user-defined: matched as text
      spec.added_tokens.push_back({(*tokens)[id], static_cast<int32_t>(id), type == 3, false, false});
    }
  }
  spec.vocab = std::move(*tokens);
  spec.bos_id = bos;
  spec.eos_id = eos;
  if (g.GetBool("tokenizer.ggml.add_bos_token").value_or(false) && bos >= 0) {
    spec.prefix_ids.push_back(bos);
  }
  BANYAN_ASSIGN_OR_RETURN(auto t, BpeTokenizer::Create(std::move(spec)));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace banyan::model
