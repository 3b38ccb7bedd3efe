#include "scripting/lua_safe_libs.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scripting/lua_pattern_cost.h"

namespace banyan::scripting {
namespace {

// Calls upvalue 1 (the original library function) with all arguments, then checks the deadline:
// the wrapper for C functions whose single call may run long (sort, concat, patterns).
int CallOriginalThenCheckpoint(lua_State* L) {
  const int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, LUA_MULTRET);
  LuaSandbox::Checkpoint(L);
  return lua_gettop(L);
}

// string.rep with the result size checked against the memory left before any copying.
int CheckedRep(lua_State* L) {
  size_t length = 0, sep_length = 0;
  luaL_checklstring(L, 1, &length);
  const lua_Integer count = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &sep_length);
  if (count > 0) {
    const double total = static_cast<double>(length) * static_cast<double>(count) +
                         static_cast<double>(sep_length) * static_cast<double>(count - 1);
    LuaSandbox* box = LuaSandbox::FromState(L);
    const size_t cap = box->limits().memory_bytes;
    const double room = cap > box->memory_in_use() ? static_cast<double>(cap - box->memory_in_use())
                                                   : 0.0;
    if (total > room) {
      return LuaSandbox::Abort(L, absl::ResourceExhaustedError(absl::StrCat(
          "string.rep result of ", total, " bytes exceeds the memory left (", room,
          " bytes of a ", cap, "-byte cap)")));
    }
  }
  return CallOriginalThenCheckpoint(L);
}

// find/match/gmatch/gsub: refuse when the matcher's worst-case work exceeds the limit
// (lua_pattern_cost.h), otherwise run the original and check the deadline afterwards.
int GuardedPattern(lua_State* L) {
  auto op = static_cast<PatternOp>(lua_tointeger(L, lua_upvalueindex(2)));
  size_t subject_length = 0, pattern_length = 0;
  const char* subject = luaL_checklstring(L, 1, &subject_length);
  const char* pattern = luaL_checklstring(L, 2, &pattern_length);
  if (op == PatternOp::kFind && lua_toboolean(L, 4)) op = PatternOp::kFindPlain;
  const std::string_view p(pattern, pattern_length);
  const double bound = PatternCostBound(std::string_view(subject, subject_length), p, op);
  LuaSandbox* box = LuaSandbox::FromState(L);
  if (bound > box->limits().pattern_steps) {
    const std::string shown(p.substr(0, 40));
    return LuaSandbox::Abort(L, absl::DeadlineExceededError(absl::StrCat(
        "pattern '", shown, p.size() > 40 ? "...'" : "'", " on a subject of ", subject_length,
        " bytes may need ", bound, " matcher steps, over the limit of ",
        box->limits().pattern_steps)));
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  LuaSandbox::Checkpoint(L);
  return lua_gettop(L);
}

// load(chunk [, chunkname [, mode [, env]]]) for text chunks given as strings only.
int SafeLoad(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING) {
    return luaL_error(L, "load: only string chunks are allowed in the sandbox");
  }
  size_t length = 0;
  const char* chunk = lua_tolstring(L, 1, &length);
  const char* name = luaL_optstring(L, 2, chunk);
  const char* mode = luaL_optstring(L, 3, "t");
  if (std::strchr(mode, 'b') != nullptr) {
    lua_pushnil(L);
    lua_pushliteral(L, "load: binary chunks are not allowed in the sandbox");
    return 2;
  }
  const bool has_env = !lua_isnone(L, 4);
  if (luaL_loadbufferx(L, chunk, length, name, "t") != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;  // nil, message (as the standard load)
  }
  if (has_env) {
    lua_pushvalue(L, 4);
    if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);
  }
  return 1;
}

int SafePrint(lua_State* L) {
  const int n = lua_gettop(L);
  const size_t keep = LuaSandbox::FromState(L)->limits().max_log_bytes;  // never copy more
  std::string line;
  for (int i = 1; i <= n; ++i) {
    size_t length = 0;
    const char* text = luaL_tolstring(L, i, &length);
    if (i > 1) line.push_back('\t');
    line.append(text, std::min(length, keep - std::min(keep, line.size())));
    lua_pop(L, 1);
  }
  line.push_back('\n');
  LuaSandbox::FromState(L)->AppendLog(line);
  return 0;
}

