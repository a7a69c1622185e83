#include "datapath/slice_poller.h"

#include "datapath/datapath_context.h"
#include "model/rdma_context.h"

namespace tent::rdma {

// datapath-lint: allow(setup) names the poller before it is attached to an lcore
SlicePoller::SlicePoller(DatapathContext& datapath, DirectPath* direct, uint32_t posting_index,
                         Kind kind, size_t lcore)
    : dp_(datapath), direct_(direct), posting_index_(posting_index), kind_(kind), lcore_(lcore) {
  name_ = (kind == Kind::kRail ? "rail" : "background") + std::string("#") +
          std::to_string(posting_index);
}

SlicePoller::~SlicePoller() = default;

// datapath-lint: allow(setup) builds the ring before the poller is attached
Status SlicePoller::init(uint32_t ring_size, uint32_t contexts) {
  static std::atomic<uint32_t> serial{0};
  auto ring = lcore::SlotRing<RdmaSlice>::create("tent_sp" + std::to_string(serial.fetch_add(1)),
                                                 ring_size);
  if (!ring.ok()) return ring.status().withContext("poller ring");
  ring_ = std::move(ring).value();
  cq_inflight_.assign(contexts, 0);
  return Status::OK();
}

unsigned SlicePoller::enqueue(RdmaSlice* const* slices, unsigned n) noexcept {
  // The ring counts its claim before it stores the slots, so an lcore deciding whether
  // to sleep sees the slices (needsPolling_lc), and publishes the slices' contents
  // (lcore/slot_ring.h).
  const unsigned taken = ring_->enqueueBurst(slices, n);
  if (taken != 0) wakeLcore();  // after the ring write: a sleeping lcore wakes (doorbell.h)
  return taken;
}

// Nothing held and nothing posted: only enqueue() brings work, and it rings. A rail
// poller also naps while a direct lane of its contexts is in use (it reaps abandoned
// and expired lanes, with or without direct.poll_by_rail). A lane acquired while the
// rail lcore blocks is reaped by its caller's polls; an abandoned one rings the rail
// lcore (DirectPath::abandon).
bool SlicePoller::needsPolling_lc() const noexcept {
  if (heldSlices() != 0) return true;
  for (uint32_t n : cq_inflight_)
    if (n != 0) return true;
  if (kind_ != Kind::kRail) return false;
  for (const RdmaContext* ctx : rail_contexts_)
    if (ctx->lanesInUse() != 0) return true;
  return false;
}

}  // namespace tent::rdma
