#include "base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tent {
namespace {

std::string_view fileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string named(std::string_view what, const std::string& path) {
  return std::string(what) + " '" + path + "'";
}

// Reads to the end, but never more than max_bytes + 1: st_size is not trusted (a
// file may grow while it is read, and /proc files report 0).
Status readAll(int fd, uint64_t max_bytes, std::string* out, bool* too_big) {
  constexpr size_t kChunk = 64 << 10;
  for (;;) {
    const size_t room =
        static_cast<size_t>(std::min<uint64_t>(kChunk, max_bytes + 1 - out->size()));
    const size_t have = out->size();
    out->resize(have + room);
    const ssize_t n = ::read(fd, out->data() + have, room);
    if (n < 0) {
      out->resize(have);
      if (errno == EINTR) continue;
      return Status::IoError(std::strerror(errno));
    }
    out->resize(have + static_cast<size_t>(n));
    if (n == 0) return Status::OK();
    if (out->size() > max_bytes) {
      *too_big = true;
      return Status::OK();
    }
  }
}

}  // namespace

std::string byteSizeText(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

Result<BoundedFile> readBoundedFile(const std::string& path, std::string_view what,
                                    BoundedFileOptions options) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer (and a device's open
  // may wait too) before fstat() could refuse it. Reads of a regular file ignore it.
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (options.no_follow) flags |= O_NOFOLLOW;
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int err = errno;
    std::string msg = named(what, path) + ": cannot open: " + std::strerror(err);
    if (err == ELOOP && options.no_follow) msg += " (a symbolic link is not accepted here)";
    return err == ENOENT ? Status::NotFound(std::move(msg)) : Status::IoError(std::move(msg));
  }
  struct stat st {};
  BoundedFile file;
  Status status;
  bool too_big = false;
  if (::fstat(fd, &st) != 0) {
    status = Status::IoError(named(what, path) + ": cannot stat: " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = Status::IoError(named(what, path) + " is " + std::string(fileKind(st.st_mode)) +
                             "; it must be a regular file");
  } else if (static_cast<uint64_t>(st.st_size) > options.max_bytes) {
    too_big = true;
  } else {
    file.mode = st.st_mode;
    Status read = readAll(fd, options.max_bytes, &file.bytes, &too_big);
    if (!read.ok())
      status = Status::IoError(named(what, path) + ": cannot read: " + read.message());
  }
  ::close(fd);
  if (status.ok() && too_big)
    status = Status::IoError(named(what, path) + " is larger than " +
                             byteSizeText(options.max_bytes) + ", the most it may hold");
  if (!status.ok()) return status;
  return file;
}

}  // namespace tent
