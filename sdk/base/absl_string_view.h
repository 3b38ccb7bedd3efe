// Debian's Abseil (20220623) has its own absl::string_view, distinct from
// std::string_view: absl::StrCat, StrSplit and friends need the conversion.
#ifndef BANYAN_SDK_BASE_ABSL_STRING_VIEW_H_
#define BANYAN_SDK_BASE_ABSL_STRING_VIEW_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace banyan {

inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace banyan

#endif  // BANYAN_SDK_BASE_ABSL_STRING_VIEW_H_
