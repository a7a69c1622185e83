#include "engine/rdma/endpoint_store.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/rdma/rdma_context.h"

namespace tent::rdma {

Status EndpointStore::init(uint32_t queue_capacity) {
  auto ring = lcore::Ring<EndpointSlot>::create("tent_ctl", queue_capacity, true);
  if (!ring.ok()) return ring.status().withContext("control queue");
  queue_ = std::move(ring).value();
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) return Status::IoError("eventfd failed");
  return Status::OK();
}

EndpointStore::~EndpointStore() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void EndpointStore::queue(EndpointSlot* slot) noexcept {
  if (slot->queued.exchange(true, std::memory_order_acq_rel)) return;
  if (!queue_->enqueue(slot)) {
    slot->queued.store(false, std::memory_order_release);  // asked again on the next lookup
    return;
  }
  wake();
}

void EndpointStore::wake() noexcept {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

EndpointLookup EndpointStore::lookup(uint32_t context, SegmentId segment, uint32_t peer_device,
                                     uint64_t since_ns, RdmaEndPoint** out) noexcept {
  EndpointSlot* slot = findSlot(context, segment, peer_device);
  if (!slot) return EndpointLookup::kUnknown;
  RdmaEndPoint* ep = slot->current.load(std::memory_order_acquire);
  if (ep && ep->ready()) {
    *out = ep;
    return EndpointLookup::kReady;
  }
  if (ep && ep->state() == EndpointState::kHandshaking) return EndpointLookup::kConnecting;
  uint64_t failed_at = slot->failed_at_ns.load(std::memory_order_acquire);
  if (failed_at != 0 && failed_at >= since_ns) return EndpointLookup::kFailed;
  queue(slot);
  return EndpointLookup::kConnecting;
}

void EndpointStore::requestReset(RdmaEndPoint* ep) noexcept {
  if (!ep->beginReset()) return;
  EndpointSlot* slot = findSlot(ep->context().index(), ep->segment(), ep->peerDevice());
  if (slot) queue(slot);
}

void EndpointStore::ensureSlot(uint32_t context, SegmentId segment, uint32_t peer_device) {
  Map::accessor a;
  if (!slots_.insert(a, key(context, segment, peer_device))) return;
  auto slot = std::make_unique<EndpointSlot>();
  slot->context = context;
  slot->segment = segment;
  slot->peer_device = peer_device;
  a->second = slot.get();
  std::lock_guard<std::mutex> lock(owned_mu_);
  owned_slots_.push_back(std::move(slot));
}

EndpointSlot* EndpointStore::findSlot(uint32_t context, SegmentId segment,
                                      uint32_t peer_device) noexcept {
  Map::const_accessor a;
  if (!slots_.find(a, key(context, segment, peer_device))) return nullptr;
  return a->second;
}

std::vector<EndpointSlot*> EndpointStore::slotsOf(SegmentId segment) {
  std::vector<EndpointSlot*> out;
  std::lock_guard<std::mutex> lock(owned_mu_);
  for (auto& s : owned_slots_)
    if (s->segment == segment) out.push_back(s.get());
  return out;
}

std::vector<EndpointSlot*> EndpointStore::allSlots() {
  std::vector<EndpointSlot*> out;
  std::lock_guard<std::mutex> lock(owned_mu_);
  for (auto& s : owned_slots_) out.push_back(s.get());
  return out;
}

RdmaEndPoint* EndpointStore::adopt(std::unique_ptr<RdmaEndPoint> ep) {
  std::lock_guard<std::mutex> lock(owned_mu_);
  owned_endpoints_.push_back(std::move(ep));
  return owned_endpoints_.back().get();
}

EndpointSlot* EndpointStore::nextQueued() noexcept {
  EndpointSlot* slot = nullptr;
  if (queue_->dequeueBurst_lc(&slot, 1) == 0) return nullptr;
  slot->queued.store(false, std::memory_order_release);
  return slot;
}

}  // namespace tent::rdma
