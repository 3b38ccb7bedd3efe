#include "scripting/lua_policy.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "banyan/status_macros.h"

namespace banyan::scripting {
namespace {

constexpr const char* kHookNames[] = {"expand", "score", "select", "should_stop", "answer"};
// A hook's call as errors name it (kHookNames[h] + "()").
constexpr const char* kHookCalls[] = {"expand()", "score()", "select()", "should_stop()", "answer()"};
static_assert(std::size(kHookNames) == std::size(kHookCalls));

enum ApiFunction { kText, kTokenCount, kModelScore, kFork };
constexpr const char* kApiNames[] = {"text", "token_count", "model_score", "fork"};

// banyan.param(name, default): upvalue 1 is the params table.
int ParamLookup(lua_State* L) {
  luaL_checkstring(L, 1);
  lua_pushvalue(L, 1);
  if (lua_rawget(L, lua_upvalueindex(1)) == LUA_TNIL) {
    lua_settop(L, 2);
  }
  return 1;
}

// Whether the value at the top is a number with an integer value; stores it in *out.
bool TopInteger(lua_State* L, int index, lua_Integer* out) {
  if (lua_type(L, index) != LUA_TNUMBER) return false;
  int is_integer = 0;
  *out = lua_tointegerx(L, index, &is_integer);
  return is_integer != 0;
}

}  // namespace

LuaPolicy::LuaPolicy(std::unique_ptr<LuaSandbox> sandbox, const LuaPolicyOptions& options,
                     PolicyCallbacks callbacks)
    : sandbox_(std::move(sandbox)), options_(options), callbacks_(std::move(callbacks)) {}

LuaPolicy::~LuaPolicy() = default;

absl::StatusOr<std::unique_ptr<LuaPolicy>> LuaPolicy::Load(std::string_view chunk_name,
                                                           std::string_view script,
                                                           const LuaPolicyOptions& options,
                                                           PolicyCallbacks callbacks) {
  if (options.max_children < 0) {
    return absl::InvalidArgumentError("LuaPolicy: max_children must be non-negative");
  }
  BANYAN_ASSIGN_OR_RETURN(std::unique_ptr<LuaSandbox> sandbox, LuaSandbox::Create(options.limits));
  std::unique_ptr<LuaPolicy> policy(
      new LuaPolicy(std::move(sandbox), options, std::move(callbacks)));
  BANYAN_RETURN_IF_ERROR(policy->InstallApi());
  BANYAN_RETURN_IF_ERROR(policy->sandbox_->Run(chunk_name, script));
  BANYAN_RETURN_IF_ERROR(policy->BindHooks());
  return policy;
}

absl::StatusOr<std::unique_ptr<LuaPolicy>> LuaPolicy::LoadFile(const std::string& path,
                                                               const LuaPolicyOptions& options,
                                                               PolicyCallbacks callbacks) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("LuaPolicy: cannot open ", path));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return absl::InvalidArgumentError(absl::StrCat("LuaPolicy: cannot read ", path));
  const size_t slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return Load(name, text.str(), options, std::move(callbacks));
}

absl::Status LuaPolicy::InstallApi() {
  return sandbox_->Protected("banyan api", [&](lua_State* L) {
    lua_createtable(L, 0, 8);
    const int api = lua_gettop(L);
    for (int f = kText; f <= kFork; ++f) {
      lua_pushlightuserdata(L, this);
      lua_pushinteger(L, f);
      lua_pushcclosure(L, &LuaPolicy::ApiCall, 2);
      lua_setfield(L, api, kApiNames[f]);
    }
    lua_createtable(L, 0, static_cast<int>(options_.params.size()));
    const int params = lua_gettop(L);
    for (const auto& [name, value] : options_.params) {
      lua_pushnumber(L, value);
      lua_setfield(L, params, name.c_str());
    }
    lua_pushvalue(L, params);
    lua_pushcclosure(L, &ParamLookup, 1);
    lua_setfield(L, api, "param");
    LuaSandbox::PushReadOnly(L, params);
    lua_setfield(L, api, "params");
    LuaSandbox::PushReadOnly(L, api);
    lua_setglobal(L, "banyan");
    lua_getglobal(L, "select");  // Lua's builtin select, which a script's select() replaces
    builtin_select_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  });
}

