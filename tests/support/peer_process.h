// Starts engine_peer with fork/exec and reads its READY line through a pipe.
#pragma once

#include <poll.h>
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
  int stdout_fd = -1;  // after READY: the answers to commands (engine_peer's hooks)
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
    stdout_fd = out[0];
    std::istringstream is(line);
    std::string tag;
    is >> tag >> segment >> addr >> size;
    if (tag != "READY") {
      *error = "peer did not start: '" + line + "'";
      return false;
    }
    return true;
  }
  // Sends one command line and reads one answer line (bounded by 20 s: "" then).
  std::string command(const std::string& line) {
    const std::string out = line + "\n";
    if (::write(stdin_fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return "";
    std::string answer;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (char c = 0; c != '\n';) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{stdout_fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1 ||
          ::read(stdout_fd, &c, 1) != 1)
        return "";
      if (c != '\n') answer += c;
    }
    return answer;
  }
  void kill() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    closeFds();
    pid = -1;
  }
  void stop() {
    if (stdin_fd >= 0) ::close(stdin_fd);
    stdin_fd = -1;
    if (pid > 0) ::waitpid(pid, nullptr, 0);
    closeFds();
    pid = -1;
  }
  void closeFds() {
    if (stdin_fd >= 0) ::close(stdin_fd);
    if (stdout_fd >= 0) ::close(stdout_fd);
    stdin_fd = stdout_fd = -1;
  }
  ~PeerProcess() { kill(); }
};

inline std::string peerExe() {
  const char* dir = std::getenv("TENT_ENGINE_PEER");
  return dir ? dir : "./engine_peer";
}

}  // namespace tent::testing
