// Starts engine_peer with fork/exec and reads its READY line through a pipe.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace tent::testing {

struct PeerProcess {
  pid_t pid = -1;
  int stdin_fd = -1;
  std::string segment;
  uint64_t addr = 0;
  size_t size = 0;

  // Returns false (with `error`) when the peer did not report READY within 20 s.
  bool start(const std::string& exe, size_t bytes, uint32_t seed, const std::string& listen,
             const std::string& yaml, std::string* error, const std::string& bootstrap = "") {
    int out[2], in[2];
    if (::pipe(out) != 0 || ::pipe(in) != 0) return false;
    pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::dup2(in[0], 0);
      ::close(out[0]);
      ::close(in[1]);
      std::string sz = std::to_string(bytes), sd = std::to_string(seed);
      ::execl(exe.c_str(), exe.c_str(), sz.c_str(), sd.c_str(), listen.c_str(), yaml.c_str(),
              bootstrap.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    ::close(in[0]);
    stdin_fd = in[1];
    std::string line;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    char c;
    while (std::chrono::steady_clock::now() < deadline && ::read(out[0], &c, 1) == 1 && c != '\n')
      line += c;
    ::close(out[0]);
    std::istringstream is(line);
    std::string tag;
    is >> tag >> segment >> addr >> size;
    if (tag != "READY") {
      *error = "peer did not start: '" + line + "'";
      return false;
    }
    return true;
  }
  void kill() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (stdin_fd >= 0) ::close(stdin_fd);
    pid = -1;
    stdin_fd = -1;
  }
  void stop() {
    if (stdin_fd >= 0) ::close(stdin_fd);
    stdin_fd = -1;
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~PeerProcess() { kill(); }
};

inline std::string peerExe() {
  const char* dir = std::getenv("TENT_ENGINE_PEER");
  return dir ? dir : "./engine_peer";
}

}  // namespace tent::testing
