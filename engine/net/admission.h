// Who may hold a place in the listener's connection table: the source address of
// each connection (per-source cap), and a rate-limited account of what the table did
// to make room (idle sessions evicted, connections refused), one log line per period.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace tent::control {

// The address a connection came from, without its port. An IPv4 peer reaching an
// IPv6 wildcard listener (::ffff:a.b.c.d) is the same source as over IPv4.
struct PeerSource {
  std::string key;   // raw address bytes: compared, never shown
  std::string text;  // "10.0.0.7", "fe80::1": for log lines
};
PeerSource sourceOf(const sockaddr_storage& address, socklen_t length);

// Open connections per source.
class SourceCounts {
 public:
  uint32_t count(const std::string& key) const noexcept;
  void add(const std::string& key);
  void remove(const std::string& key) noexcept;
  size_t sources() const noexcept { return counts_.size(); }

 private:
  std::unordered_map<std::string, uint32_t> counts_;
};

// What making room cost since the last report; report() returns a line at most once
// per `period_ns` (and only when something happened), then starts counting afresh.
struct RoomReport {
  uint64_t idle_evicted = 0;
  uint64_t unauthenticated_evicted = 0;
  uint64_t refused = 0;
  uint64_t source_cap_hits = 0;
  std::string last_source;  // the source of the last connection that needed room

  bool empty() const noexcept {
    return idle_evicted + unauthenticated_evicted + refused + source_cap_hits == 0;
  }
  // "" when nothing is due yet.
  std::string takeLine(uint64_t now_ns, uint64_t period_ns, uint32_t max_connections,
                       uint32_t max_per_source);

 private:
  uint64_t last_ns_ = 0;
  bool reported_once_ = false;
};

}  // namespace tent::control
