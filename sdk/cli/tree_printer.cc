#include "sdk/cli/tree_printer.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace banyan::cli {
namespace {

struct Node {
  std::vector<int32_t> tokens;  // the edge from the parent
  std::map<int32_t, std::unique_ptr<Node>> children;  // by first token
  int32_t passing = 0;  // sequences through this node
  std::vector<std::string> labels;  // sequences ending here
};

void Insert(Node* root, const LabeledSequence& seq) {
  Node* node = root;
  ++node->passing;
  size_t at = 0;
  const std::vector<int32_t>& t = seq.tokens;
  while (at < t.size()) {
    auto it = node->children.find(t[at]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->tokens.assign(t.begin() + static_cast<std::ptrdiff_t>(at), t.end());
      leaf->passing = 1;
      leaf->labels.push_back(seq.label);
      node->children[t[at]] = std::move(leaf);
      return;
    }
    Node* child = it->second.get();
    size_t k = 0;
    while (k < child->tokens.size() && at + k < t.size() && child->tokens[k] == t[at + k]) ++k;
    if (k < child->tokens.size()) {
      // Split the child after k tokens.
      auto upper = std::make_unique<Node>();
      upper->tokens.assign(child->tokens.begin(), child->tokens.begin() + static_cast<std::ptrdiff_t>(k));
      upper->passing = child->passing;
      std::unique_ptr<Node> lower = std::move(it->second);
      lower->tokens.erase(lower->tokens.begin(), lower->tokens.begin() + static_cast<std::ptrdiff_t>(k));
      upper->children[lower->tokens.front()] = std::move(lower);
      it->second = std::move(upper);
      child = it->second.get();
    }
    ++child->passing;
    node = child;
    at += k;
  }
  node->labels.push_back(seq.label);
}

void Print(const Node& node, const std::string& prefix, bool last, bool is_root,
           const std::function<std::string(absl::Span<const int32_t>)>& decode, int snippet,
           std::string* out) {
  std::string line = prefix;
  std::string child_prefix = prefix;
  if (!is_root) {
    line += last ? "`-- " : "|-- ";
    child_prefix += last ? "    " : "|   ";
    line += absl::StrFormat("[%d tok", node.tokens.size());
    if (node.passing > 1) line += absl::StrFormat(", shared by %d", node.passing);
    line += "] \"" + Snippet(decode(node.tokens), snippet) + "\"";
  } else {
    line += absl::StrFormat("(root: %d sequences)", node.passing);
  }
  for (const std::string& label : node.labels) {
    if (!label.empty()) line += "  <- " + label;
  }
  *out += line + "\n";
  size_t i = 0;
  for (const auto& [first, child] : node.children) {
    Print(*child, child_prefix, ++i == node.children.size(), false, decode, snippet, out);
  }
}

}  // namespace

std::string Snippet(std::string_view text, int max_chars) {
  std::string escaped;
  for (unsigned char c : text) {
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\t') {
      escaped += "\\t";
    } else if (c == '"') {
      escaped += "\\\"";
    } else if (c < 0x20 || c == 0x7f) {
      escaped += absl::StrFormat("\\x%02x", c);
    } else {
      escaped += static_cast<char>(c);
    }
  }
  if (max_chars < 8 || static_cast<int>(escaped.size()) <= max_chars) return escaped;
  auto char_start = [&](size_t i) {  // back up to the start of a UTF-8 character
    while (i > 0 && i < escaped.size() && (static_cast<unsigned char>(escaped[i]) & 0xc0) == 0x80) --i;
    return i;
  };
  const size_t head = char_start(static_cast<size_t>(max_chars) * 2 / 3);
  const size_t tail = char_start(escaped.size() - static_cast<size_t>(max_chars - 3) / 3);
  return escaped.substr(0, head) + "..." + escaped.substr(tail);
}

std::string PrintTokenTree(const std::vector<LabeledSequence>& sequences,
                           const std::function<std::string(absl::Span<const int32_t>)>& decode,
                           int snippet_chars) {
  Node root;
  for (const LabeledSequence& s : sequences) Insert(&root, s);
  std::string out;
  Print(root, "", true, true, decode, snippet_chars, &out);
  return out;
}

}  // namespace banyan::cli
