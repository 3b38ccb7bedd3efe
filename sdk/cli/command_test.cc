#include "sdk/cli/command.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::cli {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

TEST(CommandTest, EveryFlagParsesAndIsInItsCommandsHelp) {
  ASSERT_FALSE(Commands().empty());
  for (const Command& c : Commands()) {
    EXPECT_EQ(FindCommand(c.name), &c);
    const std::string help = CommandHelp(c);
    EXPECT_THAT(help, HasSubstr(std::string(c.summary)));
    std::set<std::string_view> names;
    for (const Flag& f : c.flags) {
      EXPECT_TRUE(names.insert(f.name).second) << c.name << " lists --" << f.name << " twice";
      EXPECT_FALSE(f.help.empty()) << c.name << " --" << f.name;
      EXPECT_THAT(help, HasSubstr("--" + std::string(f.name))) << c.name;
      // A value flag takes its value; a boolean flag takes none.
      const std::string flag = "--" + std::string(f.name);
      if (f.value.empty()) {
        BANYAN_ASSERT_OK_AND_ASSIGN(Args args, ParseFlags(c.name, {flag}));
        EXPECT_TRUE(args.GetBool(f.name)) << c.name << " " << flag;
        EXPECT_THAT(ParseFlags(c.name, {flag + "=1"}).status(), StatusIs(absl::StatusCode::kInvalidArgument));
      } else {
        BANYAN_ASSERT_OK_AND_ASSIGN(Args args, ParseFlags(c.name, {flag, "x"}));
        EXPECT_EQ(args.GetString(f.name), "x") << c.name << " " << flag;
        EXPECT_THAT(ParseFlags(c.name, {flag}).status(), StatusIs(absl::StatusCode::kInvalidArgument));
      }
    }
    EXPECT_THAT(ParseFlags(c.name, {"--no-such-flag"}).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown flag --no-such-flag")));
  }
  EXPECT_EQ(FindCommand("no-such-command"), nullptr);
}

}  // namespace
}  // namespace banyan::cli
