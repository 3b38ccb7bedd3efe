#include "scripting/lua_info.h"

#include <lua.hpp>

namespace banyan::scripting {

std::string LuaRelease() {
  // Ask a real interpreter, so the answer is the linked library's, not the header's.
  lua_State* state = luaL_newstate();
  if (state == nullptr) return LUA_RELEASE;
  luaL_requiref(state, "_G", luaopen_base, 1);
  lua_getglobal(state, "_VERSION");
  std::string version = lua_tostring(state, -1) ? lua_tostring(state, -1) : LUA_VERSION;
  lua_close(state);
  const std::string release = LUA_RELEASE;  // "Lua 5.4.4": the patch level from the header
  return release.rfind(version, 0) == 0 ? release : version;
}

}  // namespace banyan::scripting
