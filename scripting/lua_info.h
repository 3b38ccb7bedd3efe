// Facts about the embedded Lua interpreter. Thread-safe.
#ifndef BANYAN_SCRIPTING_LUA_INFO_H_
#define BANYAN_SCRIPTING_LUA_INFO_H_

#include <string>

namespace banyan::scripting {

// The Lua release this build embeds, read from a live interpreter ("Lua 5.4.4").
std::string LuaRelease();

}  // namespace banyan::scripting

#endif  // BANYAN_SCRIPTING_LUA_INFO_H_