absl::Status LuaPolicy::BindHooks() {
  absl::Status bad_hook = absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(sandbox_->Protected("bind hooks", [&](lua_State* L) {
    for (int h = 0; h < kNumHooks; ++h) {
      const int type = lua_getglobal(L, kHookNames[h]);
      if (h == kSelect) {  // the builtin select(n, ...) is not a policy hook
        lua_rawgeti(L, LUA_REGISTRYINDEX, builtin_select_ref_);
        const bool builtin = lua_rawequal(L, -1, -2);
        lua_pop(L, 1);
        if (builtin) {
          lua_pop(L, 1);
          continue;
        }
      }
      if (type == LUA_TFUNCTION) {
        refs_[h] = luaL_ref(L, LUA_REGISTRYINDEX);
        continue;
      }
      if (type != LUA_TNIL && bad_hook.ok()) {
        bad_hook = absl::InvalidArgumentError(absl::StrCat(
            "global '", kHookNames[h], "' must be a function, got ", luaL_typename(L, -1)));
      }
      lua_pop(L, 1);
    }
  }));
  return bad_hook;
}

absl::Status LuaPolicy::RequireHook(Hook hook) const {
  if (refs_[hook] >= 0) return absl::OkStatus();
  return absl::UnimplementedError(
      absl::StrCat("the policy script does not define ", kHookNames[hook], "()"));
}

void LuaPolicy::PushNode(lua_State* L, const NodeView& node) const {
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, node.id);
  lua_setfield(L, -2, "id");
  lua_pushinteger(L, node.parent);
  lua_setfield(L, -2, "parent");
  if (options_.pass_text) {
    lua_pushlstring(L, node.text.data(), node.text.size());
    lua_setfield(L, -2, "text");
  }
  lua_pushinteger(L, node.token_count);
  lua_setfield(L, -2, "token_count");
  lua_pushinteger(L, node.depth);
  lua_setfield(L, -2, "depth");
  lua_pushnumber(L, node.score);
  lua_setfield(L, -2, "score");
  lua_pushinteger(L, node.visits);
  lua_setfield(L, -2, "visits");
}

void LuaPolicy::PushStats(lua_State* L, const SearchStats& stats) {
  lua_createtable(L, 0, 7);
  lua_pushinteger(L, stats.tokens_used);
  lua_setfield(L, -2, "tokens_used");
  lua_pushinteger(L, stats.branches);
  lua_setfield(L, -2, "branches");
  lua_pushnumber(L, stats.elapsed_seconds);
  lua_setfield(L, -2, "elapsed_seconds");
  lua_pushinteger(L, stats.iterations);
  lua_setfield(L, -2, "iterations");
  lua_pushinteger(L, stats.depth);
  lua_setfield(L, -2, "depth");
  lua_pushinteger(L, stats.max_tokens);
  lua_setfield(L, -2, "max_tokens");
  lua_pushinteger(L, stats.max_branches);
  lua_setfield(L, -2, "max_branches");
}

