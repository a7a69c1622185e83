// Notifications: the sending side finds the target's endpoint (asking the control plane
// to connect it, as a slice would) and sends over its notify link; the receiving side
// is the inbox the passive links deliver into. Control path: callers wait here, with
// deadlines, and may allocate.
#include <algorithm>
#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/ebr.h"
#include "model/rdma_endpoint.h"
#include "transport/rdma_transport.h"

namespace tent::rdma {

Status RdmaTransport::sendNotification(SegmentId target, std::string_view message) {
  notify::Counters& n = notify_counters_;
  if (!config_->notify.enabled)
    return Status::NotSupported("notifications are off here (notify.enabled: false)");
  if (message.size() > config_->notify.max_message_bytes)
    return Status::InvalidArgument("notification of " + std::to_string(message.size()) +
                                   " bytes; notify.max_message_bytes is " +
                                   std::to_string(config_->notify.max_message_bytes));
  const uint64_t deadline = clock::engineNowNs() + uint64_t{config_->notify.timeout_ms} * 1000000;
  std::shared_ptr<notify::NotifyLink> link;
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    EndpointLookup found;
    {
      ebr::ReadSection section;
      RdmaEndPoint* ep = nullptr;
      found = datapath_->lookup(0, target, 0, clock::engineNowNs(), &ep);
      if (found == EndpointLookup::kReady) link = ep->notifyLink();
    }
    if (found == EndpointLookup::kReady) break;
    if (found == EndpointLookup::kUnknown)
      return Status::NotFound("segment " + std::to_string(target) + " is not open");
    if (found == EndpointLookup::kFailed)
      return Status::Unavailable("segment " + std::to_string(target) +
                                 " is unreachable or backing off");
    if (clock::engineNowNs() >= deadline)
      return Status::Timeout("no endpoint to segment " + std::to_string(target) +
                             " within notify.timeout_ms");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  Status s =
      link ? link->send(message, deadline) : Status::NotSupported("this endpoint has no notify QP");
  switch (s.code()) {
    case StatusCode::kOk:
      n.sent.fetch_add(1, std::memory_order_relaxed);
      n.sent_bytes.fetch_add(message.size(), std::memory_order_relaxed);
      break;
    case StatusCode::kResourceExhausted:
      n.refused.fetch_add(1, std::memory_order_relaxed);
      break;
    case StatusCode::kNotSupported:
      n.unsupported.fetch_add(1, std::memory_order_relaxed);
      break;
    case StatusCode::kInvalidArgument:
      break;  // the caller's message, not the channel
    default:
      n.failed.fetch_add(1, std::memory_order_relaxed);
  }
  return s.withContext("notification to segment " + std::to_string(target));
}

Result<std::vector<Notification>> RdmaTransport::takeNotifications(uint64_t timeout_ns) {
  std::vector<notify::Notification> got =
      timeout_ns == 0 ? inbox_->take() : inbox_->wait(timeout_ns);
  std::vector<Notification> out;
  out.reserve(got.size());
  for (auto& g : got) out.push_back({std::move(g.sender), std::move(g.message)});
  return out;
}

}  // namespace tent::rdma
