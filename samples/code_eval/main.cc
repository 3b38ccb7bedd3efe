// code_eval: the code evaluation sample as its own program; the same as
// `banyan eval` (sdk/cli/eval_command.cc has the flags, samples/code_eval/README.md the story).
#include <iostream>
#include <string>
#include <vector>

#include "sdk/cli/command.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const absl::Status status = banyan::cli::RunEval(args);
  if (!status.ok()) {
    std::cerr << "code_eval: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
