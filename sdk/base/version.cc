#include "banyan/version.h"

#include "sdk/base/build_config.h"

namespace banyan {

std::string_view Version() { return BANYAN_VERSION_STRING; }

bool BuiltWithCuda() { return BANYAN_BUILT_WITH_CUDA != 0; }

}  // namespace banyan
