// code_eval: the code evaluation sample as its own program; the same as
// `banyan eval` (sdk/cli/eval_command.cc has the flags, samples/code_eval/README.md the story).
#include "sdk/cli/command.h"

int main(int argc, char** argv) { return banyan::cli::RunAsProgram("code_eval", banyan::cli::RunEval, argc, argv); }