int SafeCollectGarbage(lua_State* L) {
  const std::string option = luaL_optstring(L, 1, "collect");
  if (option == "count") {
    const int kb = lua_gc(L, LUA_GCCOUNT);
    const int bytes = lua_gc(L, LUA_GCCOUNTB);
    lua_pushnumber(L, static_cast<lua_Number>(kb) + static_cast<lua_Number>(bytes) / 1024.0);
    return 1;
  }
  if (option == "collect") {
    lua_gc(L, LUA_GCCOLLECT);
    LuaSandbox::Checkpoint(L);
    lua_pushinteger(L, 0);
    return 1;
  }
  if (option == "step") {
    const int done = lua_gc(L, LUA_GCSTEP, static_cast<int>(luaL_optinteger(L, 2, 0)));
    LuaSandbox::Checkpoint(L);
    lua_pushboolean(L, done);
    return 1;
  }
  return luaL_error(L, "collectgarbage('%s') is not allowed in the sandbox", option.c_str());
}

// setmetatable refusing __gc and __close. Lua runs finalizers with hooks disabled; and a thread
// that died of an error raised by the budget hook keeps hooks disabled, so closing its
// to-be-closed variables later would run __close outside every budget.
int SafeSetMetatable(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    for (const char* field : {"__gc", "__close"}) {
      lua_pushstring(L, field);
      const bool present = lua_rawget(L, 2) != LUA_TNIL;
      lua_pop(L, 1);
      if (present) return luaL_error(L, "setmetatable: %s metamethods are not allowed", field);
    }
  }
  const int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, 1);
  return 1;
}

// The message handler given to xpcall, wrapping the script's (upvalue 1). Lua calls message
// handlers before unwinding, with hooks still disabled when the error came from the budget hook;
// once the call is failing the script's handler is therefore skipped.
int GuardedMessageHandler(lua_State* L) {
  if (LuaSandbox::FromState(L)->failing()) {
    lua_settop(L, 1);
    return 1;
  }
  const int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, 1);
  return 1;
}

int SafeXpcall(lua_State* L) {
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, &GuardedMessageHandler, 1);
  lua_replace(L, 2);
  const int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, LUA_MULTRET);
  return lua_gettop(L);
}

int SafeRawSet(lua_State* L) {
  if (LuaSandbox::IsReadOnly(L, 1)) {
    return luaL_error(L, "rawset: attempt to modify a read-only table");
  }
  const int nargs = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, nargs, 1);
  return 1;
}

// coroutine.create, with the budget hook installed on the new thread explicitly (Lua 5.4 also
// copies the creator's hook, but the budget must not depend on that).
int SafeCreate(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  LuaSandbox::InstallHook(lua_tothread(L, -1));
  return 1;
}

// The function coroutine.wrap returns: resume the thread in upvalue 1, propagate its errors
// (with the coroutine's own traceback when the error is text).
int WrapResume(lua_State* L) {
  lua_State* co = lua_tothread(L, lua_upvalueindex(1));
  const int nargs = lua_gettop(L);
  if (!lua_checkstack(co, nargs + 1)) return luaL_error(L, "too many arguments to resume");
  lua_xmove(L, co, nargs);
  int nresults = 0;
  const int status = lua_resume(co, L, nargs, &nresults);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nresults + 1)) {
      lua_pop(co, nresults);
      return luaL_error(L, "too many results to resume");
    }
    lua_xmove(co, L, nresults);
    return nresults;
  }
  const int co_status = lua_status(co);
  if (co_status != LUA_OK && co_status != LUA_YIELD) {  // the coroutine died of this error
    const bool text = lua_type(co, -1) == LUA_TSTRING;
    if (text) luaL_traceback(L, co, lua_tostring(co, -1), 0);
    lua_resetthread(co);  // closes its pending to-be-closed variables
    if (text) {
      lua_settop(co, 0);
    } else {
      lua_xmove(co, L, 1);
    }
  } else {
    lua_xmove(co, L, 1);  // "cannot resume dead/non-suspended coroutine"
  }
  if (lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

int SafeWrap(lua_State* L) {
  SafeCreate(L);  // upvalue 1 of SafeWrap is the original coroutine.create as well
  lua_pushcclosure(L, &WrapResume, 1);
  return 1;
}

int OsClock(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(std::clock()) / CLOCKS_PER_SEC);
  return 1;
}

int OsTime(lua_State* L) {
  if (!lua_isnone(L, 1)) return luaL_error(L, "os.time: only os.time() is available");
  lua_pushinteger(L, static_cast<lua_Integer>(std::time(nullptr)));
  return 1;
}

