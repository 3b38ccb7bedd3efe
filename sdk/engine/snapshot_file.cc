#include "sdk/engine/snapshot_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace banyan::engine {
namespace {

constexpr char kMagic[8] = {'B', 'A', 'N', 'Y', 'A', 'N', 'E', 'S'};
constexpr size_t kHeader = 8 + 8 + 4;

uint32_t Crc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), n);
    done += n;
  }
  return static_cast<uint32_t>(crc);
}

void PutLe(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t GetLe(std::string_view in, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
  return v;
}

// absl::ErrnoToStatus appends strerror(error) itself.
absl::Status ErrnoStatus(int error, const std::string& what) { return absl::ErrnoToStatus(error, what); }

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string FrameSnapshot(std::string_view payload) {
  std::string out(kMagic, sizeof(kMagic));
  PutLe(&out, payload.size(), 8);
  PutLe(&out, Crc32(payload), 4);
  out.append(payload.data(), payload.size());
  return out;
}

absl::StatusOr<std::string> UnframeSnapshot(std::string_view framed) {
  if (framed.size() < kHeader || std::memcmp(framed.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a Banyan engine snapshot (bad magic or too short)");
  }
  const uint64_t size = GetLe(framed.substr(8), 8);
  const uint32_t crc = static_cast<uint32_t>(GetLe(framed.substr(16), 4));
  if (size != framed.size() - kHeader) {
    return absl::DataLossError(absl::StrCat("snapshot truncated or padded: header says ", size,
                                            " payload bytes, file has ", framed.size() - kHeader));
  }
  const std::string_view payload = framed.substr(kHeader);
  if (Crc32(payload) != crc) return absl::DataLossError("snapshot checksum mismatch (corrupt file)");
  return std::string(payload);
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp = absl::StrCat(path, ".tmp-", getpid(), "-", counter.fetch_add(1));
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create " + temp);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      close(fd);
      unlink(temp.c_str());
      return ErrnoStatus(error, "cannot write " + temp);
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    const int error = errno;
    close(fd);
    unlink(temp.c_str());
    return ErrnoStatus(error, "cannot fsync " + temp);
  }
  if (close(fd) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return ErrnoStatus(error, "cannot close " + temp);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    unlink(temp.c_str());
    return ErrnoStatus(error, "cannot rename " + temp + " to " + path);
  }
  // Make the rename itself durable.
  const int dir = open(Folder(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    (void)fsync(dir);
    close(dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open " + path);
  std::string out;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      close(fd);
      return ErrnoStatus(error, "cannot read " + path);
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

}  // namespace banyan::engine
