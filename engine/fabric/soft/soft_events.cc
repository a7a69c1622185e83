// Device events of a soft device: a queue behind an eventfd, which stays readable
// while the queue holds events (the engine's control loop polls it level-triggered).
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

Status DeviceState::openEvents() {
  event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) return Status::IoError(std::string("soft: eventfd: ") + std::strerror(errno));
  return Status::OK();
}

void DeviceState::closeEvents() noexcept {
  if (event_fd >= 0) close(event_fd);
  event_fd = -1;
}

void DeviceState::pushEvent(DeviceEventType type) {
  std::lock_guard<std::mutex> lock(events_mu);
  events.push_back(type);
  const uint64_t one = 1;
  (void)!write(event_fd, &one, sizeof(one));
}

bool DeviceState::popEvent(DeviceEventType* out) {
  std::lock_guard<std::mutex> lock(events_mu);
  if (events.empty()) return false;
  *out = events.front();
  events.pop_front();
  if (events.empty()) {  // not readable any more until the next event
    uint64_t count = 0;
    (void)!read(event_fd, &count, sizeof(count));
  }
  return true;
}

}  // namespace tent::fabric::soft
