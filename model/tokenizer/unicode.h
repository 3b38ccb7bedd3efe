// Unicode helpers for the tokenizers: UTF-8 scanning that tolerates invalid
// bytes, the character classes the pre-tokenizer regexes use (\p{L}, \p{N},
// \s), NFC normalization, and GPT-2's byte <-> printable-char map, over
// tables generated from the Unicode Character Database (unicode_tables.h).
// Thread-safe (pure functions over immutable tables).
#ifndef BANYAN_MODEL_TOKENIZER_UNICODE_H_
#define BANYAN_MODEL_TOKENIZER_UNICODE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sdk/base/utf8.h"

namespace banyan::model {

// One code point of a UTF-8 string: its value and byte span. An invalid or
// truncated sequence yields one code point per byte with `valid` false
// (value = the byte), so no byte is ever lost.
struct CodePoint {
  char32_t value;
  uint32_t begin;  // byte offset
  uint32_t end;
  bool valid;
};
std::vector<CodePoint> SplitUtf8(std::string_view text);

// The validity checks live in sdk/base/utf8.h (shared beyond the tokenizers).
using ::banyan::IsValidUtf8;
using ::banyan::ToValidUtf8;
using ::banyan::Utf8SequenceLength;
void AppendUtf8(char32_t cp, std::string* out);

enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };
// \p{L} (general categories Lu Ll Lt Lm Lo), \p{N} (Nd Nl No), \s (the
// White_Space property), else kOther. Invalid bytes are kOther.
CharClass ClassOf(const CodePoint& cp);

// NFC of valid UTF-8; other input is returned unchanged.
std::string NormalizeNfc(std::string_view text);

// GPT-2 byte-level alphabet: byte b <-> a printable code point.
char32_t ByteToUnicode(uint8_t b);
// -1 when `cp` is not in the alphabet.
int UnicodeToByte(char32_t cp);
// Maps every byte of `bytes` through ByteToUnicode, as UTF-8.
std::string BytesToByteLevel(std::string_view bytes);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_TOKENIZER_UNICODE_H_
