// Notifications through the public API (docs/engine.md, "Notifications"): binding one
// to a batch (it is posted by a status call once the batch is terminal,
// engine_impl_notify_datapath.cc); standalone sends and the inbox go to the transport.
// Control path: may allocate and wait, with deadlines.
#include "api/engine_impl.h"
#include "base/clock.h"
#include "lcore/idle.h"

namespace tent {

Status TransferEngineImpl::submitTransfer(BatchId id, std::span<const Request> requests,
                                          std::string_view notification) {
  BatchSlot* batch = batches_.find(id);
  if (!batch) return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  if (requests.empty()) return Status::InvalidArgument("a notification needs at least one request");
  const SegmentId target = requests[0].target_id;
  for (const Request& r : requests)
    if (r.target_id != target)
      return Status::InvalidArgument(
          "a batch notification goes to one segment: the requests name segments " +
          std::to_string(target) + " and " + std::to_string(r.target_id));
  if (notification.size() > config_->notify.max_message_bytes)
    return Status::InvalidArgument("notification of " + std::to_string(notification.size()) +
                                   " bytes; notify.max_message_bytes is " +
                                   std::to_string(config_->notify.max_message_bytes));
  uint8_t none = BatchSlot::kNoNotify;
  if (!batch->notify_state.compare_exchange_strong(none, BatchSlot::kNotifyClaimed,
                                                   std::memory_order_acq_rel))
    return Status::FailedPrecondition("batch " + std::to_string(id) +
                                      " already carries a notification");
  try {
    batch->notify_target = target;
    batch->notify_message.assign(notification);
  } catch (const std::bad_alloc&) {
    batch->notify_state.store(BatchSlot::kNoNotify, std::memory_order_release);
    return Status::ResourceExhausted("out of memory binding a notification to batch " +
                                     std::to_string(id));
  }
  // Still claimed while the requests are submitted: a status call meanwhile reads
  // PENDING and cannot take a batch of zero tasks for a completed one.
  Status s = submitTransfer(id, requests);
  if (!s.ok()) {
    // Nothing of it runs: the notification goes with it (the batch reads INVALID).
    batch->notify_message.clear();
    batch->notify_state.store(BatchSlot::kNotifySettled, std::memory_order_release);
    transport_->notifyCounters().dropped_batches.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  batch->notify_state.store(BatchSlot::kNotifyPending, std::memory_order_release);
  return s;
}

Status TransferEngineImpl::settleNotificationOnFree(BatchId id, BatchSlot& batch) {
  const uint64_t deadline = clock::engineNowNs() + uint64_t{config_->notify.timeout_ms} * 1000000;
  lcore::IdleBackoff backoff(lcore::waiterPolicy(1000));
  auto terminal = [&] {
    const size_t n = batch.count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) {
      const TransferState s = transport_->getTransferStatus(batch.tasks[i]).state;
      if (s == TransferState::PENDING || s == TransferState::INITIAL) return false;
    }
    return true;
  };
  Status notified = Status::OK();
  for (;;) {
    if (batch.notify_state.load(std::memory_order_acquire) == BatchSlot::kNotifySettled)
      return notified;
    auto st = getBatchTransferStatus(id);  // posts it when it can
    if (!st.ok()) {
      notified = st.status();  // refused (back-pressure): dropped below, as the caller frees
      break;
    }
    if (batch.notify_state.load(std::memory_order_acquire) == BatchSlot::kNotifySettled)
      return notified;
    if (!terminal()) break;  // freed before it completed
    if (clock::engineNowNs() >= deadline) {
      notified = Status::Timeout(
          "the batch completed; its notification found no ready endpoint or free notify send "
          "buffer within notify.timeout_ms and was not sent");
      break;
    }
    backoff.onIdle();
  }
  for (;;) {
    uint8_t pending = BatchSlot::kNotifyPending;
    if (batch.notify_state.compare_exchange_strong(pending, BatchSlot::kNotifySettled,
                                                   std::memory_order_acq_rel)) {
      batch.notify_message.clear();
      transport_->notifyCounters().dropped_batches.fetch_add(1, std::memory_order_relaxed);
      if (notified.ok())
        notified = Status::Canceled(
            "the batch was freed before it completed: its notification was not sent");
      return notified;
    }
    if (pending != BatchSlot::kNotifyClaimed) return notified;  // settled meanwhile
    backoff.onIdle();  // another caller is posting it right now
  }
}

Status TransferEngineImpl::sendNotification(SegmentId target, std::string_view message) {
  return transport_->sendNotification(target, message);
}

Result<std::vector<Notification>> TransferEngineImpl::getNotifications() {
  return transport_->takeNotifications(0);
}

Result<std::vector<Notification>> TransferEngineImpl::waitNotifications(uint64_t timeout_ns) {
  return transport_->takeNotifications(timeout_ns);
}

}  // namespace tent
