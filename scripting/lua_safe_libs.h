// Internal to banyan_scripting: the allow-listed standard library of a LuaSandbox (the list of
// what scripts can reach is in lua_sandbox.h). Not API.
#ifndef BANYAN_SCRIPTING_LUA_SAFE_LIBS_H_
#define BANYAN_SCRIPTING_LUA_SAFE_LIBS_H_

#include <lua.hpp>

#include "scripting/lua_sandbox.h"

namespace banyan::scripting {

// Opens base, string, table, math, utf8 and coroutine into the state's global table, removes or
// replaces every unsafe entry, adds a minimal os (clock, time) and turns the library tables into
// read-only proxies. Raises Lua errors (memory); REQUIRES: running inside LuaSandbox's protected
// setup call, with the read-only set already in the registry.
void OpenSafeLibraries(lua_State* L, const SandboxLimits& limits);

}  // namespace banyan::scripting

#endif  // BANYAN_SCRIPTING_LUA_SAFE_LIBS_H_
