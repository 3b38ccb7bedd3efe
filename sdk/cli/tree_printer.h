// PrintTokenTree: an ASCII picture of how a set of token sequences share
// prefixes: the radix tree of the sequences, one line per node with its token
// count, how many sequences pass through it and a snippet of its text; leaves
// carry the caller's label. Used by `banyan demo` to show the KV tree.
//
//   std::string art = PrintTokenTree(seqs, [&](absl::Span<const int32_t> t) {
//     return engine->Detokenize(t).value_or("?"); }, /*snippet=*/40);
//
// Thread-safe (pure).
#ifndef BANYAN_SDK_CLI_TREE_PRINTER_H_
#define BANYAN_SDK_CLI_TREE_PRINTER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace banyan::cli {

struct LabeledSequence {
  std::vector<int32_t> tokens;
  std::string label;  // printed after the node where the sequence ends
};

// `decode` turns a node's tokens into text (control characters are shown
// escaped); snippets longer than `snippet_chars` keep their head and tail.
std::string PrintTokenTree(const std::vector<LabeledSequence>& sequences,
                           const std::function<std::string(absl::Span<const int32_t>)>& decode,
                           int snippet_chars = 48);

// Escapes newlines, tabs and other control bytes; shortens to `max_chars`
// (head ... tail), never splitting a UTF-8 character.
std::string Snippet(std::string_view text, int max_chars);

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_TREE_PRINTER_H_
