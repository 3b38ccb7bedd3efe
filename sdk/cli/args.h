// A small command-line parser for `banyan` subcommands: "--name value",
// "--name=value" and boolean "--flag". Each subcommand declares the flags it
// knows; anything else is an error (kInvalidArgument naming the flag).
// Thread-compatible value type.
#ifndef BANYAN_SDK_CLI_ARGS_H_
#define BANYAN_SDK_CLI_ARGS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace banyan::cli {

class Args {
 public:
  // Parses `argv` (the subcommand's own arguments, without the subcommand
  // name). `value_flags` take a value, `bool_flags` do not. Positional
  // arguments are kept in order.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::set<std::string>& value_flags,
                                    const std::set<std::string>& bool_flags);

  bool Has(std::string_view name) const { return values_.count(std::string(name)) > 0; }
  // The last value given for `name` (a flag given twice keeps its last value).
  std::string GetString(std::string_view name, std::string_view fallback = "") const;
  // Every value given for `name`, in order (for flags that may repeat).
  std::vector<std::string> GetAll(std::string_view name) const;
  // kInvalidArgument when present but not a number.
  absl::StatusOr<int64_t> GetInt(std::string_view name, int64_t fallback) const;
  absl::StatusOr<double> GetDouble(std::string_view name, double fallback) const;
  bool GetBool(std::string_view name) const { return Has(name); }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::vector<std::string> positional_;
};

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_ARGS_H_
