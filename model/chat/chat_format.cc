#include "model/chat/chat_format.h"

#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/tokenizer/unicode.h"
#include "sdk/base/absl_string_view.h"

namespace banyan::model {
namespace {

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Python's str.isspace() for one code point.
bool PySpace(const CodePoint& cp) {
  if (!cp.valid) return false;
  const char32_t c = cp.value;
  if ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85) return true;
  return ClassOf(cp) == CharClass::kSpace;
}

// Undoes the escapes a Jinja string literal may hold (\n, \", \', \\).
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      out.push_back(n == 'n' ? '\n' : n == 't' ? '\t' : n);
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The contents of the string literal (quoted with ' or ") that contains
// `marker`, searching from `from`; empty when there is none.
std::string LiteralContaining(std::string_view t, std::string_view marker, size_t from = 0) {
  const size_t at = t.find(marker, from);
  if (at == std::string_view::npos) return "";
  size_t open = at;
  while (open > 0 && t[open - 1] != '"' && t[open - 1] != '\'') --open;
  if (open == 0) return "";
  const char quote = t[open - 1];
  size_t close = at;
  while (close < t.size() && !(t[close] == quote && t[close - 1] != '\\')) ++close;
  if (close >= t.size()) return "";
  return Unescape(t.substr(open, close - open));
}

std::string LStripNewlines(const std::string& s) {
  const size_t k = s.find_first_not_of('\n');
  return k == std::string::npos ? "" : s.substr(k);
}

std::string RStrip(const std::string& s) {
  const std::vector<CodePoint> cps = SplitUtf8(s);
  size_t end = cps.size();
  while (end > 0 && PySpace(cps[end - 1])) --end;
  return end == 0 ? "" : s.substr(0, cps[end - 1].end);
}

}  // namespace

std::string PyStrip(std::string_view s) {
  const std::vector<CodePoint> cps = SplitUtf8(s);
  size_t begin = 0, end = cps.size();
  while (begin < end && PySpace(cps[begin])) ++begin;
  while (end > begin && PySpace(cps[end - 1])) --end;
  if (begin == end) return "";
  return std::string(s.substr(cps[begin].begin, cps[end - 1].end - cps[begin].begin));
}

absl::StatusOr<ChatFormat> ChatFormat::FromTemplate(std::string_view t, std::string bos_token,
                                                    std::string eos_token) {
  ChatFormat f;
  f.bos_ = std::move(bos_token);
  f.eos_ = std::move(eos_token);
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|eot_id|>")) {
    f.kind_ = Kind::kLlama3;
    if (Contains(t, "Cutting Knowledge Date:")) {
      f.knowledge_line_ = LiteralContaining(t, "Cutting Knowledge Date:");
      // Llama 3.2 asks for today's date (transformers' strftime_now); 3.1 has a fixed default.
      f.date_today_ = Contains(t, "strftime_now(\"%d %b %Y\")");
      constexpr std::string_view kSet = "set date_string = \"";
      for (size_t at = t.find(kSet); at != std::string_view::npos && f.date_.empty();
           at = t.find(kSet, at + 1)) {
        const size_t begin = at + kSet.size();
        const size_t end = t.find('"', begin);
        if (end != std::string_view::npos) f.date_ = std::string(t.substr(begin, end - begin));
      }
      if (f.knowledge_line_.empty() || (f.date_.empty() && !f.date_today_)) {
        return absl::UnimplementedError("unrecognised Llama 3.1 chat template");
      }
    }
    return f;
  }
  if (Contains(t, "<|im_start|>") && Contains(t, "Knowledge Cutoff Date") &&
      Contains(t, "reasoning_mode")) {
    f.kind_ = Kind::kSmolLm3;
    f.cutoff_line_ = LiteralContaining(t, "Knowledge Cutoff Date");
    const size_t think = t.find("elif reasoning_mode == \"/think\"");
    if (think == std::string_view::npos) return absl::UnimplementedError("unrecognised SmolLM3 template");
    f.think_default_ = LiteralContaining(t, "You are", think);
    const size_t after = t.find("else", think + 10);
    f.no_think_default_ = LiteralContaining(t, "You are", after);
    if (f.cutoff_line_.empty() || f.think_default_.empty() || f.no_think_default_.empty()) {
      return absl::UnimplementedError("unrecognised SmolLM3 chat template");
    }
    return f;
  }
  if (Contains(t, "<|im_start|>")) {
    f.kind_ = Kind::kChatMl;
    // A default system message: a literal "<|im_start|>system\n...<|im_end|>".
    for (std::string_view nl : {std::string_view("\\n"), std::string_view("\n")}) {
      const std::string head = absl::StrCat("<|im_start|>system", std::string(nl));
      for (size_t at = t.find(head); at != std::string_view::npos && f.default_system_.empty();
           at = t.find(head, at + 1)) {
        const size_t begin = at + head.size();
        const size_t end = t.find("<|im_end|>", begin);
        if (end == std::string_view::npos) break;
        const std::string_view body = t.substr(begin, end - begin);
        if (body.find_first_of("'\"{}") == std::string_view::npos) f.default_system_ = Unescape(body);
      }
    }
    return f;
  }
  if (Contains(t, "'[INST] ' + message['content'] + ' [/INST]'") ||
      Contains(t, "\"[INST] \" + message[\"content\"] + \" [/INST]\"")) {
    f.kind_ = Kind::kMistral;
    // v0.1 writes a space after each assistant turn's eos.
    f.mistral_space_after_eos_ = Contains(t, "eos_token + ' '") || Contains(t, "eos_token + \" \"");
    return f;
  }
  if (Contains(t, "[INST]")) {
    return absl::UnimplementedError(
        "this [INST] chat template is not supported (Mistral v0.1/v0.2 style is)");
  }
  return absl::UnimplementedError("chat template is not one of Llama 3, ChatML, SmolLM3, Mistral");
}

