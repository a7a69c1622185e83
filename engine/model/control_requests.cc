#include "model/control_requests.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "base/clock.h"

namespace tent::rdma {

namespace {

// One ring carries both kinds: a slot pointer (aligned, low bit 0) or a refetch, the
// segment id shifted left with the low bit set.
constexpr uintptr_t kRefreshBit = 1;

}  // namespace

Status ControlRequests::init(uint32_t capacity, uint64_t refresh_gap_ns) {
  auto ring = lcore::RawRing::create("tent_ctl", capacity, /*single_consumer=*/true);
  if (!ring.ok()) return ring.status().withContext("control request ring");
  ring_ = std::move(ring).value();
  refresh_gap_ns_ = refresh_gap_ns;
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Status::IoError("eventfd failed");
  return Status::OK();
}

ControlRequests::~ControlRequests() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool ControlRequests::push(void* item) noexcept {
  if (!ring_->enqueue(item)) return false;
  // The one syscall of the datapath's control requests: once per request queued.
  uint64_t one = 1;
  // datapath-lint: allow(syscall) wakes the control loop once per request newly queued (rare)
  (void)!::write(wake_fd_, &one, sizeof one);
  return true;
}

void ControlRequests::queue(EndpointSlot* slot) noexcept {
  if (slot->queued.exchange(true, std::memory_order_acq_rel)) return;
  if (!push(slot)) slot->queued.store(false, std::memory_order_release);  // asked again next lookup
}

void ControlRequests::queueRefresh(SegmentId id) noexcept {
  const uint64_t now = clock::monotonicNs();
  uint64_t last = last_refresh_ns_.load(std::memory_order_relaxed);
  if ((last != 0 && now - last < refresh_gap_ns_) ||
      !last_refresh_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
    refreshes_skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // A full ring drops the refetch; the gap is given back so the next request asks again.
  if (!push(reinterpret_cast<void*>((static_cast<uintptr_t>(id) << 1) | kRefreshBit)))
    last_refresh_ns_.store(0, std::memory_order_relaxed);
}

void ControlRequests::drainWake() noexcept {
  uint64_t n;
  // datapath-lint: allow(syscall) the control loop's side: it clears the wake-up it got
  (void)!::read(wake_fd_, &n, sizeof n);
}

bool ControlRequests::next(ControlRequest* out) noexcept {
  void* item = nullptr;
  if (ring_->dequeueBurst_sc(&item, 1) == 0) return false;
  const auto bits = reinterpret_cast<uintptr_t>(item);
  if (bits & kRefreshBit) {
    *out = ControlRequest{nullptr, static_cast<SegmentId>(bits >> 1)};
    return true;
  }
  auto* slot = static_cast<EndpointSlot*>(item);
  slot->queued.store(false, std::memory_order_release);
  *out = ControlRequest{slot, 0};
  return true;
}

}  // namespace tent::rdma
