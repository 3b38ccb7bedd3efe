// UTF-8 validity: the one decoder the tokenizers (model/tokenizer/unicode.h)
// and everything that writes text out of the process (search traces, the
// CLI's JSON) share. Thread-safe (pure functions).
#ifndef BANYAN_SDK_BASE_UTF8_H_
#define BANYAN_SDK_BASE_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace banyan {

// Byte length of the UTF-8 sequence that starts at `lead`, 0 if `lead` is not
// a lead byte (continuation bytes, 0xc0 / 0xc1, 0xf5-0xff).
int Utf8SequenceLength(uint8_t lead);

// Decodes the sequence at text[i] (i < text.size()) into *cp and returns its
// length, or returns 0 when no valid sequence starts there: a bad lead byte, a
// truncated sequence, an overlong form, a surrogate, a value past U+10FFFF.
int DecodeUtf8At(std::string_view text, size_t i, char32_t* cp);

bool IsValidUtf8(std::string_view text);

// `text` with each byte that does not belong to a valid sequence replaced by
// U+FFFD; valid text comes back unchanged. For text that leaves the process as
// UTF-8 (JSON; proto3 `string` fields, which refuse to parse other bytes).
std::string ToValidUtf8(std::string_view text);

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_UTF8_H_
