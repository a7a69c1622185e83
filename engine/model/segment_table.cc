#include "model/segment_table.h"

#include <bit>

namespace tent::rdma {

SegmentRecord::SegmentRecord(SegmentId record_id, uint32_t context_count, uint32_t peer_count)
    : id(record_id),
      contexts(context_count),
      peer_devices(peer_count),
      slots(std::make_unique<EndpointSlot[]>(size_t{context_count} * peer_count)) {
  for (uint32_t c = 0; c < contexts; ++c) {
    for (uint32_t p = 0; p < peer_devices; ++p) {
      EndpointSlot& s = slots[c * peer_devices + p];
      s.record = this;
      s.context = c;
      s.peer_device = p;
    }
  }
}

std::shared_ptr<const PeerSegment> SegmentRecord::peer() const noexcept {
  const SegmentView* v = view.load(std::memory_order_acquire);
  return v ? v->peer : nullptr;
}

SegmentTable::SegmentTable(uint32_t capacity) {
  const uint64_t cap = std::bit_ceil(uint64_t{capacity < 2 ? 2 : capacity});
  mask_ = cap - 1;
  index_bits_ = static_cast<unsigned>(std::countr_zero(cap));
  table_ = std::make_unique<std::atomic<SegmentRecord*>[]>(cap);
  for (uint64_t i = 0; i < cap; ++i) table_[i].store(nullptr, std::memory_order_relaxed);
  generation_.assign(cap, 0);
  for (uint64_t i = cap - 1; i >= 1; --i) free_.push_back(static_cast<uint32_t>(i));
}

SegmentTable::~SegmentTable() = default;

Result<SegmentId> SegmentTable::allocateId() {
  if (free_.empty())
    return Status::ResourceExhausted("all " + std::to_string(mask_) +
                                     " segments are open (bootstrap.max_segments)");
  const uint32_t index = free_.back();
  free_.pop_back();
  return (++generation_[index] << index_bits_) | index;
}

void SegmentTable::releaseId(SegmentId id) {
  const uint32_t index = static_cast<uint32_t>(id & mask_);
  if (index != 0) free_.push_back(index);
}

SegmentRecord* SegmentTable::publish(SegmentRecord* record) noexcept {
  return table_[record->id & mask_].exchange(record, std::memory_order_acq_rel);
}

SegmentRecord* SegmentTable::unpublish(SegmentId id) noexcept {
  SegmentRecord* r = table_[id & mask_].load(std::memory_order_acquire);
  if (r == nullptr || r->id != id) return nullptr;
  return table_[id & mask_].exchange(nullptr, std::memory_order_acq_rel);
}

}  // namespace tent::rdma
