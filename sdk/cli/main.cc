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
  if (first == "help" || first == "--help" || first == "-h") {
    PrintUsage();
    return 0;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const auto& command : banyan::cli::Commands()) {
    if (command.name == first) {
      const absl::Status status = command.run(rest);
      if (!status.ok()) {
        std::cerr << "banyan " << first << ": " << status << "\n";
        return 1;
      }
      return 0;
    }
  }
  std::cerr << "banyan: unknown command '" << first << "'\n";
  PrintUsage();
  return 2;
}
