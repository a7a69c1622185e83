// Which RDMA devices the verbs provider can use: RC queue pairs over InfiniBand or
// RoCE. EFA (SRD only) and iWARP (connections through RDMA-CM only) are refused
// before they are opened, with the transport and the alternative named, instead of
// failing at the first connect. Control path.
#include <cstring>

#include "fabric/verbs/verbs_objects.h"

namespace tent::fabric::verbs {

namespace {

constexpr const char* kAlternative =
    "; use the tcp provider on this host (fabric.provider: tcp), or exclude the device "
    "(fabric.verbs.exclude_devices)";

std::string deviceName(const VerbsOps& ops, ibv_device* device) {
  const char* name = ops.get_device_name(device);
  return name != nullptr ? name : "?";
}

}  // namespace

DeviceTransport transportOf(const ibv_device& device) noexcept {
  if (device.transport_type == IBV_TRANSPORT_IB) return DeviceTransport::kInfinibandOrRoce;
  if (device.transport_type == IBV_TRANSPORT_IWARP || device.node_type == IBV_NODE_RNIC)
    return DeviceTransport::kIwarp;
  // EFA reports an unspecified node and transport (rdma-core providers/efa).
  if (device.node_type == IBV_NODE_UNSPECIFIED || std::strncmp(device.name, "efa", 3) == 0)
    return DeviceTransport::kEfa;
  return DeviceTransport::kOther;
}

Status checkTransport(const VerbsOps& ops, ibv_device* device) {
  const std::string name = deviceName(ops, device);
  switch (transportOf(*device)) {
    case DeviceTransport::kInfinibandOrRoce:
      return Status::OK();
    case DeviceTransport::kEfa:
      return Status::NotSupported(
          "verbs " + name +
          ": an AWS EFA device offers the SRD transport only (no RC queue pairs), which this "
          "provider needs" +
          kAlternative);
    case DeviceTransport::kIwarp:
      return Status::NotSupported(
          "verbs " + name +
          ": an iWARP device connects its queue pairs only through RDMA-CM, which this "
          "provider does not use (it exchanges QP numbers and GIDs itself)" +
          kAlternative);
    case DeviceTransport::kOther:
      break;
  }
  return Status::NotSupported("verbs " + name + ": transport type " +
                              std::to_string(static_cast<int>(device->transport_type)) +
                              " has no RC queue pairs this provider can connect" + kAlternative);
}

// An unnamed device joins the default set only with its port ACTIVE and a GID peers
// can route to (a port whose table is still empty has a zero GID).
Status checkUsablePort(const VerbsDevice& device) {
  const PortSetup& port = device.port();
  if (port.attr.state != IBV_PORT_ACTIVE) {
    return Status::Unavailable("verbs " + device.name() + ": port " +
                               std::to_string(port.port_num) + " is not ACTIVE (state " +
                               std::to_string(static_cast<int>(port.attr.state)) + ")");
  }
  static constexpr uint8_t kZero[16] = {};
  if (std::memcmp(port.gid.raw, kZero, sizeof(kZero)) == 0) {
    return Status::Unavailable("verbs " + device.name() + ": port " +
                               std::to_string(port.port_num) + " has no usable GID (index " +
                               std::to_string(port.gid_index) + " is empty)");
  }
  return Status::OK();
}

}  // namespace tent::fabric::verbs
