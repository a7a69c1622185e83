// Datapath of the public API: submission and status, on caller threads. Batches
// are found without a lock (BatchTable); only error returns build a message.
#include "api/engine_impl.h"

namespace tent {

Status TransferEngineImpl::submitTransfer(BatchId batch,
                                          std::span<const Request> requests) noexcept {
  return submitTransferWithMask(batch, requests, ~0ull);
}

Status TransferEngineImpl::submitTransferWithMask(BatchId id, std::span<const Request> requests,
                                                  uint64_t mask) noexcept {
  BatchSlot* batch = batches_.find(id);
  if (!batch) return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  if (requests.empty()) return Status::OK();
  size_t start = batch->count.load(std::memory_order_relaxed);
  do {
    if (requests.size() > batch->capacity - start)
      return Status::InvalidArgument(
          "batch " + std::to_string(id) + " over capacity: " + std::to_string(start) + " tasks + " +
          std::to_string(requests.size()) + " > " + std::to_string(batch->capacity));
  } while (!batch->count.compare_exchange_weak(start, start + requests.size(),
                                               std::memory_order_acq_rel));
  rdma::RdmaTask* tasks = &batch->tasks[start];
  Status s = transport_->submitTransferTasks(requests, tasks, mask);
  if (!s.ok()) {
    // Rejected requests keep their task ids and read INVALID.
    for (size_t i = 0; i < requests.size(); ++i) {
      auto initial = static_cast<uint8_t>(TransferState::INITIAL);
      tasks[i].state.compare_exchange_strong(initial, static_cast<uint8_t>(TransferState::INVALID));
    }
  }
  return s;
}

Result<TransferStatus> TransferEngineImpl::getTransferStatus(BatchId id, size_t task_id) noexcept {
  BatchSlot* batch = batches_.find(id);
  if (!batch) return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  if (task_id >= batch->count.load(std::memory_order_acquire))
    return Status::OutOfRange("task " + std::to_string(task_id) + " not in batch " +
                              std::to_string(id));
  TransferStatus st = transport_->getTransferStatus(batch->tasks[task_id]);
  // A notification waits for the whole batch: once this task is terminal, see whether
  // the others are too (one relaxed load when the batch has none).
  if (batch->notify_state.load(std::memory_order_relaxed) == BatchSlot::kNotifyPending &&
      st.state != TransferState::PENDING && st.state != TransferState::INITIAL) {
    auto all = getBatchTransferStatus(id);
    if (!all.ok()) return all.status();
  }
  return st;
}

Result<TransferStatus> TransferEngineImpl::getBatchTransferStatus(BatchId id) noexcept {
  BatchSlot* batch = batches_.find(id);
  if (!batch) return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  TransferStatus total;
  total.state = TransferState::COMPLETED;
  bool pending = false, failed = false;
  size_t n = batch->count.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    TransferStatus st = transport_->getTransferStatus(batch->tasks[i]);
    total.transferred_bytes += st.transferred_bytes;
    if (st.state == TransferState::PENDING || st.state == TransferState::INITIAL)
      pending = true;
    else if (st.state != TransferState::COMPLETED && !failed) {
      failed = true;
      total.state = st.state;  // the first failure
    }
  }
  if (pending) total.state = TransferState::PENDING;
  if (!pending && batch->notify_state.load(std::memory_order_relaxed) == BatchSlot::kNotifyPending)
    return settleNotification(*batch, total);
  return total;
}

Status TransferEngineImpl::cancelTransfer(BatchId id, size_t task_id) noexcept {
  BatchSlot* batch = batches_.find(id);
  if (!batch) return Status::NotFound("batch " + std::to_string(id) + " is unknown");
  if (task_id >= batch->count.load(std::memory_order_acquire))
    return Status::OutOfRange("task " + std::to_string(task_id) + " not in batch " +
                              std::to_string(id));
  return transport_->cancel(batch->tasks[task_id]);
}

}  // namespace tent