std::string ChatFormat::end_of_turn() const {
  switch (kind_) {
    case Kind::kLlama3: return "<|eot_id|>";
    case Kind::kChatMl: case Kind::kSmolLm3: return "<|im_end|>";
    case Kind::kMistral: return eos_;
  }
  return eos_;
}

absl::StatusOr<std::string> ChatFormat::Apply(absl::Span<const ChatMessage> messages,
                                              bool add_generation_prompt) const {
  if (messages.empty()) return absl::InvalidArgumentError("chat: no messages");
  for (const ChatMessage& m : messages) {
    if (m.role == "tool" || m.role == "ipython") {
      return absl::UnimplementedError(absl::StrCat("chat: role '", m.role, "' is not supported"));
    }
    if (m.role != "system" && m.role != "user" && m.role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("chat: unknown role '", m.role, "'"));
    }
  }
  switch (kind_) {
    case Kind::kLlama3: return ApplyLlama3(messages, add_generation_prompt);
    case Kind::kChatMl: return ApplyChatMl(messages, add_generation_prompt);
    case Kind::kSmolLm3: return ApplySmolLm3(messages, add_generation_prompt);
    case Kind::kMistral: return ApplyMistral(messages, add_generation_prompt);
  }
  return absl::InternalError("chat: bad kind");
}

absl::StatusOr<std::string> ChatFormat::ApplyLlama3(absl::Span<const ChatMessage> m,
                                                    bool gen) const {
  std::string out = bos_;
  size_t first = 0;
  if (!knowledge_line_.empty()) {  // Llama 3.1: the system block is always there
    std::string system;
    if (m[0].role == "system") {
      system = PyStrip(m[0].content);
      first = 1;
    }
    std::string date = date_;
    if (date_today_) {
      const std::time_t now = std::time(nullptr);
      std::tm local;
      char buf[32];
      if (localtime_r(&now, &local) != nullptr && std::strftime(buf, sizeof(buf), "%d %b %Y", &local) > 0) {
        date = buf;
      }
    }
    absl::StrAppend(&out, "<|start_header_id|>system<|end_header_id|>\n\n", knowledge_line_,
                    "Today Date: ", date, "\n\n", system, "<|eot_id|>");
  }
  for (size_t i = first; i < m.size(); ++i) {
    absl::StrAppend(&out, "<|start_header_id|>", m[i].role, "<|end_header_id|>\n\n",
                    PyStrip(m[i].content), "<|eot_id|>");
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

absl::StatusOr<std::string> ChatFormat::ApplyChatMl(absl::Span<const ChatMessage> m,
                                                    bool gen) const {
  std::string out;
  if (m[0].role != "system" && !default_system_.empty()) {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system_, "<|im_end|>\n");
  }
  for (const ChatMessage& msg : m) {
    absl::StrAppend(&out, "<|im_start|>", msg.role, "\n", msg.content, "<|im_end|>\n");
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

absl::StatusOr<std::string> ChatFormat::ApplySmolLm3(absl::Span<const ChatMessage> m,
                                                     bool gen) const {
  bool think = true;
  std::string custom;
  if (m[0].role == "system") {
    const std::string& s = m[0].content;
    if (Contains(s, "/no_think")) {
      think = false;
    } else if (Contains(s, "/think")) {
      think = true;
    }
    custom = RStrip(absl::StrReplaceAll(absl::StrReplaceAll(AsAbsl(s), {{"/no_think", ""}}),
                                        {{"/think", ""}}));
  }
  std::string out = absl::StrCat("<|im_start|>system\n## Metadata\n\n", cutoff_line_,
                                 "Reasoning Mode: ", think ? "/think" : "/no_think",
                                 "\n\n## Custom Instructions\n\n");
  if (!custom.empty()) {
    absl::StrAppend(&out, custom, "\n\n");
  } else {
    out += think ? think_default_ : no_think_default_;
  }
  out += "<|im_end|>\n";
  for (const ChatMessage& msg : m) {
    if (msg.role == "user") {
      absl::StrAppend(&out, "<|im_start|>user\n", msg.content, "<|im_end|>\n");
    } else if (msg.role == "assistant") {
      absl::StrAppend(&out, "<|im_start|>assistant\n", think ? "" : "<think>\n\n</think>\n",
                      LStripNewlines(msg.content), "<|im_end|>\n");
    }
  }
  if (gen) absl::StrAppend(&out, "<|im_start|>assistant\n", think ? "" : "<think>\n\n</think>\n");
  return out;
}

absl::StatusOr<std::string> ChatFormat::ApplyMistral(absl::Span<const ChatMessage> m,
                                                     bool gen) const {
  std::string out = bos_;
  for (size_t i = 0; i < m.size(); ++i) {
    if ((m[i].role == "user") != (i % 2 == 0)) {
      return absl::InvalidArgumentError(
          "chat: Mistral conversations must alternate user/assistant/user/...");
    }
    if (m[i].role == "user") {
      absl::StrAppend(&out, "[INST] ", m[i].content, " [/INST]");
    } else if (m[i].role == "assistant") {
      absl::StrAppend(&out, m[i].content, eos_, mistral_space_after_eos_ ? " " : "");
    } else {
      return absl::InvalidArgumentError("chat: the Mistral format has no system role");
    }
  }
  (void)gen;  // the template has no generation prompt: [/INST] already asks for it
  return out;
}

}  // namespace banyan::model
