// The host's network interfaces as the production VerbsOps table sees them (sysfs and
// /proc/net/route): what a RoCE GID's netdev is called and whether it is up.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tent::fabric::verbs {

// VerbsOps::query_netdev over the running kernel.
int queryHostNetdev(uint32_t ifindex, char* name, size_t name_len, bool* up);
// VerbsOps::default_route_netdev over the running kernel.
int hostDefaultRouteNetdev(char* name, size_t name_len);

}  // namespace tent::fabric::verbs
