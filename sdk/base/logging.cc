#include "sdk/base/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace banyan::logging {
namespace {

Severity ParseSeverity(const char* text) {
  if (text == nullptr) return Severity::kWarning;
  const std::string_view value(text);
  if (value == "DEBUG") return Severity::kDebug;
  if (value == "INFO") return Severity::kInfo;
  if (value == "ERROR") return Severity::kError;
  return Severity::kWarning;
}

std::atomic<int>& MinSeverityStorage() {
  static std::atomic<int> level{
      static_cast<int>(ParseSeverity(std::getenv("BANYAN_LOG_LEVEL")))};
  return level;
}

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kDebug: return "D";
    case Severity::kInfo: return "I";
    case Severity::kWarning: return "W";
    case Severity::kError: return "E";
    case Severity::kFatal: return "F";
  }
  return "?";
}

std::mutex& OutputMutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

Severity MinSeverity() { return static_cast<Severity>(MinSeverityStorage().load()); }

void SetMinSeverity(Severity severity) {
  MinSeverityStorage().store(static_cast<int>(severity));
}

LogMessage::LogMessage(Severity severity, const char* file, int line)
    : severity_(severity) {
  std::string_view path(file);
  const size_t slash = path.rfind('/');
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  stream_ << SeverityName(severity) << ' ' << path << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  {
    std::lock_guard<std::mutex> lock(OutputMutex());
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }
  if (severity_ == Severity::kFatal) std::abort();
}

}  // namespace banyan::logging
