// branching_chat: the branching chat explorer as its own program; the same as
// `banyan chat` (sdk/cli/chat_command.cc has the flags).
#include <iostream>
#include <string>
#include <vector>

#include "sdk/cli/command.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const absl::Status status = banyan::cli::RunChat(args);
  if (!status.ok()) {
    std::cerr << "branching_chat: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
