// A batch's notification on the datapath: once a status call sees every task of the
// batch terminal, it posts the notification (or drops it: the batch failed) and
// returns. It never waits: the batch's notification is claimed with one
// compare-exchange (a second caller meanwhile reads PENDING), and the SEND is posted
// without waiting for its acknowledgement (RdmaTransport::postNotification).
#include "api/engine_impl.h"

namespace tent {

namespace {
// Ends the notification's life on the batch: sent, dropped or refused for good.
void settle(BatchSlot& batch) noexcept {
  batch.notify_message.clear();  // keeps its capacity: no allocation, no free
  batch.notify_state.store(BatchSlot::kNotifySettled, std::memory_order_release);
}
}  // namespace

Result<TransferStatus> TransferEngineImpl::settleNotification(BatchSlot& batch,
                                                              TransferStatus total) noexcept {
  uint8_t expected = BatchSlot::kNotifyPending;
  if (!batch.notify_state.compare_exchange_strong(expected, BatchSlot::kNotifyClaimed,
                                                  std::memory_order_acq_rel)) {
    // Another caller is posting it right now: not done yet, from where we stand.
    if (expected == BatchSlot::kNotifyClaimed) total.state = TransferState::PENDING;
    return total;
  }
  if (total.state != TransferState::COMPLETED) {
    // A failed batch delivers no notification; the caller sees the failure.
    settle(batch);
    transport_->notifyCounters().dropped_batches.fetch_add(1, std::memory_order_relaxed);
    return total;
  }
  using notify::PostResult;
  const PostResult r = transport_->postNotification(batch.notify_target, batch.notify_message);
  if (r == PostResult::kRetry || r == PostResult::kNoCredit) {
    // Still the batch's: the next status call posts it (never lost, never twice).
    batch.notify_state.store(BatchSlot::kNotifyPending, std::memory_order_release);
    if (r == PostResult::kRetry) {
      total.state = TransferState::PENDING;  // the endpoint connects, or acks are due
      return total;
    }
    return Status::ResourceExhausted(
        "the batch completed; its notification waits for room at the target (call again)");
  }
  settle(batch);
  switch (r) {
    case PostResult::kPosted:
      return total;
    case PostResult::kNotSupported:
      return Status::NotSupported(
          "the batch completed; the target takes no notifications (its bootstrap offers none)");
    case PostResult::kUnknownTarget:
      return Status::NotFound("the batch completed; its notification's segment is not open");
    case PostResult::kTooLong:
      return Status::InvalidArgument(
          "the batch completed; its notification is longer than the "
          "target takes");
    default:  // kBroken, kUnreachable
      return Status::Unavailable(
          "the batch completed; its notification was not delivered (the notify QP failed or "
          "the target is unreachable)");
  }
}

}  // namespace tent
