// The pieces of `banyan tokenize` that tests call directly.
#ifndef BANYAN_SDK_CLI_TOKENIZE_COMMAND_H_
#define BANYAN_SDK_CLI_TOKENIZE_COMMAND_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::cli {

// Ids as a JSON array: "[1, 2, 3]".
std::string IdsToJson(const std::vector<int32_t>& ids);

// Parses a JSON array of integers (whitespace allowed anywhere between
// tokens). kInvalidArgument for anything else or a value outside int32.
absl::StatusOr<std::vector<int32_t>> ParseIdArray(std::string_view json);

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_TOKENIZE_COMMAND_H_
