// Endpoint lookups, routing and slice hand-off for pollers and callers. Runs inside
// an ebr::ReadSection (the caller's), never allocates or blocks.
#include "datapath/datapath_context.h"
#include "datapath/slice_poller.h"
#include "model/rdma_context.h"
#include "model/rdma_endpoint.h"
#include "model/slicing.h"

namespace tent::rdma {

EndpointLookup DatapathContext::lookup(uint32_t context, SegmentId segment, uint32_t peer_device,
                                       uint64_t now, RdmaEndPoint** out) const noexcept {
  SegmentRecord* rec = segments_.find(segment);
  if (rec == nullptr) return EndpointLookup::kUnknown;
  return lookup(*rec, context, peer_device, now, out);
}

EndpointLookup DatapathContext::lookup(SegmentRecord& rec, uint32_t context, uint32_t peer_device,
                                       uint64_t now, RdmaEndPoint** out) const noexcept {
  if (!rec.up.load(std::memory_order_acquire)) return EndpointLookup::kFailed;
  EndpointSlot* slot = rec.slot(context, peer_device);
  if (slot == nullptr) return EndpointLookup::kUnknown;
  if (RdmaEndPoint* ep = slot->ready.load(std::memory_order_acquire)) {
    if (!ep->ready()) return EndpointLookup::kConnecting;  // being retired: a new one follows
    if (ep->qpInError()) {  // broken while idle: replaced before this request uses it
      requestReset(ep);
      return EndpointLookup::kConnecting;
    }
    ep->touch();
    *out = ep;
    return EndpointLookup::kReady;
  }
  switch (slot->slotState()) {
    case SlotState::kConnecting:
      return EndpointLookup::kConnecting;
    case SlotState::kBackoff:
      if (now < slot->retry_at_ns.load(std::memory_order_acquire)) return EndpointLookup::kFailed;
      [[fallthrough]];
    case SlotState::kIdle:
      requests_.queue(slot);
      return EndpointLookup::kConnecting;
  }
  return EndpointLookup::kFailed;
}

void DatapathContext::requestReset(RdmaEndPoint* ep) const noexcept {
  if (!ep->beginReset()) return;
  SegmentRecord* rec = segments_.find(ep->segment());
  EndpointSlot* slot = rec ? rec->slot(ep->context().index(), ep->peerDevice()) : nullptr;
  // A slot that no longer holds `ep` means the control plane is retiring it already.
  if (slot != nullptr && slot->ready.load(std::memory_order_acquire) == ep) requests_.queue(slot);
}

uint64_t DatapathContext::pausedMask(uint64_t now) const noexcept {
  uint64_t mask = 0;
  for (size_t i = 0; i < contexts_.size(); ++i)
    if (contexts_[i]->paused(now)) mask |= 1ull << i;
  return mask;
}

uint64_t DatapathContext::downMask() const noexcept {
  uint64_t mask = 0;
  for (size_t i = 0; i < contexts_.size(); ++i)
    if (contexts_[i]->down()) mask |= 1ull << i;
  return mask;
}

void DatapathContext::placeTask(RdmaTask& task, uint64_t now) const noexcept {
  uint32_t candidates[kMaxDevices];
  const size_t n = localCandidates(rails_, task.location, usableDevices(task.device_mask),
                                   pausedMask(now), candidates, kMaxDevices);
  for (size_t i = 0; i < n; ++i) task.placement[i] = static_cast<uint8_t>(candidates[i]);
  task.placement_count = static_cast<uint8_t>(n);
}

bool DatapathContext::placeSlice(RdmaSlice& s) const noexcept {
  const RdmaTask& task = *s.task;
  const uint32_t n = task.placement_count;
  return n != 0 && choosePair(s, task.placement[(s.rr_hint + s.retries) % n]);
}

bool DatapathContext::routeSlice(RdmaSlice& s, uint64_t now) const noexcept {
  const RdmaTask& task = *s.task;
  uint32_t candidates[kMaxDevices];
  size_t n = localCandidates(rails_, task.location, usableDevices(task.device_mask),
                             pausedMask(now), candidates, kMaxDevices);
  return n != 0 && choosePair(s, candidates[(s.rr_hint + s.retries) % n]);
}

bool DatapathContext::choosePair(RdmaSlice& s, uint32_t local) const noexcept {
  const RdmaTask& task = *s.task;
  const auto& tb = task.peer->descriptor.buffers[task.target_buffer];
  const auto& region = regionAt(tb, s.target_addr);
  int peer = choosePeerDevice(task.peer->same_name, local, region.rank0,
                              static_cast<uint32_t>(task.peer->descriptor.devices.size()),
                              s.rr_hint + s.retries, tb.rkeys);
  if (peer < 0) return false;
  s.local_device = static_cast<uint16_t>(local);
  s.peer_device = static_cast<uint16_t>(peer);
  s.lkey = task.local_buffer->lkeys[local];
  s.rkey = tb.rkeys[static_cast<uint32_t>(peer)];
  return true;
}

SlicePoller* DatapathContext::pollerFor(const RdmaTask& task, const RdmaSlice& s,
                                        SegmentRecord* rec) const noexcept {
  // The priority lane: the context's rail poller, never behind bulk.
  if (task.priority_lane) return rail_of_context_[s.local_device];
  if (rec == nullptr) rec = segments_.find(s.segment);
  EndpointSlot* slot = rec ? rec->slot(s.local_device, s.peer_device) : nullptr;
  return slot ? by_index_[slot->owner] : nullptr;
}

bool DatapathContext::enqueue(RdmaTask& task, RdmaSlice* s, SegmentRecord* rec) const noexcept {
  SlicePoller* p = pollerFor(task, *s, rec);
  if (p == nullptr) return false;
  if (task.priority_lane) p->countForeground();
  // Before the ring: once on it, the slice is its poller's. A full ring leaves it
  // with the caller, as it was.
  const SliceState was = s->state;
  // A new slice, one forwarded by a poller, or a direct piece that continues here.
  s->moveTo(SliceState::kQueued, SliceState::kAllocated, SliceState::kPending,
            SliceState::kPostedDirect);
  if (p->enqueue(&s, 1) == 1) return true;
  s->state = was;
  return false;
}

void DatapathContext::finishSlice(RdmaSlice* s, SliceResult result) const noexcept {
  if (accountSlice(s, result)) slices_.release(s);
}

bool DatapathContext::accountSlice(RdmaSlice* s, SliceResult result) const noexcept {
  // Anything but free, queued (the ring owns it) or already accounted.
  s->moveTo(SliceState::kDone, SliceState::kAllocated, SliceState::kPending, SliceState::kStaged,
            SliceState::kPosted, SliceState::kPostedDirect, SliceState::kTimedOut);
  RdmaTask& task = *s->task;
  // Read before the task may go: a task's own slice goes with it.
  const bool pooled = !s->task_owned;
  const uint64_t bytes = result == SliceResult::kSuccess ? s->length : 0;
  const uint64_t deadline = s->deadline_ns;  // read before the task may go
  if (bytes) completions_.addBytes(s->local_device, s->intent, bytes);
  const TransferState published = settleSlice(task, bytes, result);
  // Late but complete: the bytes are there; the deadline counts as missed.
  if (published == TransferState::COMPLETED && deadline != 0 && steadyNowNs() > deadline)
    completions_.countMissed();
  return pooled;
}

TransferState DatapathContext::settleSlice(RdmaTask& task, uint64_t bytes,
                                           SliceResult result) const noexcept {
  TransferState published = TransferState::PENDING;
  updateSliceStatus(task, bytes, result, &published);
  if (published != TransferState::PENDING) completion_bell_.ring();  // the task may be gone
  return published;
}

}  // namespace tent::rdma