int LuaPolicy::ApiCall(lua_State* L) {
  auto* self = static_cast<LuaPolicy*>(lua_touserdata(L, lua_upvalueindex(1)));
  const auto function = static_cast<ApiFunction>(lua_tointeger(L, lua_upvalueindex(2)));
  const lua_Integer id = luaL_checkinteger(L, 1);
  const char* name = kApiNames[function];
  const PolicyCallbacks& cb = self->callbacks_;
  const bool bound = (function == kText && cb.branch_text) ||
                     (function == kTokenCount && cb.token_count) ||
                     (function == kModelScore && cb.model_score) || (function == kFork && cb.fork);
  if (!bound) {
    return LuaSandbox::Abort(L, absl::FailedPreconditionError(absl::StrCat(
                                    "banyan.", name, ": the host bound no callback for it")));
  }
  size_t length = 0;
  const char* continuation = function == kFork ? luaL_checklstring(L, 2, &length) : nullptr;
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = absl::OkStatus();
  try {
    switch (function) {
      case kText: {
        absl::StatusOr<std::string> text = cb.branch_text(id);
        status = text.status();
        if (text.ok()) lua_pushlstring(L, text->data(), text->size());
        break;
      }
      case kTokenCount: {
        absl::StatusOr<int64_t> count = cb.token_count(id);
        status = count.status();
        if (count.ok()) lua_pushinteger(L, *count);
        break;
      }
      case kModelScore: {
        absl::StatusOr<double> value = cb.model_score(id);
        status = value.status();
        if (value.ok()) lua_pushnumber(L, *value);
        break;
      }
      case kFork: {
        absl::StatusOr<int64_t> child = cb.fork(id, std::string_view(continuation, length));
        status = child.status();
        if (child.ok()) lua_pushinteger(L, *child);
        break;
      }
    }
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("C++ exception: ", e.what()));
  }
  self->sandbox_->ExcludeFromDeadline(std::chrono::steady_clock::now() - start);
  if (!status.ok()) {
    return LuaSandbox::Abort(L, absl::Status(status.code(), absl::StrCat("banyan.", name, "(", id,
                                                                         "): ", status.message())));
  }
  return 1;
}

template <typename Push, typename Read>
absl::Status LuaPolicy::CallHook(Hook hook, int nargs, const Push& push, const Read& read) {
  absl::Status check = absl::OkStatus();
  BANYAN_RETURN_IF_ERROR(sandbox_->Protected(kHookCalls[hook], [&](lua_State* L) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, refs_[hook]);
    push(L);
    lua_call(L, nargs, 1);
    check = read(L);
  }));
  return check;
}

absl::StatusOr<ExpandResult> LuaPolicy::Expand(const NodeView& node, const SearchStats& stats) {
  BANYAN_RETURN_IF_ERROR(RequireHook(kExpand));
  ExpandResult result;
  const auto push = [&](lua_State* L) {
    PushNode(L, node);
    PushStats(L, stats);
  };
  BANYAN_RETURN_IF_ERROR(CallHook(kExpand, 2, push, [&](lua_State* L) -> absl::Status {
    lua_Integer count = 0;
    if (lua_isnil(L, -1)) return absl::OkStatus();
    if (TopInteger(L, -1, &count)) {
      result.sample_count = count;
      if (count < 0 || count > options_.max_children) {
        return absl::InvalidArgumentError(
            absl::StrCat("expand() returned ", count, " children; expected 0..", options_.max_children));
      }
      return absl::OkStatus();
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
      return absl::InvalidArgumentError(
          absl::StrCat("expand() must return an integer, a list of strings or nil, got ", luaL_typename(L, -1)));
    }
    const lua_Unsigned n = lua_rawlen(L, -1);
    if (n > static_cast<lua_Unsigned>(options_.max_children)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expand() returned ", n, " continuations; at most ", options_.max_children));
    }
    for (lua_Unsigned i = 1; i <= n; ++i) {
      if (lua_rawgeti(L, -1, static_cast<lua_Integer>(i)) != LUA_TSTRING) {
        return absl::InvalidArgumentError(
            absl::StrCat("expand() continuation ", i, " must be a string, got ", luaL_typename(L, -1)));
      }
      size_t length = 0;
      const char* text = lua_tolstring(L, -1, &length);
      result.continuations.emplace_back(text, length);
      lua_pop(L, 1);
    }
    return absl::OkStatus();
  }));
  return result;
}

absl::StatusOr<double> LuaPolicy::Score(const NodeView& node) {
  BANYAN_RETURN_IF_ERROR(RequireHook(kScore));
  double value = 0.0;
  const auto push = [&](lua_State* L) { PushNode(L, node); };
  BANYAN_RETURN_IF_ERROR(CallHook(kScore, 1, push, [&](lua_State* L) -> absl::Status {
    if (lua_type(L, -1) != LUA_TNUMBER) {
      return absl::InvalidArgumentError(absl::StrCat("score() must return a number, got ", luaL_typename(L, -1)));
    }
    value = lua_tonumber(L, -1);
    if (!std::isfinite(value)) return absl::InvalidArgumentError(absl::StrCat("score() returned ", value));
    return absl::OkStatus();
  }));
  return value;
}

