// The tcp provider's addressing and socket options: a device's address travels in a
// PortIdentity (gid = IPv6 or IPv4-mapped address, lid = TCP port), so the engine's
// bootstrap carries it unchanged.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

namespace {

Status sockopt(int fd, int level, int name, int value, const char* what) {
  if (setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return Status::IoError(std::string("tcp: setsockopt ") + what + ": " + std::strerror(errno));
  }
  return Status::OK();
}

bool isV4Mapped(const std::array<uint8_t, 16>& gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.data(), kPrefix, sizeof(kPrefix)) == 0;
}

}  // namespace

Result<SockAddr> parseHost(const std::string& host, uint16_t port) {
  SockAddr a;
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, h.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&a.storage, &v4, sizeof(v4));
    a.length = sizeof(v4);
    return a;
  }
  if (inet_pton(AF_INET6, h.c_str(), &v6.sin6_addr) == 1) {
    if (IN6_IS_ADDR_LINKLOCAL(&v6.sin6_addr)) {
      return Status::InvalidArgument("tcp: '" + host +
                                     "' is an IPv6 link-local address; peers could not reach "
                                     "it without an interface, use a global or ULA address");
    }
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    std::memcpy(&a.storage, &v6, sizeof(v6));
    a.length = sizeof(v6);
    return a;
  }
  return Status::InvalidArgument("tcp: '" + host + "' is not a numeric IPv4 or IPv6 address");
}

Result<SockAddr> parseListen(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon + 1 == text.size()) {
    return Status::InvalidArgument("tcp: listen address '" + text + "' is not host:port");
  }
  const std::string port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || !std::all_of(port_text.begin(), port_text.end(),
                                           [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::InvalidArgument("tcp: bad port in '" + text + "'");
  }
  const unsigned long port = std::stoul(port_text);
  if (port > 65535) return Status::InvalidArgument("tcp: port out of range in '" + text + "'");
  const std::string host = text.substr(0, colon);
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return Status::InvalidArgument("tcp: write IPv6 as [addr]:port, got '" + text + "'");
  }
  return parseHost(host, static_cast<uint16_t>(port));
}

std::string toText(const SockAddr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.storage.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
  inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
  return "[" + std::string(buf) + "]:" + std::to_string(ntohs(v6->sin6_port));
}

uint16_t portOf(const SockAddr& a) noexcept {
  if (a.storage.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
}

PortIdentity identityOf(const SockAddr& a) noexcept {
  PortIdentity id;
  if (a.storage.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
    id.gid[10] = 0xff;
    id.gid[11] = 0xff;
    std::memcpy(id.gid.data() + 12, &v4->sin_addr, 4);
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    std::memcpy(id.gid.data(), &v6->sin6_addr, 16);
  }
  id.lid = portOf(a);
  return id;
}

Result<SockAddr> addressOf(const PortIdentity& id) {
  if (id.lid == 0) return Status::InvalidArgument("tcp: the remote port identity has port 0");
  SockAddr a;
  if (isV4Mapped(id.gid)) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    v4.sin_port = htons(id.lid);
    std::memcpy(&v4.sin_addr, id.gid.data() + 12, 4);
    if (v4.sin_addr.s_addr == htonl(INADDR_ANY)) {
      return Status::InvalidArgument("tcp: the remote port identity names 0.0.0.0");
    }
    std::memcpy(&a.storage, &v4, sizeof(v4));
    a.length = sizeof(v4);
    return a;
  }
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(id.lid);
  std::memcpy(&v6.sin6_addr, id.gid.data(), 16);
  if (IN6_IS_ADDR_UNSPECIFIED(&v6.sin6_addr) || IN6_IS_ADDR_MULTICAST(&v6.sin6_addr) ||
      IN6_IS_ADDR_LINKLOCAL(&v6.sin6_addr)) {
    return Status::InvalidArgument(
        "tcp: the remote port identity is not a tcp device's address (unspecified, multicast "
        "or link-local IPv6)");
  }
  std::memcpy(&a.storage, &v6, sizeof(v6));
  a.length = sizeof(v6);
  return a;
}

Status tuneSocket(int fd, uint32_t retry_budget_ms) {
  // Small messages (acks, READ requests, direct-path WRs) must not wait for Nagle.
  TENT_RETURN_IF_ERROR(sockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
  // Unacknowledged data for longer than the budget ends the connection (ETIMEDOUT),
  // which fails the QP's WRs with retry-exceeded. It also bounds keepalive probing.
  TENT_RETURN_IF_ERROR(sockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, static_cast<int>(retry_budget_ms),
                               "TCP_USER_TIMEOUT"));
  // An idle connection to a vanished host is probed after half the budget (whole
  // seconds, at least 1), every second; TCP_USER_TIMEOUT decides when to give up.
  const int idle_s = std::max(1, static_cast<int>(retry_budget_ms / 2000));
  TENT_RETURN_IF_ERROR(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
  TENT_RETURN_IF_ERROR(sockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle_s, "TCP_KEEPIDLE"));
  TENT_RETURN_IF_ERROR(sockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, 1, "TCP_KEEPINTVL"));
  const int count = std::max(1, static_cast<int>(retry_budget_ms / 1000));
  TENT_RETURN_IF_ERROR(sockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, std::min(count, 127), "TCP_KEEPCNT"));
  return Status::OK();
}

Status applyTrafficClass(int fd, int family, uint8_t traffic_class) {
  if (traffic_class == 0) return Status::OK();
  if (family == AF_INET6) {
    // An IPv6 socket may carry IPv4 (a wildcard listener's v4-mapped peer): IP_TOS marks
    // those packets; a pure IPv6 socket does not need it (best effort).
    (void)sockopt(fd, IPPROTO_IP, IP_TOS, traffic_class, "IP_TOS");
    return sockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, traffic_class, "IPV6_TCLASS");
  }
  return sockopt(fd, IPPROTO_IP, IP_TOS, traffic_class, "IP_TOS");
}

bool weConnect(const PortIdentity& local, uint32_t local_qp, const QpRemote& remote) noexcept {
  const int c = std::memcmp(local.gid.data(), remote.port.gid.data(), local.gid.size());
  if (c != 0) return c < 0;
  if (local.lid != remote.port.lid) return local.lid < remote.port.lid;
  return local_qp < remote.qp_num;
}

}  // namespace tent::fabric::tcp