// Replaces table[name] (table at `index`) with `fn` closed over the old value and `extra`
// upvalues already pushed on the stack.
void WrapField(lua_State* L, int index, const char* name, lua_CFunction fn, int extra = 0) {
  index = lua_absindex(L, index);
  lua_getfield(L, index, name);
  if (extra > 0) lua_insert(L, -1 - extra);
  lua_pushcclosure(L, fn, 1 + extra);
  lua_setfield(L, index, name);
}

void RemoveFields(lua_State* L, int index, std::initializer_list<const char*> names) {
  index = lua_absindex(L, index);
  for (const char* name : names) {
    lua_pushnil(L);
    lua_setfield(L, index, name);
  }
}

}  // namespace

void OpenSafeLibraries(lua_State* L, const SandboxLimits& limits) {
  luaL_checkstack(L, 8, "sandbox setup");
  const std::pair<const char*, lua_CFunction> libraries[] = {
      {LUA_GNAME, luaopen_base},          {LUA_TABLIBNAME, luaopen_table},
      {LUA_STRLIBNAME, luaopen_string},   {LUA_MATHLIBNAME, luaopen_math},
      {LUA_UTF8LIBNAME, luaopen_utf8},    {LUA_COLIBNAME, luaopen_coroutine}};
  for (const auto& [name, open] : libraries) {
    luaL_requiref(L, name, open, 1);
    lua_pop(L, 1);
  }
  lua_pushglobaltable(L);
  const int g = lua_gettop(L);

  // base
  RemoveFields(L, g, {"dofile", "loadfile", "require", "warn"});
  lua_pushcfunction(L, &SafeLoad);
  lua_setfield(L, g, "load");
  lua_pushcfunction(L, &SafePrint);
  lua_setfield(L, g, "print");
  lua_pushcfunction(L, &SafeCollectGarbage);
  lua_setfield(L, g, "collectgarbage");
  WrapField(L, g, "setmetatable", &SafeSetMetatable);
  WrapField(L, g, "rawset", &SafeRawSet);
  WrapField(L, g, "xpcall", &SafeXpcall);

  // string: the real table, which the string metatable's __index also points at.
  lua_getfield(L, g, LUA_STRLIBNAME);
  const int str = lua_gettop(L);
  RemoveFields(L, str, {"dump", "pack", "packsize", "unpack"});
  WrapField(L, str, "rep", &CheckedRep);
  const std::pair<const char*, PatternOp> patterns[] = {{"find", PatternOp::kFind},
                                                        {"match", PatternOp::kMatch},
                                                        {"gmatch", PatternOp::kGmatch},
                                                        {"gsub", PatternOp::kMatch}};
  for (const auto& [name, op] : patterns) {
    lua_pushinteger(L, static_cast<lua_Integer>(op));
    WrapField(L, str, name, &GuardedPattern, 1);
  }
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_pushliteral(L, "protected");
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 3);

  // table
  lua_getfield(L, g, LUA_TABLIBNAME);
  WrapField(L, -1, "sort", &CallOriginalThenCheckpoint);
  WrapField(L, -1, "concat", &CallOriginalThenCheckpoint);
  lua_pop(L, 1);

  // math: deterministic random numbers
  lua_getfield(L, g, LUA_MATHLIBNAME);
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, static_cast<lua_Integer>(limits.random_seed));
  lua_call(L, 1, 0);
  lua_pop(L, 1);

  // coroutine
  lua_getfield(L, g, LUA_COLIBNAME);
  const int co = lua_gettop(L);
  lua_getfield(L, co, "create");
  lua_pushcclosure(L, &SafeWrap, 1);
  lua_setfield(L, co, "wrap");
  WrapField(L, co, "create", &SafeCreate);
  lua_pop(L, 1);

  // os: clock and time only
  lua_createtable(L, 0, 2);
  lua_pushcfunction(L, &OsClock);
  lua_setfield(L, -2, "clock");
  lua_pushcfunction(L, &OsTime);
  lua_setfield(L, -2, "time");
  lua_setfield(L, g, "os");

  // Library tables become read-only proxies in the environment.
  for (const char* name : {LUA_STRLIBNAME, LUA_TABLIBNAME, LUA_MATHLIBNAME, LUA_UTF8LIBNAME,
                           LUA_COLIBNAME, "os"}) {
    lua_getfield(L, g, name);
    LuaSandbox::PushReadOnly(L, -1);
    lua_setfield(L, g, name);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

}  // namespace banyan::scripting