absl::StatusOr<std::vector<size_t>> LuaPolicy::Select(absl::Span<const NodeView> frontier) {
  BANYAN_RETURN_IF_ERROR(RequireHook(kSelect));
  if (frontier.empty()) return absl::InvalidArgumentError("select(): the frontier is empty");
  std::vector<size_t> chosen;
  const auto size = static_cast<lua_Integer>(frontier.size());
  const auto push = [&](lua_State* L) {
    lua_createtable(L, static_cast<int>(frontier.size()), 0);
    for (size_t i = 0; i < frontier.size(); ++i) {
      PushNode(L, frontier[i]);
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
  };
  BANYAN_RETURN_IF_ERROR(CallHook(kSelect, 1, push, [&](lua_State* L) -> absl::Status {
    lua_Integer index = 0;
    if (TopInteger(L, -1, &index)) {
      if (index < 1 || index > size) {
        return absl::InvalidArgumentError(absl::StrCat("select() returned index ", index, "; expected 1..", size));
      }
      chosen.push_back(static_cast<size_t>(index - 1));
      return absl::OkStatus();
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
      return absl::InvalidArgumentError(
          absl::StrCat("select() must return an index or a list of indices, got ", luaL_typename(L, -1)));
    }
    const lua_Unsigned n = lua_rawlen(L, -1);
    if (n == 0 || n > frontier.size()) {
      return absl::InvalidArgumentError(absl::StrCat("select() returned ", n, " indices; expected 1..", size));
    }
    std::set<lua_Integer> seen;
    for (lua_Unsigned i = 1; i <= n; ++i) {
      lua_rawgeti(L, -1, static_cast<lua_Integer>(i));
      if (!TopInteger(L, -1, &index) || index < 1 || index > size || !seen.insert(index).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("select() list entry ", i, " must be a distinct integer in 1..", size));
      }
      chosen.push_back(static_cast<size_t>(index - 1));
      lua_pop(L, 1);
    }
    return absl::OkStatus();
  }));
  return chosen;
}

absl::StatusOr<bool> LuaPolicy::ShouldStop(const SearchStats& stats) {
  BANYAN_RETURN_IF_ERROR(RequireHook(kShouldStop));
  bool stop = false;
  const auto push = [&](lua_State* L) { PushStats(L, stats); };
  BANYAN_RETURN_IF_ERROR(CallHook(kShouldStop, 1, push, [&](lua_State* L) -> absl::Status {
    if (lua_type(L, -1) != LUA_TBOOLEAN) {
      return absl::InvalidArgumentError(
          absl::StrCat("should_stop() must return a boolean, got ", luaL_typename(L, -1)));
    }
    stop = lua_toboolean(L, -1) != 0;
    return absl::OkStatus();
  }));
  return stop;
}

absl::StatusOr<std::optional<std::string>> LuaPolicy::Answer(const NodeView& node) {
  BANYAN_RETURN_IF_ERROR(RequireHook(kAnswer));
  std::optional<std::string> answer;
  const auto push = [&](lua_State* L) { PushNode(L, node); };
  BANYAN_RETURN_IF_ERROR(CallHook(kAnswer, 1, push, [&](lua_State* L) -> absl::Status {
    if (lua_isnil(L, -1)) return absl::OkStatus();
    if (lua_type(L, -1) != LUA_TSTRING) {
      return absl::InvalidArgumentError(
          absl::StrCat("answer() must return a string or nil, got ", luaL_typename(L, -1)));
    }
    size_t length = 0;
    const char* text = lua_tolstring(L, -1, &length);
    answer.emplace(text, length);
    return absl::OkStatus();
  }));
  return answer;
}

}  // namespace banyan::scripting
