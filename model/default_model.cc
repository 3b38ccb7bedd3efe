#include "model/default_model.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace banyan::model {

std::string ModelCacheDir() {
  if (const char* dir = std::getenv("BANYAN_MODEL_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/banyan");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/banyan");
  }
  return "/tmp/banyan-cache";
}

std::string DefaultModelPath() { return absl::StrCat(ModelCacheDir(), "/", std::string(kDefaultModelFile)); }

absl::StatusOr<std::string> FindDefaultModel() {
  std::string path = DefaultModelPath();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::NotFoundError(absl::StrCat("default model not found at ", path,
                                            "; run scripts/setup.sh to fetch it (or set "
                                            "BANYAN_MODEL_DIR to the folder that holds it)"));
  }
  return path;
}

}  // namespace banyan::model
