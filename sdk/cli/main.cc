// `banyan`: the command-line tool. `banyan --version`, `banyan help`, and one
// subcommand per file under sdk/cli/ (see command.cc).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "banyan/version.h"
#include "sdk/cli/command.h"

namespace {

void PrintUsage() {
  std::cout << "usage: banyan <command> [flags]\n       banyan --version\n\ncommands:\n";
  for (const auto& command : banyan::cli::Commands()) {
    std::cout << "  " << command.name << std::string(12 - command.name.size(), ' ')
              << command.summary << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage();
    return 2;
  }
  const std::string first = argv[1];
  if (first == "--version" || first == "version") {
    std::cout << "banyan " << banyan::Version() << "\n";
    return 0;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  if (first == "help" || first == "--help" || first == "-h") {
    // `banyan help COMMAND`: that command's flags.
    if (!rest.empty()) {
      if (const banyan::cli::Command* command = banyan::cli::FindCommand(rest[0])) {
        std::cout << banyan::cli::CommandHelp(*command);
        return 0;
      }
    }
    PrintUsage();
    return 0;
  }
  const banyan::cli::Command* command = banyan::cli::FindCommand(first);
  if (command == nullptr) {
    std::cerr << "banyan: unknown command '" << first << "'\n";
    PrintUsage();
    return 2;
  }
  for (const std::string& arg : rest) {
    if (arg == "--help" || arg == "-h") {
      std::cout << banyan::cli::CommandHelp(*command);
      return 0;
    }
  }
  const absl::Status status = command->run(rest);
  if (!status.ok()) {
    std::cerr << "banyan " << first << ": " << status << "\n";
    if (absl::IsInvalidArgument(status)) std::cerr << "(banyan " << first << " --help lists its flags)\n";
    return 1;
  }
  return 0;
}
