// The `banyan` tool's subcommands. Each subcommand lives in its own file and
// is listed in Commands() (command.cc); main.cc only dispatches.
#ifndef BANYAN_SDK_CLI_COMMAND_H_
#define BANYAN_SDK_CLI_COMMAND_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace banyan::cli {

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `banyan help`
  // Runs with the arguments after the subcommand name; writes to stdout.
  absl::Status (*run)(const std::vector<std::string>& args);
};

// Every subcommand, in the order `banyan help` lists them.
const std::vector<Command>& Commands();

absl::Status RunInfo(const std::vector<std::string>& args);
absl::Status RunDemoCommand(const std::vector<std::string>& args);  // demo_command.cc
absl::Status RunTokenize(const std::vector<std::string>& args);
absl::Status RunGenerate(const std::vector<std::string>& args);
absl::Status RunSearch(const std::vector<std::string>& args);
absl::Status RunChat(const std::vector<std::string>& args);  // chat_command.cc (samples/branching_chat)

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_COMMAND_H_
