// Snapshot files (internal): a framed payload written atomically.
//
//   [8 bytes "BANYANES"][u64 payload size, LE][u32 CRC-32 of payload, LE][payload]
//
// WriteFileAtomically writes `path` + a unique temporary suffix in the same
// folder, fsyncs it, renames it over `path` and fsyncs the folder, so a crash
// or a failure leaves either the old file or the new one, never a mix; a
// failed write removes the temporary file. Thread-safe (no shared state).
#ifndef BANYAN_SDK_ENGINE_SNAPSHOT_FILE_H_
#define BANYAN_SDK_ENGINE_SNAPSHOT_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace banyan::engine {

// The framed bytes of `payload`.
std::string FrameSnapshot(std::string_view payload);
// The payload of framed bytes. kDataLoss for a wrong magic, a size that does
// not match the file or a CRC mismatch.
absl::StatusOr<std::string> UnframeSnapshot(std::string_view framed);

// Errors carry errno's code (kNotFound for a missing folder, kPermissionDenied,
// kResourceExhausted for a full disk, ...).
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);
// kNotFound when the file does not exist; other errno codes otherwise.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

}  // namespace banyan::engine

#endif  // BANYAN_SDK_ENGINE_SNAPSHOT_FILE_H_
