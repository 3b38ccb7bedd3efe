#include "sdk/cli/command.h"

namespace banyan::cli {

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"info", "version, backends, GPUs, library versions and the default model", RunInfo},
  };
  return *commands;
}

}  // namespace banyan::cli
