#include "scripting/lua_info.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace banyan::scripting {
namespace {

TEST(LuaInfoTest, EmbedsLua54) {
  EXPECT_THAT(LuaRelease(), ::testing::StartsWith("Lua 5.4"));
}

}  // namespace
}  // namespace banyan::scripting
