#include "samples/branching_chat/chat_view.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace banyan::samples::chat {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// Code points in `s` (display width, roughly).
int Width(std::string_view s) {
  int n = 0;
  for (char c : s) n += IsContinuation(c) ? 0 : 1;
  return n;
}

// The first `chars` code points of `s`.
std::string_view Head(std::string_view s, int chars) {
  size_t i = 0;
  int n = 0;
  while (i < s.size()) {
    if (!IsContinuation(s[i])) {
      if (n == chars) break;
      ++n;
    }
    ++i;
  }
  return s.substr(0, i);
}

// The last `chars` code points of `s`.
std::string_view Tail(std::string_view s, int chars) {
  size_t i = s.size();
  int n = 0;
  while (i > 0 && n < chars) {
    --i;
    if (!IsContinuation(s[i])) ++n;
  }
  return s.substr(i);
}

// Greedy word wrap to `width` code points; explicit newlines kept; words
// longer than a line are cut.
std::vector<std::string> Wrap(std::string_view text, int width) {
  std::vector<std::string> lines;
  for (absl::string_view para : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::string line;
    for (absl::string_view w : absl::StrSplit(para, ' ', absl::SkipEmpty())) {
      std::string_view word(w.data(), w.size());
      while (Width(word) > width) {  // a word longer than a line
        if (!line.empty()) lines.push_back(std::exchange(line, {}));
        const std::string_view head = Head(word, width);
        lines.emplace_back(head);
        word.remove_prefix(head.size());
      }
      if (word.empty()) continue;
      if (!line.empty() && Width(line) + 1 + Width(word) > width) lines.push_back(std::exchange(line, {}));
      if (!line.empty()) line += ' ';
      line += word;
    }
    lines.push_back(line);
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

std::string Pad(std::string_view s, int width) {
  return absl::StrCat(std::string(s), std::string(static_cast<size_t>(std::max(0, width - Width(s))), ' '));
}

std::string Tokens(const Turn& t) {
  return absl::StrCat(t.tokens.size());
}

}  // namespace

std::string Printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n' && c != '\t') || u == 0x7f) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::string Preview(std::string_view text, int max_chars) {
  std::string flat;
  for (const char c : text) {
    if (c == '\n') {
      flat += "\\n";
    } else if (c == '\t') {
      flat += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      flat += absl::StrFormat("\\x%02x", static_cast<unsigned char>(c));
    } else {
      flat += c;
    }
  }
  if (Width(flat) <= max_chars) return flat;
  const int head = std::max(1, (max_chars - 3) * 2 / 3);
  const int tail = std::max(0, max_chars - 3 - head);
  return absl::StrCat(std::string(Head(flat, head)), "...", std::string(Tail(flat, tail)));
}

int64_t DistinctPrefixTokens(std::vector<std::vector<int32_t>> sequences) {
  // In lexicographic order each sequence shares the most with its neighbour.
  std::sort(sequences.begin(), sequences.end());
  int64_t distinct = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    size_t common = 0;
    if (i > 0) {
      const auto& p = sequences[i - 1];
      const auto& s = sequences[i];
      while (common < p.size() && common < s.size() && p[common] == s[common]) ++common;
    }
    distinct += static_cast<int64_t>(sequences[i].size() - common);
  }
  return distinct;
}

