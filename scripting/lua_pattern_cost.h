// A worst-case bound on the work of Lua 5.4's pattern matcher (lstrlib.c), computed before a
// pattern function runs, so that a sandbox can refuse a catastrophic pattern up front.
//
//   double steps = PatternCostBound("aaaa...a", ".-.-.-b", PatternOp::kFind);
//   if (steps > limit) refuse();
//
// Why a bound and not a check from inside: the matcher is one long C call; a count hook never
// fires inside it, so nothing can interrupt string.find(string.rep("a", 1e5), ".-.-.-.-b") once
// it starts. The matcher is a backtracking recursion over the pattern's items in order (there is
// no alternation and no loop in a Lua pattern), so its call tree is bounded exactly:
//   - every start position is tried once: n + 1 starts (one with a '^' anchor, or for find's
//     plain search one memchr/memcmp pass per start);
//   - a single-character item with '*', '+' or '-' tries at most r + 1 continuations, where r is
//     the longest run of subject characters that the item's class matches (max_expand and
//     min_expand only ever advance over matching characters); '?' tries at most 2;
//   - one visit of a quantified item scans at most r characters, %b at most n, a back-reference
//     compares at most n bytes (memcmp), anything else O(1).
// So the work below item k is W(k) = local(k) + branches(k) * W(k+1), folded from the pattern's
// end, and the bound is starts x W(first item). It is tight for '.'-heavy patterns (the classic
// bombs: ".-.-.-b" is n^3 per start) and small for ordinary ones ("%d+" on prose is cheap
// because digit runs are short; a trim "^%s*(.-)%s*$" is linear). Malformed patterns get a
// finite bound and then fail inside Lua with Lua's own message.
//
// Thread-safe (pure functions).
#ifndef BANYAN_SCRIPTING_LUA_PATTERN_COST_H_
#define BANYAN_SCRIPTING_LUA_PATTERN_COST_H_

#include <string_view>

namespace banyan::scripting {

enum class PatternOp {
  kFind,        // string.find (a pattern without specials, or plain=true, is a substring search)
  kFindPlain,   // string.find(s, p, init, true)
  kMatch,       // string.match, string.gsub: '^' anchors
  kGmatch,      // string.gmatch: '^' is an ordinary character; the whole iteration is bounded
};

// An upper bound on the matcher's elementary steps (call-tree nodes times per-path scan work,
// with substring comparison weighted at 1/64 step per byte). Never negative; may be +inf-like
// (a huge double) for hopeless patterns.
double PatternCostBound(std::string_view subject, std::string_view pattern, PatternOp op);

// True when `pattern` has none of Lua's magic characters ^$*+?.([%- (lstrlib's nospecials).
bool PatternHasNoSpecials(std::string_view pattern);

}  // namespace banyan::scripting

#endif  // BANYAN_SCRIPTING_LUA_PATTERN_COST_H_
