#include "sdk/cli/command.h"

namespace banyan::cli {

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"info", "version, backends, GPUs, libraries, the default model and what an engine over it sees",
       RunInfo},
      {"demo", "the main job: forked sampling + self-consistency vote + forked chat on the default model",
       RunDemoCommand},
      {"tokenize", "text on stdin -> token ids as a JSON array (--decode: ids -> text)", RunTokenize},
      {"generate", "sample N completions of a prompt that share its KV (prefill once, fork)", RunGenerate},
      {"search", "run a search strategy (self-consistency, tree of thought, MCTS, best-of-N)", RunSearch},
      {"chat", "explore a conversation as a tree: fork, regenerate, edit, compare, save/load", RunChat},
  };
  return *commands;
}

}  // namespace banyan::cli
