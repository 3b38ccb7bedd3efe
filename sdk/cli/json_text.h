// JSON string literals for the CLI's hand-written JSON output (`banyan
// generate --json`, `banyan eval --report`), whose keys come in a fixed,
// readable order. Model output need not be valid UTF-8 (a byte-fallback token,
// a character cut by --max-tokens): such bytes become U+FFFD, so every line
// written is valid JSON that any parser accepts. Thread-safe (pure).
#ifndef BANYAN_SDK_CLI_JSON_TEXT_H_
#define BANYAN_SDK_CLI_JSON_TEXT_H_

#include <string>
#include <string_view>

namespace banyan::cli {

// `text` as a quoted JSON string: ", \ and control characters escaped,
// invalid UTF-8 bytes replaced by U+FFFD, other characters as they are.
std::string JsonString(std::string_view text);

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_JSON_TEXT_H_
