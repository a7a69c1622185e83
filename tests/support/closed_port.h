// A loopback address where nothing listens: bind an ephemeral port, then close it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tent::test {

// "127.0.0.1:PORT" of a port that was free a moment ago; "" when the bind failed.
inline std::string closedLoopbackAddress() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? "127.0.0.1:" + std::to_string(ntohs(a.sin_port)) : "";
}

}  // namespace tent::test
