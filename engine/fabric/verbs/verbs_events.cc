// A verbs device's async events (ibv_get_async_event), read on the engine's control
// loop when the context's async_fd turns readable: the fd is made non-blocking here,
// so a read never waits. Each event is acknowledged at once (ibv_ack_async_event:
// destroying the object it names would wait for that).
#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

bool VerbsDevice::openEvents() {
  if (ops_.get_async_event == nullptr || ops_.ack_async_event == nullptr) return false;
  const int fd = context_->async_fd;
  if (fd < 0) return false;
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    TENT_WARN(kFabric, "verbs %s: async events unavailable (fcntl: %s)", info_.name.c_str(),
              std::strerror(errno));
    return false;
  }
  return true;
}

int VerbsDevice::eventFd() const noexcept {
  return events_ ? context_->async_fd : -1;
}

namespace {
// The event's port, for the port events; 0 for the others.
uint8_t portOf(const ibv_async_event& e) noexcept {
  switch (e.event_type) {
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_LID_CHANGE:
      return static_cast<uint8_t>(e.element.port_num);
    default:
      return 0;
  }
}
}  // namespace

bool VerbsDevice::nextEvent(DeviceEventType* out) {
  if (!events_) return false;
  for (;;) {
    ibv_async_event e{};
    if (ops_.get_async_event(context_, &e) != 0) return false;  // EAGAIN: none waits
    const ibv_event_type type = e.event_type;
    const uint8_t port = portOf(e);
    ops_.ack_async_event(&e);
    if (port != 0 && port != port_.port_num) continue;  // another port of the device
    switch (type) {
      case IBV_EVENT_DEVICE_FATAL:
        *out = DeviceEventType::kFatal;
        return true;
      case IBV_EVENT_PORT_ERR:
        *out = DeviceEventType::kPortDown;
        return true;
      case IBV_EVENT_PORT_ACTIVE:
        *out = DeviceEventType::kPortUp;
        return true;
      case IBV_EVENT_GID_CHANGE:
      case IBV_EVENT_LID_CHANGE:
        refreshGid();
        *out = DeviceEventType::kAddressChange;
        return true;
      default:
        // QP and CQ errors show in the completions the datapath polls; the rest
        // (SM, P_Key, client re-register) changes nothing the engine uses.
        TENT_DLOG(kFabric, "verbs %s: async event %s", info_.name.c_str(),
                  ibv_event_type_str(type));
        continue;
    }
  }
}

void VerbsDevice::refreshGid() {
  ibv_port_attr attr{};
  if (ops_.query_port(context_, port_.port_num, &attr) != 0) attr = port_.attr;
  auto pick = selectGid(ops_, context_, info_.name, port_.port_num, attr, gid_choice_);
  ibv_gid gid{};
  if (!pick.ok() || ops_.query_gid(context_, port_.port_num, pick->index, &gid) != 0) {
    TENT_WARN(kFabric,
              "verbs %s: address changed, and no usable GID is left (%s): peers keep "
              "the old one",
              info_.name.c_str(),
              pick.ok() ? "query_gid failed" : pick.status().toString().c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(identity_mu_);
  port_.attr.lid = attr.lid;
  port_.gid_index = pick->index;
  port_.gid_type = pick->type;
  port_.netdev = pick->netdev;
  port_.gid = gid;
  TENT_INFO(kFabric, "verbs %s: address changed: gid_index %d %s", info_.name.c_str(),
            port_.gid_index, gidText(port_.gid).c_str());
}

}  // namespace tent::fabric::verbs
