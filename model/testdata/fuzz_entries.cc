#include "model/testdata/fuzz_entries.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/chat/chat_format.h"
#include "model/gguf/gguf_file.h"
#include "model/gguf/gguf_model.h"
#include "model/safetensors/hf_model.h"
#include "model/safetensors/safetensors_file.h"
#include "model/testdata/test_files.h"
#include "model/tokenizer/tokenizer_loaders.h"

namespace banyan::model::fuzz {
namespace {

constexpr int64_t kMaxFuzzElements = int64_t{1} << 22;  // keep dequantization small

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// Encodes and decodes `text`; exact round trip when `exact`.
void Exercise(const Tokenizer& t, std::string_view text, bool exact) {
  auto ids = t.Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) return;
  for (int32_t id : *ids) Check(id >= 0 && id < t.vocab_size());
  auto back = t.Decode(*ids);
  Check(back.ok());
  if (exact) Check(*back == text);
  StreamDecoder stream(t);
  std::string streamed;
  for (int32_t id : *ids) {
    auto part = stream.Add(id);
    Check(part.ok());
    streamed += *part;
  }
  streamed += stream.Flush();
  Check(streamed == *back);
  Check(!t.Decode(std::vector<int32_t>{t.vocab_size()}).ok());
  Check(!t.Decode(std::vector<int32_t>{-1}).ok());
}

}  // namespace

int FuzzGguf(const uint8_t* data, size_t size) {
  auto gguf = GgufFile::Parse(absl::MakeConstSpan(data, size));
  if (!gguf.ok()) return 0;
  int64_t total = 0;
  for (const GgufTensorInfo& t : gguf->tensors()) total += std::min(t.num_elements, kMaxFuzzElements);
  auto config = GgufModelConfig(*gguf);
  if (config.ok() && total < kMaxFuzzElements) {
    auto weights = GgufModelWeights(*gguf);
    (void)weights;
  }
  auto tokenizer = TokenizerFromGguf(*gguf);
  if (tokenizer.ok()) Exercise(**tokenizer, "Hello world! 123 <|im_end|>\n\xf0\x9f\x9a\x80", false);
  if (auto tmpl = gguf->GetString("tokenizer.chat_template"); tmpl.ok()) {
    auto format = ChatFormat::FromTemplate(*tmpl, "<s>", "</s>");
    if (format.ok()) (void)format->Apply({{"user", "hi"}}, true);
  }
  return 0;
}

int FuzzSafetensors(const uint8_t* data, size_t size) {
  auto file = SafetensorsFile::Parse(absl::MakeConstSpan(data, size));
  if (file.ok()) {
    for (const auto& [name, t] : file->tensors()) {
      if (t.num_elements > kMaxFuzzElements) continue;
      std::vector<float> out(static_cast<size_t>(t.num_elements));
      (void)SafetensorsToFloat(t, absl::MakeSpan(out));
    }
  }
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)ParseHfConfig(text, text);
  auto tokenizer = TokenizerFromJson(text, text);
  if (tokenizer.ok()) Exercise(**tokenizer, "Hello world! 123", false);
  auto format = ChatFormat::FromTemplate(text, "<s>", "</s>");
  if (format.ok()) (void)format->Apply({{"system", "s"}, {"user", "u"}, {"assistant", "a"}}, true);
  return 0;
}

int FuzzTokenizer(const uint8_t* data, size_t size) {
  struct Loaded {
    std::unique_ptr<Tokenizer> llama3, qwen, spm;
  };
  static const Loaded* loaded = [] {
    auto* l = new Loaded();
    const std::string dir = std::string(BANYAN_ASSETS_DIR) + "/tokenizers/";
    for (auto [name, slot] : {std::pair{"llama3", &l->llama3}, std::pair{"qwen2.5", &l->qwen}}) {
      auto json = testing::ReadTestFile(dir + name + "/tokenizer.json.gz");
      if (!json.ok()) continue;
      auto t = TokenizerFromJson(*json, "");
      if (t.ok()) *slot = std::move(*t);
    }
    auto spm = testing::ReadTestFile(dir + "golden/ggml-vocab-llama-spm.gguf.gz");
    if (spm.ok()) {
      auto g = GgufFile::Parse(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(spm->data()), spm->size()));
      if (g.ok()) {
        auto t = TokenizerFromGguf(*g);
        if (t.ok()) l->spm = std::move(*t);
      }
    }
    Check(l->llama3 && l->qwen && l->spm);  // assets must be present
    return l;
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Exercise(*loaded->llama3, text, /*exact=*/true);
  Exercise(*loaded->qwen, text, /*exact=*/false);  // NFC may change the text
  Exercise(*loaded->spm, text, /*exact=*/false);
  return 0;
}

}  // namespace banyan::model::fuzz
