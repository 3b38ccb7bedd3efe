// A small logging header: Debian's Abseil (20220623) has no absl/log.
//
//   BANYAN_LOG(INFO) << "loaded " << n << " tensors";
//   BANYAN_CHECK(pages_in_use_ <= capacity_) << "page accounting broken";
//
// Messages go to stderr, one line each, prefixed with the severity, file and
// line. Messages below the minimum level (BANYAN_LOG_LEVEL environment
// variable: DEBUG, INFO, WARNING, ERROR; default WARNING) are not formatted.
// BANYAN_CHECK is only for broken internal invariants: a failed check logs and
// aborts. Anything a caller or an input can cause returns absl::Status instead.
//
// Thread-safe: each message is written with one call under a process-wide lock.
#ifndef BANYAN_SDK_BASE_LOGGING_H_
#define BANYAN_SDK_BASE_LOGGING_H_

#include <sstream>
#include <string_view>

namespace banyan::logging {

enum class Severity { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

// The minimum severity that is written; read once from BANYAN_LOG_LEVEL.
Severity MinSeverity();
// Overrides the minimum severity (tests, command-line flags).
void SetMinSeverity(Severity severity);

// One message; written (and, for kFatal, the process aborted) in the destructor.
class LogMessage {
 public:
  LogMessage(Severity severity, const char* file, int line);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  Severity severity_;
  std::ostringstream stream_;
};

// Swallows the stream expression of a disabled message.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace banyan::logging

#define BANYAN_LOG_SEVERITY_DEBUG ::banyan::logging::Severity::kDebug
#define BANYAN_LOG_SEVERITY_INFO ::banyan::logging::Severity::kInfo
#define BANYAN_LOG_SEVERITY_WARNING ::banyan::logging::Severity::kWarning
#define BANYAN_LOG_SEVERITY_ERROR ::banyan::logging::Severity::kError
#define BANYAN_LOG_SEVERITY_FATAL ::banyan::logging::Severity::kFatal

#define BANYAN_LOG(level)                                                     \
  (BANYAN_LOG_SEVERITY_##level < ::banyan::logging::MinSeverity())            \
      ? (void)0                                                               \
      : ::banyan::logging::Voidify() &                                        \
            ::banyan::logging::LogMessage(BANYAN_LOG_SEVERITY_##level, __FILE__, \
                                          __LINE__)                           \
                .stream()

#define BANYAN_CHECK(condition)                                                  \
  (condition) ? (void)0                                                          \
              : ::banyan::logging::Voidify() &                                   \
                    ::banyan::logging::LogMessage(                               \
                        ::banyan::logging::Severity::kFatal, __FILE__, __LINE__) \
                            .stream()                                            \
                        << "Check failed: " #condition " "

#endif  // BANYAN_SDK_BASE_LOGGING_H_
