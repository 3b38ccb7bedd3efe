#include "sdk/cli/json_text.h"

#include "absl/strings/str_format.h"
#include "model/tokenizer/unicode.h"

namespace banyan::cli {

std::string JsonString(std::string_view text) {
  const std::string valid = model::ToValidUtf8(text);
  std::string out = "\"";
  out.reserve(valid.size() + 2);
  for (const unsigned char c : valid) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);  // valid UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

}  // namespace banyan::cli
