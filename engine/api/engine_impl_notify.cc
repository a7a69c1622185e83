// Notifications through the public API (docs/engine.md, "Notifications"): a batch's
// notification settles here once its tasks are terminal; standalone sends and the
// inbox go to the transport. Control path: a notification is one message per batch,
// so these take the batch's notify mutex and may allocate.
#include "api/engine_impl.h"

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
  {
    std::lock_guard lock(batch->notify_mu);
    if (batch->notify_state.load(std::memory_order_relaxed) != BatchSlot::kNoNotify)
      return Status::FailedPrecondition("batch " + std::to_string(id) +
                                        " already carries a notification");
    batch->notify_target = target;
    batch->notify_message.assign(notification);
    batch->notify_state.store(BatchSlot::kNotifyPending, std::memory_order_release);
  }
  Status s = submitTransfer(id, requests);
  if (!s.ok()) {
    // Nothing of it runs: the notification goes with it (the batch reads INVALID).
    std::lock_guard lock(batch->notify_mu);
    batch->notify_state.store(BatchSlot::kNotifySettled, std::memory_order_release);
    batch->notify_message.clear();
    transport_->notifyCounters().dropped_batches.fetch_add(1, std::memory_order_relaxed);
  }
  return s;
}

Result<TransferStatus> TransferEngineImpl::settleNotification(BatchSlot& batch,
                                                              TransferStatus total) noexcept {
  try {
    std::lock_guard lock(batch.notify_mu);
    if (batch.notify_state.load(std::memory_order_relaxed) != BatchSlot::kNotifyPending)
      return total;  // settled by another caller meanwhile
    if (total.state != TransferState::COMPLETED) {
      // A failed batch delivers no notification; the caller sees the failure.
      batch.notify_state.store(BatchSlot::kNotifySettled, std::memory_order_release);
      batch.notify_message.clear();
      transport_->notifyCounters().dropped_batches.fetch_add(1, std::memory_order_relaxed);
      return total;
    }
    Status s = transport_->sendNotification(batch.notify_target, batch.notify_message);
    if (s.code() == StatusCode::kResourceExhausted)
      return s.withContext("the batch completed; its notification waits for room at the target");
    batch.notify_state.store(BatchSlot::kNotifySettled, std::memory_order_release);
    batch.notify_message.clear();
    if (!s.ok()) return s.withContext("the batch completed; its notification was not delivered");
    return total;
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory settling a batch notification");
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
