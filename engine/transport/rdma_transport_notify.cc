// Notifications, control path: a standalone send posts its message (the datapath half,
// rdma_transport_notify_datapath.cc) and waits, with a deadline and the engine's waiter
// policy, for the endpoint to connect and for its SEND's acknowledgement; the
// receiving side is the inbox the passive links deliver into.
#include "base/clock.h"
#include "lcore/idle.h"
#include "transport/rdma_transport.h"

namespace tent::rdma {

namespace {
// The longest sleep of a waiting send or receive: an acknowledgement takes microseconds
// on a NIC, a connect milliseconds.
constexpr uint32_t kSendWaitSleepMaxUs = 1000;

Status explainPost(notify::PostResult r, const notify::NotifyLink* link) {
  if (link != nullptr) return link->explain(r);
  switch (r) {
    case notify::PostResult::kNotSupported:
      return Status::NotSupported("this endpoint has no notify QP");
    case notify::PostResult::kUnknownTarget:
      return Status::NotFound("the segment is not open");
    case notify::PostResult::kUnreachable:
      return Status::Unavailable("the segment is unreachable or backing off");
    default:
      return Status::Internal("notification not posted");
  }
}
}  // namespace

Status RdmaTransport::sendNotification(SegmentId target, std::string_view message) {
  const std::string who = "notification to segment " + std::to_string(target);
  if (!config_->notify.enabled)
    return Status::NotSupported("notifications are off here (notify.enabled: false)");
  if (message.size() > config_->notify.max_message_bytes)
    return Status::InvalidArgument("notification of " + std::to_string(message.size()) +
                                   " bytes; notify.max_message_bytes is " +
                                   std::to_string(config_->notify.max_message_bytes));
  const uint64_t deadline = clock::engineNowNs() + uint64_t{config_->notify.timeout_ms} * 1000000;
  lcore::IdleBackoff backoff(lcore::waiterPolicy(kSendWaitSleepMaxUs));
  std::shared_ptr<notify::NotifyLink> link;
  uint64_t ticket = 0;
  for (;;) {
    const notify::PostResult r = postNotification(target, message, &link, &ticket);
    if (r == notify::PostResult::kPosted) break;
    if (r != notify::PostResult::kRetry) return explainPost(r, link.get()).withContext(who);
    if (clock::engineNowNs() >= deadline)
      return Status::Timeout(who + ": no ready endpoint or no free notify send buffer within " +
                             "notify.timeout_ms");
    backoff.onIdle();
  }
  // Posted (and counted as sent). Wait for the peer's NIC: the message is in its buffer.
  backoff.onBusy();
  for (;;) {
    switch (link->sendState(ticket)) {
      case notify::SendState::kAcked:
        return Status::OK();
      case notify::SendState::kFailed:  // counted as failed by the link
        return link->explain(notify::PostResult::kBroken).withContext(who);
      case notify::SendState::kInFlight:
        break;
    }
    if (clock::engineNowNs() >= deadline)
      return Status::Timeout(who + ": posted, not acknowledged by the peer's NIC within " +
                             "notify.timeout_ms (a later failure of its SEND is counted)");
    backoff.onIdle();
  }
}

Result<std::vector<Notification>> RdmaTransport::takeNotifications(uint64_t timeout_ns) {
  std::vector<notify::Notification> got = inbox_->take();
  if (got.empty() && timeout_ns != 0) {
    // Nothing polls for notifications on its own: the waiting caller passes over the
    // links again, spinning briefly, then sleeping up to 1 ms between passes.
    const uint64_t deadline = clock::engineNowNs() + timeout_ns;
    lcore::IdleBackoff backoff(lcore::waiterPolicy(kSendWaitSleepMaxUs));
    while (got.empty() && clock::engineNowNs() < deadline) {
      backoff.onIdle();
      got = inbox_->take();
    }
  }
  std::vector<Notification> out;
  out.reserve(got.size());
  for (auto& g : got) out.push_back({std::move(g.sender), std::move(g.message)});
  return out;
}

}  // namespace tent::rdma
