// branching_chat: the branching chat explorer as its own program; the same as
// `banyan chat` (sdk/cli/chat_command.cc has the flags).
#include "sdk/cli/command.h"

int main(int argc, char** argv) {
  return banyan::cli::RunAsProgram("branching_chat", banyan::cli::RunChat, argc, argv);
}
