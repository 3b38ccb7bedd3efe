#include "model/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sdk/base/status_testing.h"

namespace banyan::model {
namespace {

using ::banyan::testing::StatusIs;
using ::testing::HasSubstr;

TEST(DefaultModelTest, HonoursModelDirOverride) {
  const auto dir = std::filesystem::temp_directory_path() / "banyan_default_model_test";
  std::filesystem::create_directories(dir);
  setenv("BANYAN_MODEL_DIR", dir.c_str(), 1);
  EXPECT_EQ(ModelCacheDir(), dir.string());
  std::filesystem::remove(dir / kDefaultModelFile);
  EXPECT_THAT(FindDefaultModel(), StatusIs(absl::StatusCode::kNotFound, HasSubstr("setup.sh")));
  std::ofstream(dir / kDefaultModelFile) << "GGUF";
  auto found = FindDefaultModel();
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, (dir / kDefaultModelFile).string());
  std::filesystem::remove_all(dir);
  unsetenv("BANYAN_MODEL_DIR");
}

TEST(DefaultModelTest, FallsBackToHomeCache) {
  unsetenv("BANYAN_MODEL_DIR");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(ModelCacheDir(), "/home/someone/.cache/banyan");
  EXPECT_THAT(DefaultModelPath(), HasSubstr(std::string(kDefaultModelFile)));
}

}  // namespace
}  // namespace banyan::model
