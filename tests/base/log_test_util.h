// Helpers for the log tests: stderr captured into a file, and the documented line
// format as a regex (tent/log.h, docs/config.md "Log lines").
#pragma once

#include <unistd.h>

#include <cstdio>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace tent::log::testing {

// While alive, file descriptor 2 writes into a temporary file; lines() restores it.
class CaptureStderr {
 public:
  CaptureStderr() : file_(std::tmpfile()), saved_(::dup(2)) {
    std::fflush(stderr);
    ::dup2(::fileno(file_), 2);
  }
  ~CaptureStderr() { restore(); }
  CaptureStderr(const CaptureStderr&) = delete;
  CaptureStderr& operator=(const CaptureStderr&) = delete;

  // Everything written since construction, one entry per line (without its newline).
  std::vector<std::string> lines() {
    restore();
    std::string text;
    std::rewind(file_);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), file_)) > 0;) text.append(buf, n);
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_;
};

// 1-6 date and time, 7 microseconds, 8 component, 9 level, 10 tid, 12 lcore, 13 message.
inline const std::regex& lineFormat() {
  static const std::regex re(
      R"(^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{6})Z \[tent:([a-z]+)\] ([TDIWE]) )"
      R"(tid=(\d+)( lcore=(\d+))? (.*)$)");
  return re;
}

}  // namespace tent::log::testing
