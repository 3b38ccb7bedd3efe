// The `banyan` tool's subcommands. Each subcommand lives in its own file and
// is listed in Commands() (command.cc) with the flags it takes, which are the
// one list both its parser (ParseFlags) and `banyan <command> --help` read;
// main.cc only dispatches.
#ifndef BANYAN_SDK_CLI_COMMAND_H_
#define BANYAN_SDK_CLI_COMMAND_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sdk/cli/args.h"

namespace banyan::cli {

struct Flag {
  std::string_view name;   // without the leading "--"
  std::string_view value;  // what the value is ("N", "PATH", ...); empty for a boolean flag
  std::string_view help;   // one line
};

struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `banyan help`
  // Runs with the arguments after the subcommand name; writes to stdout.
  absl::Status (*run)(const std::vector<std::string>& args);
  std::vector<Flag> flags;
};

// Every subcommand, in the order `banyan help` lists them.
const std::vector<Command>& Commands();

// The command called `name`, or nullptr.
const Command* FindCommand(std::string_view name);

// `argv` parsed with the flags Commands() lists for `command` (Args::Parse's
// errors). REQUIRES: FindCommand(command) != nullptr.
absl::StatusOr<Args> ParseFlags(std::string_view command, const std::vector<std::string>& argv);

// `banyan <command> --help`: the summary and one line per flag.
std::string CommandHelp(const Command& command);

// main() of a sample that is also a subcommand (branching_chat, code_eval):
// runs `run` on argv[1..], prints a failure as "<program>: <status>" on
// stderr; the exit status is 0 or 1.
int RunAsProgram(std::string_view program, absl::Status (*run)(const std::vector<std::string>&), int argc,
                 char** argv);

absl::Status RunInfo(const std::vector<std::string>& args);
absl::Status RunDemoCommand(const std::vector<std::string>& args);  // demo_command.cc
absl::Status RunTokenize(const std::vector<std::string>& args);
absl::Status RunGenerate(const std::vector<std::string>& args);
absl::Status RunSearch(const std::vector<std::string>& args);
absl::Status RunChat(const std::vector<std::string>& args);  // chat_command.cc (samples/branching_chat)
absl::Status RunEval(const std::vector<std::string>& args);  // eval_command.cc (samples/code_eval)

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_COMMAND_H_
