// Notifications: send_notification, get_notifications, wait_notifications (the wait
// releases the GIL and takes it back every 20 ms to run signal handlers, like the
// transfer waits). Messages go in as str or bytes and come back as bytes, with the
// sender's segment name.
#include <algorithm>
#include <string>
#include <vector>

#include "engine.h"

namespace tent::python {

namespace {

constexpr uint64_t kSliceNs = 20'000'000;

py::list toList(std::vector<Notification> got) {
  py::list out;
  for (auto& n : got) out.append(py::make_tuple(py::str(n.name), py::bytes(n.message)));
  return out;
}

}  // namespace

void Engine::sendNotification(py::handle target, py::handle message) {
  const std::string msg = toMessage(message, "message");
  const SegmentId seg = resolveTarget(target);
  call([&](TransferEngine& e) { return e.sendNotification(seg, msg); });
}

py::list Engine::getNotifications() {
  return toList(call([](TransferEngine& e) { return e.getNotifications(); }));
}

py::list Engine::waitNotifications(py::handle timeout_s) {
  const uint64_t deadline = deadlineAfter(toSeconds(timeout_s, "timeout_s"));
  for (;;) {
    const uint64_t now = steadyNowNs();
    const uint64_t slice = std::min(kSliceNs, deadline > now ? deadline - now : 0);
    auto got = call([&](TransferEngine& e) { return e.waitNotifications(slice); });
    if (!got.empty() || steadyNowNs() >= deadline) return toList(std::move(got));
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C ends the wait
    if (closed()) raise(Status::Canceled("the engine was closed during the wait"));
  }
}

}  // namespace tent::python
