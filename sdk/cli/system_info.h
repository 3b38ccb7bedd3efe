// Collects what `banyan info` reports into a proto::SystemInfo. Never fails:
// what cannot be read (no GPU, no driver, no model) is recorded as such.
#ifndef BANYAN_SDK_CLI_SYSTEM_INFO_H_
#define BANYAN_SDK_CLI_SYSTEM_INFO_H_

#include "sdk/proto/system_info.pb.h"

namespace banyan::cli {

proto::SystemInfo CollectSystemInfo();

}  // namespace banyan::cli

#endif  // BANYAN_SDK_CLI_SYSTEM_INFO_H_
