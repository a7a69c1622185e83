// Control-plane addresses: "host:port" with IPv4, host names and bracketed IPv6
// ("[::1]:17800"), resolved once; listening and non-blocking connecting sockets.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "tent/status.h"

namespace tent::control {

// "host:port" -> parts; "[v6addr]:port" gives the address without brackets.
Status splitHostPort(std::string_view name, std::string* host, uint16_t* port);
// Brackets IPv6 literals: ("::1", 80) -> "[::1]:80".
std::string joinHostPort(const std::string& host, uint16_t port);

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const noexcept { return reinterpret_cast<const sockaddr*>(&storage); }
};
// getaddrinfo (blocking: callers run it off the event loop, once per name).
Result<SocketAddress> resolve(const std::string& host, uint16_t port);
// A numeric IPv4/IPv6 address only (never blocks); NotFound for a name.
Result<SocketAddress> resolveNumeric(const std::string& host, uint16_t port);

// A bound, listening, non-blocking socket; `*bound_port` is the port it got.
Result<int> listenOn(const std::string& host, uint16_t port, int backlog, uint16_t* bound_port);
// A non-blocking socket with connect(2) started; `*in_progress` when not yet done.
Result<int> startConnect(const SocketAddress& address, bool* in_progress);
// TCP_NODELAY and keepalive probes so a peer host that vanished is noticed.
void tuneSocket(int fd) noexcept;

}  // namespace tent::control
