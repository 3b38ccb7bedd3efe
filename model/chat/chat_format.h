// ChatFormat: renders a conversation into the prompt text a chat model was
// trained on, chosen from (and parameterised by) the model's own Jinja chat
// template, reproducing transformers' apply_chat_template for:
//   kLlama3   Llama 3 / 3.1 / 3.2 (headers, <|eot_id|>; the "Cutting
//             Knowledge Date" system block with 3.1's default date, or
//             today's date where the template calls strftime_now)
//   kChatMl   <|im_start|>role\n...<|im_end|>\n (Qwen2/2.5, SmolLM2), with
//             the template's default system message when it has one
//   kSmolLm3  SmolLM3's ChatML with a metadata system block and /think modes
//   kMistral  [INST] ... [/INST] (Mistral v0.1/v0.2 templates, user/assistant
//             alternating, no system role; later [INST] variants that place
//             a system prompt are kUnimplemented)
// Tools and tool calls are not rendered (kUnimplemented for a "tool" role).
//
//   BANYAN_ASSIGN_OR_RETURN(ChatFormat chat, LoadChatFormat(path));  // model/loader.h
//   BANYAN_ASSIGN_OR_RETURN(std::string prompt, chat.Apply(messages, true));
//
// Thread-compatible value type (const methods are safe concurrently).
#ifndef BANYAN_MODEL_CHAT_CHAT_FORMAT_H_
#define BANYAN_MODEL_CHAT_CHAT_FORMAT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace banyan::model {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatFormat {
 public:
  enum class Kind { kLlama3, kChatMl, kSmolLm3, kMistral };

  // Recognises `jinja` (the template text) and reads its parameters; bos/eos
  // are the model's token texts (the template's bos_token/eos_token).
  // kUnimplemented when the template is none of the kinds above.
  static absl::StatusOr<ChatFormat> FromTemplate(std::string_view jinja, std::string bos_token,
                                                 std::string eos_token);

  // The prompt text. With add_generation_prompt, ends with the assistant
  // header so the model writes the reply. kInvalidArgument for an empty
  // conversation or a role the format cannot place (e.g. Mistral "system"),
  // kUnimplemented for tool roles.
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;

  Kind kind() const { return kind_; }
  // Text that ends an assistant turn ("<|eot_id|>", "<|im_end|>", eos).
  std::string end_of_turn() const;

 private:
  absl::StatusOr<std::string> ApplyLlama3(absl::Span<const ChatMessage> m, bool gen) const;
  absl::StatusOr<std::string> ApplyChatMl(absl::Span<const ChatMessage> m, bool gen) const;
  absl::StatusOr<std::string> ApplySmolLm3(absl::Span<const ChatMessage> m, bool gen) const;
  absl::StatusOr<std::string> ApplyMistral(absl::Span<const ChatMessage> m, bool gen) const;

  Kind kind_ = Kind::kChatMl;
  std::string bos_;
  std::string eos_;
  // kLlama3: the 3.1 system block ("Cutting Knowledge Date: ...\nToday Date: ")
  // and default date; empty for plain Llama 3.
  std::string knowledge_line_;
  std::string date_;
  bool date_today_ = false;  // Llama 3.2: today's date, as strftime_now("%d %b %Y")
  // kChatMl: default system message (may be empty: none).
  std::string default_system_;
  // kSmolLm3: metadata line and the two default instructions.
  std::string cutoff_line_;
  std::string think_default_;
  std::string no_think_default_;
  // kMistral: a space follows each assistant eos (v0.1).
  bool mistral_space_after_eos_ = false;
};

// Python's str.strip() / lstrip(chars) / rstrip() as Jinja's trim uses them.
std::string PyStrip(std::string_view s);

}  // namespace banyan::model

#endif  // BANYAN_MODEL_CHAT_CHAT_FORMAT_H_