std::string RenderTree(const ChatSession& session, int preview_chars) {
  std::string out = absl::StrCat("[0] (start)", session.current() == 0 ? "  <- current" : "", "\n");
  std::function<void(int32_t, const std::string&, bool)> draw = [&](int32_t id, const std::string& indent,
                                                                    bool last) {
    const Turn& t = *session.Find(id);
    const Turn* parent = session.Find(t.parent);
    const size_t before = parent == nullptr ? 0 : parent->tokens.size();
    size_t shared = 0;
    if (parent != nullptr) {
      while (shared < parent->tokens.size() && shared < t.tokens.size() &&
             parent->tokens[shared] == t.tokens[shared]) {
        ++shared;
      }
    }
    std::string line = absl::StrCat(indent, last ? "`-- " : "|-- ", "[", t.id, "] ", RoleName(t.role), " \"",
                                     Preview(t.content, preview_chars), "\"  +",
                                     static_cast<int64_t>(t.tokens.size()) - static_cast<int64_t>(before),
                                     " tok = ", Tokens(t));
    if (parent != nullptr) absl::StrAppend(&line, "  shares ", shared);
    if (t.cache_reused > 0) absl::StrAppend(&line, "  (", t.cache_reused, " from the prefix cache)");
    if (t.role == Role::kAssistant) {
      absl::StrAppend(&line, absl::StrFormat(" | logp %.2f %s", t.logprob, t.finish));
    }
    if (t.id == session.current()) line += "  <- current";
    out += line + "\n";
    const std::string child_indent = indent + (last ? "    " : "|   ");
    for (size_t i = 0; i < t.children.size(); ++i) {
      draw(t.children[i], child_indent, i + 1 == t.children.size());
    }
  };
  const std::vector<int32_t> roots = session.RootTurns();
  for (size_t i = 0; i < roots.size(); ++i) draw(roots[i], "", i + 1 == roots.size());
  // KV of the whole tree against each conversation (leaf) stored on its own.
  std::vector<std::vector<int32_t>> all;
  int64_t separate = 0, leaves = 0;
  for (const auto& [id, t] : session.turns()) {
    all.push_back(t.tokens);
    if (t.children.empty()) {
      separate += static_cast<int64_t>(t.tokens.size());
      ++leaves;
    }
  }
  const int64_t distinct = DistinctPrefixTokens(std::move(all));
  absl::StrAppend(&out, absl::StrFormat(
                            "%d turns, %d conversations (leaves): %d tokens if each had its own KV, "
                            "%d distinct tokens of KV in the tree",
                            session.turns().size(), leaves, separate, distinct));
  if (distinct > 0) absl::StrAppend(&out, absl::StrFormat(" (x%.2f sharing)", double(separate) / distinct));
  out += "\n";
  return out;
}

std::string RenderConversation(const ChatSession& session, int32_t id) {
  std::string out;
  for (int32_t t_id : session.PathTo(id)) {
    const Turn& t = *session.Find(t_id);
    absl::StrAppend(&out, "[", t.id, "] ", RoleName(t.role), ":\n");
    for (const std::string& line : Wrap(Printable(t.content), 96)) absl::StrAppend(&out, "    ", line, "\n");
  }
  if (out.empty()) out = "(empty conversation)\n";
  return out;
}

