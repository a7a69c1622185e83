#include "model/control_requests.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace tent::rdma {

Status ControlRequests::init(uint32_t capacity) {
  auto ring = lcore::Ring<EndpointSlot>::create("tent_ctl", capacity, /*single_consumer=*/true);
  if (!ring.ok()) return ring.status().withContext("control request ring");
  ring_ = std::move(ring).value();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Status::IoError("eventfd failed");
  return Status::OK();
}

ControlRequests::~ControlRequests() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ControlRequests::queue(EndpointSlot* slot) noexcept {
  if (slot->queued.exchange(true, std::memory_order_acq_rel)) return;
  if (!ring_->enqueue(slot)) {
    slot->queued.store(false, std::memory_order_release);  // asked again on the next lookup
    return;
  }
  // The one syscall of the datapath's control requests: once per slot queued.
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void ControlRequests::drainWake() noexcept {
  uint64_t n;
  (void)!::read(wake_fd_, &n, sizeof n);
}

EndpointSlot* ControlRequests::next() noexcept {
  EndpointSlot* slot = nullptr;
  if (ring_->dequeueBurst_lc(&slot, 1) == 0) return nullptr;
  slot->queued.store(false, std::memory_order_release);
  return slot;
}

}  // namespace tent::rdma
