#include "sdk/cli/args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace banyan::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::set<std::string>& value_flags,
                                 const std::set<std::string>& bool_flags) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      args.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_inline_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_inline_value) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
      args.values_[name] = "true";
    } else if (value_flags.count(name)) {
      if (!has_inline_value) {
        if (i + 1 >= argv.size()) {
          return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        }
        value = argv[++i];
      }
      args.values_[name] = value;
      args.all_values_[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return args;
}

std::string Args::GetString(std::string_view name, std::string_view fallback) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? std::string(fallback) : it->second;
}

std::vector<std::string> Args::GetAll(std::string_view name) const {
  auto it = all_values_.find(std::string(name));
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> Args::GetInt(std::string_view name, int64_t fallback) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return fallback;
  int64_t value = 0;
  if (!absl::SimpleAtoi(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("--", std::string(name), " wants an integer, got '", it->second, "'"));
  }
  return value;
}

absl::StatusOr<double> Args::GetDouble(std::string_view name, double fallback) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) return fallback;
  double value = 0;
  if (!absl::SimpleAtod(it->second, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("--", std::string(name), " wants a number, got '", it->second, "'"));
  }
  return value;
}

}  // namespace banyan::cli
