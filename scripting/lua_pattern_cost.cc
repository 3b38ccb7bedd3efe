#include "scripting/lua_pattern_cost.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <vector>

namespace banyan::scripting {
namespace {

constexpr char kEsc = '%';
// Substring comparison (memchr/memcmp) is charged at 1/64 step per byte.
constexpr double kBytesPerStep = 64.0;
// Total subject bytes scanned to measure class runs; past it a run is taken as the whole subject
// (still an upper bound, only looser).
constexpr double kScanBudget = static_cast<double>(1u << 27);

using CharSet = std::array<bool, 256>;

// lstrlib's match_class: one %x class letter against one character ("C" locale ctype).
bool MatchClass(int c, int cl) {
  bool res;
  switch (std::tolower(cl)) {
    case 'a': res = std::isalpha(c); break;
    case 'c': res = std::iscntrl(c); break;
    case 'd': res = std::isdigit(c); break;
    case 'g': res = std::isgraph(c); break;
    case 'l': res = std::islower(c); break;
    case 'p': res = std::ispunct(c); break;
    case 's': res = std::isspace(c); break;
    case 'u': res = std::isupper(c); break;
    case 'w': res = std::isalnum(c); break;
    case 'x': res = std::isxdigit(c); break;
    default: return cl == c;
  }
  if (std::isupper(cl)) res = !res;
  return res;
}

// lstrlib's matchbracketclass for the set pattern[begin, close] (pattern[close] == ']').
bool MatchBracket(int c, std::string_view p, size_t begin, size_t close) {
  bool sig = true;
  size_t i = begin;
  if (i + 1 < p.size() && p[i + 1] == '^') {
    sig = false;
    ++i;
  }
  while (++i < close) {
    const auto u = [&](size_t k) { return static_cast<unsigned char>(p[k]); };
    if (p[i] == kEsc) {
      ++i;
      if (i < p.size() && MatchClass(c, u(i))) return sig;
    } else if (i + 2 < close && p[i + 1] == '-') {
      i += 2;
      if (u(i - 2) <= c && c <= u(i)) return sig;
    } else if (u(i) == c) {
      return sig;
    }
  }
  return !sig;
}

// lstrlib's classEnd: the index just past the single-character class starting at `i`, or
// npos when the pattern is malformed (Lua will raise its own error for it).
size_t ClassEnd(std::string_view p, size_t i) {
  const char c = p[i++];
  if (c == kEsc) return i < p.size() ? i + 1 : std::string_view::npos;
  if (c == '[') {
    if (i < p.size() && p[i] == '^') ++i;
    do {
      if (i >= p.size()) return std::string_view::npos;
      if (p[i++] == kEsc && i < p.size()) ++i;
    } while (i < p.size() && p[i] != ']');
    return i < p.size() ? i + 1 : std::string_view::npos;
  }
  return i;
}

// The characters the single-character class p[begin, end) matches.
CharSet ClassSet(std::string_view p, size_t begin, size_t end) {
  CharSet set{};
  for (int c = 0; c < 256; ++c) {
    switch (p[begin]) {
      case '.': set[c] = true; break;
      case kEsc: set[c] = MatchClass(c, static_cast<unsigned char>(p[begin + 1])); break;
      case '[': set[c] = MatchBracket(c, p, begin, end - 1); break;
      default: set[c] = static_cast<unsigned char>(p[begin]) == c;
    }
  }
  return set;
}

// Longest run of subject characters inside `set`.
size_t LongestRun(std::string_view s, const CharSet& set) {
  size_t best = 0, run = 0;
  for (char ch : s) {
    run = set[static_cast<unsigned char>(ch)] ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

}  // namespace

bool PatternHasNoSpecials(std::string_view pattern) {
  for (char c : pattern) {
    if (std::strchr("^$*+?.([%-", c) != nullptr && c != '\0') return false;
  }
  return true;
}

double PatternCostBound(std::string_view s, std::string_view p, PatternOp op) {
  const double n = static_cast<double>(s.size());
  if (op == PatternOp::kFindPlain || (op == PatternOp::kFind && PatternHasNoSpecials(p))) {
    const double m = static_cast<double>(p.size());
    const double starts = m > n ? 0.0 : n - m + 1.0;
    return 1.0 + (n + starts * m) / kBytesPerStep;
  }
  size_t i = 0;
  double starts = n + 1.0;
  if (op != PatternOp::kGmatch && !p.empty() && p[0] == '^') {
    starts = 1.0;
    i = 1;
  }
  // Each item: the work done at one visit (`local`) and how many continuations it tries.
  struct Item {
    double local, branches;
  };
  std::vector<Item> items;
  double scan_left = kScanBudget;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '(' || c == ')') {
      i += (c == '(' && i + 1 < p.size() && p[i + 1] == ')') ? 2 : 1;
      items.push_back({1.0, 1.0});
      continue;
    }
    if (c == '$' && i + 1 == p.size()) break;
    if (c == kEsc && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 'b') {  // %bxy: one linear scan, no branching
        items.push_back({n + 1.0, 1.0});
        i += 4;
        continue;
      }
      if (e == 'f') {  // %f[set]: a frontier test, no branching
        if (i + 2 >= p.size()) break;
        const size_t end = ClassEnd(p, i + 2);
        if (end == std::string_view::npos) break;
        items.push_back({1.0, 1.0});
        i = end;
        continue;
      }
      if (e >= '0' && e <= '9') {  // back-reference: one comparison of up to n bytes
        items.push_back({n / kBytesPerStep + 1.0, 1.0});
        i += 2;
        continue;
      }
    }
    const size_t end = ClassEnd(p, i);
    if (end == std::string_view::npos) break;  // malformed: Lua raises before any real work
    const char q = end < p.size() ? p[end] : '\0';
    if (q == '*' || q == '+' || q == '-') {
      double run = n;
      if (scan_left >= n && p[i] != '.') {
        scan_left -= n;
        run = static_cast<double>(LongestRun(s, ClassSet(p, i, end)));
      }
      items.push_back({run + 1.0, run + 1.0});  // scan the run, then try each length
      i = end + 1;
    } else if (q == '?') {
      items.push_back({1.0, 2.0});
      i = end + 1;
    } else {
      items.push_back({1.0, 1.0});
      i = end;
    }
  }
  // Work of the call tree below item k: W(k) = local(k) + branches(k) * W(k + 1), W(end) = 1.
  double work = 1.0;
  for (auto it = items.rbegin(); it != items.rend(); ++it) work = it->local + it->branches * work;
  return starts * work;
}

}  // namespace banyan::scripting
