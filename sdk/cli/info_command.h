// `banyan info`: what this build is, what it can see (GPUs, libraries, the
// default model) and what an engine over the model sees (device, model shape,
// KV pool, scheduler settings).
//
//   banyan info [--json] [--no-engine] [--model PATH] [--device auto|cpu|cuda|cuda:N]
//               [--kv-budget-mb N] [--threads T]
//
// Without --model the engine part uses the default model when it is present
// (and says so when it is not). CollectInfo() is the library form the command
// and its test use. Thread-safe (no shared state).
#ifndef BANYAN_SDK_CLI_INFO_COMMAND_H_
#define BANYAN_SDK_CLI_INFO_COMMAND_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "sdk/proto/system_info.pb.h"

namespace banyan::cli {

struct InfoRequest {
  bool engine = true;        // create an engine and report what it sees
  std::string model_path;    // empty: the default model, when present
  std::string device = "auto";
  uint64_t kv_budget_bytes = 0;  // 0: the engine's default
  int threads = 0;               // 0: all cores
};

// CollectSystemInfo() plus, with request.engine, SystemInfo::engine. Never
// fails: an engine that cannot be created is described by engine.status, and
// its error goes to *engine_status (when not null; OK otherwise, also when no
// engine was asked for or no model is present).
proto::SystemInfo CollectInfo(const InfoRequest& request, absl::Status* engine_status = nullptr);

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_INFO_COMMAND_H_