std::string WordDiff(std::string_view a, std::string_view b, size_t max_words) {
  auto words = [max_words](std::string_view s) {
    std::vector<std::string> w = absl::StrSplit(absl::string_view(s.data(), s.size()),
                                                absl::ByAnyChar(" \n\t"), absl::SkipEmpty());
    if (w.size() > max_words) {  // the rest as one chunk keeps the table small
      std::string rest;
      for (size_t i = max_words; i < w.size(); ++i) absl::StrAppend(&rest, i > max_words ? " " : "", w[i]);
      w.resize(max_words);
      w.push_back(rest);
    }
    return w;
  };
  const std::vector<std::string> x = words(a), y = words(b);
  const size_t n = x.size(), m = y.size();
  // lcs[i][j]: longest common subsequence of x[i:] and y[j:].
  std::vector<std::vector<uint16_t>> lcs(n + 1, std::vector<uint16_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = x[i] == y[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  // Walk the table; runs of removed / added words are bracketed together.
  std::string out;
  char run = ' ';  // '-', '+' or ' ' (common)
  auto emit = [&](char kind, const std::string& word) {
    if (kind != run) {
      if (run == '-') out += "-]";
      if (run == '+') out += "+}";
      if (!out.empty()) out += ' ';
      if (kind == '-') out += "[-";
      if (kind == '+') out += "{+";
      run = kind;
    } else if (!out.empty()) {
      out += ' ';
    }
    out += word;
  };
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] == y[j]) {
      emit(' ', x[i]);
      ++i;
      ++j;
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      emit('-', x[i++]);
    } else {
      emit('+', y[j++]);
    }
  }
  emit(' ', "");
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string RenderComparison(const Comparison& c, int width) {
  const int col = std::max(20, (width - 3) / 2);
  std::string out;
  const CompareSide* sides[2] = {&c.a, &c.b};
  std::vector<std::string> text[2];
  for (int k = 0; k < 2; ++k) text[k] = Wrap(Printable(sides[k]->text), col);
  absl::StrAppend(&out, Pad(absl::StrCat("[", c.a.reply, "] reply to [", c.a.context, "]"), col), " | ",
                  "[", c.b.reply, "] reply to [", c.b.context, "]\n");
  absl::StrAppend(&out, std::string(static_cast<size_t>(col), '-'), "-+-",
                  std::string(static_cast<size_t>(col), '-'), "\n");
  const size_t rows = std::max(text[0].size(), text[1].size());
  for (size_t r = 0; r < rows; ++r) {
    const std::string left = r < text[0].size() ? text[0][r] : "";
    const std::string right = r < text[1].size() ? text[1][r] : "";
    absl::StrAppend(&out, Pad(left, col), " | ", right, "\n");
  }
  absl::StrAppend(&out, std::string(static_cast<size_t>(col), '-'), "-+-",
                  std::string(static_cast<size_t>(col), '-'), "\n");
  std::string score[2];
  for (int k = 0; k < 2; ++k) {
    const CompareSide& s = *sides[k];
    score[k] = absl::StrFormat("%d tokens, logp %.3f (%.3f/token)", s.tokens, s.logprob,
                               s.logprob / std::max(1, s.tokens));
  }
  absl::StrAppend(&out, Pad(score[0], col), " | ", score[1], "\n");
  if (c.a.logprob_other.has_value() && c.b.logprob_other.has_value()) {
    absl::StrAppend(&out, Pad(absl::StrFormat("after [%d]'s prompt: logp %.3f", c.b.context, *c.a.logprob_other),
                              col),
                    " | ", absl::StrFormat("after [%d]'s prompt: logp %.3f", c.a.context, *c.b.logprob_other),
                    "\n");
  }
  absl::StrAppend(&out, "the two conversations share their first ", c.shared_prefix_tokens,
                  " tokens of KV\nword diff ([-only in ", c.a.reply, "-] {+only in ", c.b.reply, "+}):\n");
  for (const std::string& line : Wrap(Printable(WordDiff(c.a.text, c.b.text)), width)) absl::StrAppend(&out, "  ", line, "\n");
  return out;
}

std::string RenderStats(const ChatSession& session) {
  const EngineStats s = session.engine().Stats();
  std::string out;
  absl::StrAppend(&out, absl::StrFormat("model %s on %s\n", s.model, s.device));
  absl::StrAppend(&out, absl::StrFormat("turns %d, live branches %d, tree nodes %d, KV pages %d of %d\n",
                                        session.turns().size(), s.live_branches, s.tree_nodes, s.kv_pages_used,
                                        s.kv_pages_total));
  absl::StrAppend(&out, absl::StrFormat(
                            "tokens: %d generated, %d prefilled, %d reused from the prefix cache, "
                            "%d shared by forks, %d scored\n",
                            s.tokens_generated, s.tokens_prefilled, s.tokens_reused, s.tokens_forked,
                            s.tokens_scored));
  absl::StrAppend(&out, absl::StrFormat(
                            "decode: %d steps, %.1f tok/s inside forward passes; replies: %d tokens in "
                            "%.2f s (%.1f tok/s wall)\n",
                            s.decode_steps, s.decode_seconds > 0 ? s.tokens_generated / s.decode_seconds : 0.0,
                            session.reply_tokens(), session.reply_seconds(),
                            session.reply_seconds() > 0 ? session.reply_tokens() / session.reply_seconds() : 0.0));
  if (s.kv_tokens_read > 0) {
    absl::StrAppend(&out, absl::StrFormat("attention read %d KV tokens for %d attended (x%.2f sharing)\n",
                                          s.kv_tokens_read, s.kv_tokens_attended,
                                          double(s.kv_tokens_attended) / s.kv_tokens_read));
  }
  return out;
}

}  // namespace banyan::samples::chat
