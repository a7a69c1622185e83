#include "net/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace tent::control {

Status splitHostPort(std::string_view name, std::string* host, uint16_t* port) {
  const std::string whole(name);
  std::string_view h, p;
  if (!name.empty() && name.front() == '[') {
    const size_t close = name.find(']');
    if (close == std::string_view::npos || close + 1 >= name.size() || name[close + 1] != ':')
      return Status::InvalidArgument("address '" + whole + "' is not [ipv6]:port");
    h = name.substr(1, close - 1);
    p = name.substr(close + 2);
  } else {
    const size_t colon = name.rfind(':');
    if (colon == std::string_view::npos)
      return Status::InvalidArgument("address '" + whole + "' is not host:port");
    h = name.substr(0, colon);
    p = name.substr(colon + 1);
    if (h.find(':') != std::string_view::npos)
      return Status::InvalidArgument("address '" + whole + "': write IPv6 as [addr]:port");
  }
  if (h.empty() || p.empty())
    return Status::InvalidArgument("address '" + whole + "' is not host:port");
  unsigned long value = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return Status::InvalidArgument("bad port in '" + whole + "'");
    value = value * 10 + static_cast<unsigned long>(c - '0');
    if (value > 65535) return Status::InvalidArgument("port out of range in '" + whole + "'");
  }
  host->assign(h);
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

std::string joinHostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<SocketAddress> resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return Status::NotFound("cannot resolve host '" + host + "': " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, ::freeaddrinfo);
  SocketAddress a;
  std::memcpy(&a.storage, res->ai_addr, res->ai_addrlen);
  a.length = res->ai_addrlen;
  return a;
}

Result<SocketAddress> resolveNumeric(const std::string& host, uint16_t port) {
  SocketAddress a;
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&a.storage, &v4, sizeof v4);
    a.length = sizeof v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    std::memcpy(&a.storage, &v6, sizeof v6);
    a.length = sizeof v6;
  } else {
    return Status::NotFound("'" + host + "' is not a numeric address");
  }
  return a;
}

Result<int> listenOn(const std::string& host, uint16_t port, int backlog, uint16_t* bound_port) {
  auto numeric = resolveNumeric(host, port);
  SocketAddress a;
  if (numeric.ok()) {
    a = *numeric;
  } else {
    TENT_ASSIGN_OR_RETURN(a, resolve(host, port));
  }
  const int fd = ::socket(a.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, a.get(), a.length) != 0 || ::listen(fd, backlog) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::Unavailable("cannot listen on " + joinHostPort(host, port) + ": " +
                               std::strerror(err));
  }
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  *bound_port = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  return fd;
}

Result<int> startConnect(const SocketAddress& address, bool* in_progress) {
  const int fd = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::ResourceExhausted(std::string("socket: ") + std::strerror(errno));
  tuneSocket(fd);
  const int r = ::connect(fd, address.get(), address.length);
  if (r == 0) {
    *in_progress = false;
    return fd;
  }
  if (errno == EINPROGRESS) {
    *in_progress = true;
    return fd;
  }
  const int err = errno;
  ::close(fd);
  return Status::Unavailable(std::string("connect: ") + std::strerror(err));
}

void tuneSocket(int fd) noexcept {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 5, interval = 1, count = 3;  // a silent peer host is dropped in ~8 s
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

}  // namespace tent::control
