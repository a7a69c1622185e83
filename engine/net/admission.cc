#include "net/admission.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace tent::control {

PeerSource sourceOf(const sockaddr_storage& address, socklen_t length) {
  PeerSource s;
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    s.key.assign(reinterpret_cast<const char*>(&v4.sin_addr), sizeof v4.sin_addr);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
  } else if (address.ss_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      const uint8_t* v4 = v6.sin6_addr.s6_addr + 12;
      s.key.assign(reinterpret_cast<const char*>(v4), 4);
      ::inet_ntop(AF_INET, v4, text, sizeof text);
    } else {
      s.key.assign(reinterpret_cast<const char*>(&v6.sin6_addr), sizeof v6.sin6_addr);
      ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    }
  } else {
    s.key = "?";  // a family we do not serve (accept4 gives none): one shared source
    std::strcpy(text, "unknown");
  }
  s.text = text;
  return s;
}

uint32_t SourceCounts::count(const std::string& key) const noexcept {
  auto it = counts_.find(key);
  return it == counts_.end() ? 0 : it->second;
}

void SourceCounts::add(const std::string& key) {
  ++counts_[key];
}

void SourceCounts::remove(const std::string& key) noexcept {
  auto it = counts_.find(key);
  if (it == counts_.end()) return;
  if (--it->second == 0) counts_.erase(it);
}

std::string RoomReport::takeLine(uint64_t now_ns, uint64_t period_ns, uint32_t max_connections,
                                 uint32_t max_per_source) {
  if (empty() || (reported_once_ && now_ns - last_ns_ < period_ns)) return "";
  std::string line = "control: making room in the connection table (bootstrap.max_connections " +
                     std::to_string(max_connections) + ", bootstrap.max_connections_per_source " +
                     std::to_string(max_per_source) + "): " + std::to_string(idle_evicted) +
                     " idle sessions and " + std::to_string(unauthenticated_evicted) +
                     " unauthenticated connections evicted, " + std::to_string(refused) +
                     " connections refused, " + std::to_string(source_cap_hits) +
                     " at their source's cap (last from " + last_source + ")";
  if (reported_once_) line += " since the last report";
  *this = RoomReport{};
  last_ns_ = now_ns;
  reported_once_ = true;
  return line;
}

}  // namespace tent::control
