// Text views of a ChatSession for the REPL: the turn tree, a conversation,
// a comparison of two replies (side by side and a word diff), the numbers.
// Pure functions of their arguments (they read the session, never change it);
// thread-compatible.
#ifndef BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_VIEW_H_
#define BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_VIEW_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "samples/branching_chat/chat_session.h"

namespace banyan::samples::chat {

// One line per turn, indented under its parent:
//   [3] assistant "Paris is the capital..."  +9 tok = 41  shares 32 | logp -3.2 end of turn  <- current
// "+N" is what the turn adds, "= T" its whole conversation, "shares S" the
// tokens of KV it shares with its parent's branch (stored once); a turn whose
// branch was created anew says how much KV came from the prefix cache. A footer
// gives the KV stored for the whole tree against storing every conversation
// on its own.
std::string RenderTree(const ChatSession& session, int preview_chars = 48);

// The conversation from the first turn to `id` (0: nothing), one block per
// turn.
std::string RenderConversation(const ChatSession& session, int32_t id);

// The two replies side by side (wrapped to `width` columns in all), their
// scores and a word diff.
std::string RenderComparison(const Comparison& c, int width = 100);

// Word-level diff of a -> b: common words plain, removed "[-...-]", added
// "{+...+}". Inputs beyond `max_words` words are compared as one trailing
// chunk.
std::string WordDiff(std::string_view a, std::string_view b, size_t max_words = 2000);

// Distinct tokens in a set of sequences stored as a prefix tree (a token
// shared by several sequences counts once).
int64_t DistinctPrefixTokens(std::vector<std::vector<int32_t>> sequences);

// Engine and session numbers: tokens generated / prefilled / reused from the
// cache / shared by forks, tok/s, KV pages.
std::string RenderStats(const ChatSession& session);

// `text` with control characters other than newline and tab escaped
// ("\x0d"), safe to print on a terminal.
std::string Printable(std::string_view text);

// `text` on one line: control characters escaped, at most `max_chars`
// characters (head ... tail), never splitting a UTF-8 character.
std::string Preview(std::string_view text, int max_chars);

}  // namespace banyan::samples::chat

#endif  // BANYAN_SAMPLES_BRANCHING_CHAT_CHAT_VIEW_H_
