// Netdev lookups for RoCE GID selection, read from the kernel's own views: the
// name from the ifindex (if_indextoname), "up" from sysfs operstate (the carrier
// and the admin state together), the default route from /proc/net/route.
#include "fabric/verbs/verbs_netdev.h"

#include <net/if.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tent::fabric::verbs {

int queryHostNetdev(uint32_t ifindex, char* name, size_t name_len, bool* up) {
  char buffer[IF_NAMESIZE] = {};
  if (ifindex == 0 || if_indextoname(ifindex, buffer) == nullptr) return ENODEV;
  std::snprintf(name, name_len, "%s", buffer);
  std::ifstream in(std::string("/sys/class/net/") + buffer + "/operstate");
  std::string state;
  in >> state;
  // "unknown": drivers without carrier reporting (loopback, some virtual links).
  *up = state == "up" || state == "unknown";
  return 0;
}

int hostDefaultRouteNetdev(char* name, size_t name_len) {
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask))
      continue;
    if (destination == "00000000" && mask == "00000000") {
      std::snprintf(name, name_len, "%s", iface.c_str());
      return 0;
    }
  }
  return ENOENT;
}

}  // namespace tent::fabric::verbs
