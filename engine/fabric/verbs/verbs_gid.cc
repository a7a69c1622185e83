// Which GID a port uses: the configured index, or on RoCE the best RoCE v2 GID whose
// netdev is up. Link-local (fe80::/10) GIDs lose to every routable one: a RoCE v1
// or link-local GID reaches the peer only on the same L2 segment, and a v1/v2 pair
// never connects (the peers just time out), so a wrong pick must be an error here,
// not retry-exceeded at the first transfer.
#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <vector>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

namespace {

struct GidCandidate {
  int index = 0;
  ibv_gid_entry entry{};
  std::string netdev;  // "" when the entry has none or it is gone
  bool netdev_up = false;
};

std::string where(const std::string& device, uint8_t port) {
  return "verbs " + device + " port " + std::to_string(port);
}

std::string describeEntry(const GidCandidate& c) {
  return "[" + std::to_string(c.index) + "] " + gidTypeName(c.entry.gid_type) + " " +
         gidText(c.entry.gid) + " on " + (c.netdev.empty() ? "no netdev" : c.netdev) +
         (c.netdev.empty() ? "" : (c.netdev_up ? " (up)" : " (down)"));
}

std::string netdevName(const VerbsOps& ops, uint32_t ifindex, bool* up) {
  char name[64] = {};
  *up = false;
  if (ifindex == 0 || ops.query_netdev == nullptr) return "";
  if (ops.query_netdev(ifindex, name, sizeof(name), up) != 0) {
    *up = false;
    return "";
  }
  return name;
}

std::string defaultInterface(const VerbsOps& ops) {
  char name[64] = {};
  if (ops.default_route_netdev == nullptr || ops.default_route_netdev(name, sizeof(name)) != 0)
    return "";
  return name;
}

bool isZero(const ibv_gid& gid) {
  static constexpr ibv_gid kZero{};
  return std::memcmp(gid.raw, kZero.raw, sizeof(gid.raw)) == 0;
}

Result<GidPick> configuredGid(const VerbsOps& ops, ibv_context* context, const std::string& device,
                              uint8_t port, const ibv_port_attr& port_attr, int index) {
  if (index >= port_attr.gid_tbl_len) {
    return Status::InvalidArgument(where(device, port) + ": gid_index " + std::to_string(index) +
                                   " is outside the port's GID table (" +
                                   std::to_string(port_attr.gid_tbl_len) + " entries)");
  }
  GidPick pick;
  pick.index = index;
  ibv_gid_entry entry{};
  int rc = ops.query_gid_ex(context, port, static_cast<uint32_t>(index), &entry, 0);
  if (rc == ENODATA) {
    return Status::InvalidArgument(where(device, port) + ": gid_index " + std::to_string(index) +
                                   " is an empty GID table entry");
  }
  if (rc == 0) {
    pick.type = entry.gid_type;
    bool up = false;
    pick.netdev = netdevName(ops, entry.ndev_ifindex, &up);
  }
  return pick;  // the GID itself comes from query_gid (setupPort)
}

Result<GidPick> autoGid(const VerbsOps& ops, ibv_context* context, const std::string& device,
                        uint8_t port, const ibv_port_attr& port_attr,
                        const std::string& interface) {
  std::vector<GidCandidate> table;
  for (int i = 0; i < port_attr.gid_tbl_len; ++i) {
    GidCandidate c;
    c.index = i;
    int rc = ops.query_gid_ex(context, port, static_cast<uint32_t>(i), &c.entry, 0);
    if (rc == EOPNOTSUPP || rc == ENOSYS) {
      return Status::Unavailable(where(device, port) +
                                 ": the GID types cannot be read (kernel or rdma-core too old), "
                                 "so no RoCE v2 GID can be chosen; set fabric.verbs.gid_index");
    }
    if (rc != 0 || isZero(c.entry.gid)) continue;  // ENODATA: an empty entry
    c.netdev = netdevName(ops, c.entry.ndev_ifindex, &c.netdev_up);
    table.push_back(std::move(c));
  }
  const std::string preferred = interface.empty() ? defaultInterface(ops) : interface;
  const GidCandidate* best = nullptr;
  auto rank = [&](const GidCandidate& c) {
    return std::make_tuple(isLinkLocalGid(c.entry.gid), c.netdev != preferred,
                           !isIpv4MappedGid(c.entry.gid), c.index);
  };
  for (const GidCandidate& c : table) {
    if (c.entry.gid_type != IBV_GID_TYPE_ROCE_V2 || !c.netdev_up) continue;
    if (!interface.empty() && c.netdev != interface) continue;
    if (best == nullptr || rank(c) < rank(*best)) best = &c;
  }
  if (best == nullptr) {
    std::string seen;
    for (const GidCandidate& c : table) seen += (seen.empty() ? "" : ", ") + describeEntry(c);
    return Status::NotFound(
        where(device, port) + ": no RoCE v2 GID on an up netdev" +
        (interface.empty() ? "" : " named '" + interface + "' (fabric.verbs.gid_interface)") +
        "; GID table: " + (seen.empty() ? "empty" : seen) +
        ". Give the RDMA netdev an address and bring it up, or set fabric.verbs.gid_index");
  }
  GidPick pick;
  pick.index = best->index;
  pick.type = best->entry.gid_type;
  pick.netdev = best->netdev;
  return pick;
}

}  // namespace

bool isLinkLocalGid(const ibv_gid& gid) noexcept {
  return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80;
}

std::string gidText(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

const char* gidTypeName(uint32_t type) noexcept {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCEv1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCEv2";
    default:
      return "unknown";
  }
}

// IB routes by LID inside a subnet and its port GID (index 0, subnet prefix + GUID)
// is the one the SM knows; only RoCE needs a choice.
Result<GidPick> selectGid(const VerbsOps& ops, ibv_context* context, const std::string& device,
                          uint8_t port, const ibv_port_attr& port_attr, const GidChoice& choice) {
  if (choice.configured >= 0)
    return configuredGid(ops, context, device, port, port_attr, choice.configured);
  if (port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    GidPick pick;
    pick.type = IBV_GID_TYPE_IB;
    return pick;
  }
  return autoGid(ops, context, device, port, port_attr, choice.interface);
}

}  // namespace tent::fabric::verbs
