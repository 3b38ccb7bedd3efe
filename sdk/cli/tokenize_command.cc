// `banyan tokenize [--model PATH | --tokenizer PATH] [--decode] [--no-special]`
//
// Encode (default): reads stdin verbatim (no trimming; invalid UTF-8 is kept
// byte by byte), recognises special-token text such as "<|im_end|>" as HF
// tokenizers do by default, adds the tokenizer's default special tokens (a
// BOS where the model's tokenizer adds one; --no-special: none) and prints
// the ids as a JSON array. --decode reads a JSON array of ids and prints the
// text exactly (no newline added). Without --model or --tokenizer the
// default model's tokenizer is used. --tokenizer takes a tokenizer.json, a
// directory holding one, or a .gguf.
#include "sdk/cli/tokenize_command.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"
#include "model/default_model.h"
#include "model/loader.h"
#include "sdk/cli/args.h"
#include "sdk/cli/command.h"

namespace banyan::cli {

std::string IdsToJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&out, i ? ", " : "", ids[i]);
  return out + "]";
}

absl::StatusOr<std::vector<int32_t>> ParseIdArray(std::string_view s) {
  auto bad = [](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--decode wants a JSON array of token ids: ", why));
  };
  size_t i = 0;
  auto skip = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  };
  skip();
  if (i >= s.size() || s[i] != '[') return bad("no '['");
  ++i;
  std::vector<int32_t> ids;
  skip();
  if (i < s.size() && s[i] == ']') {
    ++i;
  } else {
    while (true) {
      skip();
      bool negative = false;
      if (i < s.size() && s[i] == '-') {
        negative = true;
        ++i;
      }
      if (i >= s.size() || s[i] < '0' || s[i] > '9') return bad("expected an integer");
      int64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        v = v * 10 + (s[i++] - '0');
        if (v > std::numeric_limits<int32_t>::max()) return bad("id too large");
      }
      ids.push_back(static_cast<int32_t>(negative ? -v : v));
      skip();
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == ']') {
        ++i;
        break;
      }
      return bad("expected ',' or ']'");
    }
  }
  skip();
  if (i != s.size()) return bad("text after ']'");
  return ids;
}

absl::Status RunTokenize(const std::vector<std::string>& argv) {
  BANYAN_ASSIGN_OR_RETURN(Args args,
                          ParseFlags("tokenize", argv));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", args.positional()[0],
                                                   "' (text comes on stdin)"));
  }
  if (args.Has("model") && args.Has("tokenizer")) {
    return absl::InvalidArgumentError("give --model or --tokenizer, not both");
  }
  std::string path = args.Has("model") ? args.GetString("model") : args.GetString("tokenizer");
  if (path.empty()) {
    BANYAN_ASSIGN_OR_RETURN(path, model::FindDefaultModel());
  }
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer, model::LoadTokenizer(path));
  std::cin >> std::noskipws;
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  if (args.GetBool("decode")) {
    BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIdArray(input));
    BANYAN_ASSIGN_OR_RETURN(std::string text, tokenizer->Decode(ids));
    std::cout << text << std::flush;
    return absl::OkStatus();
  }
  BANYAN_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                          tokenizer->Encode(input, /*add_special_tokens=*/!args.GetBool("no-special")));
  std::cout << IdsToJson(ids) << "\n";
  return absl::OkStatus();
}

}  // namespace banyan::cli
