// Direct path datapath: trySubmitDirect() posts a latency-sensitive task on idle
// direct lanes (all lanes acquired before any post), and direct completions are
// handled exactly once by whoever polls the direct CQ (the caller through
// getTransferStatus(), or the context's rail poller - with poll_by_rail for lanes
// posted longer than rail_grace_us ago, and always for lanes whose caller may have
// stopped polling: canceled or failing tasks, freed batches, expired WRs). A failed piece retries
// on the worker path within workers.max_slice_retries, as a worker slice does.
#include <algorithm>
#include <bit>

#include "base/clock.h"
#include "datapath/datapath_context.h"
#include "datapath/direct_path.h"
#include "datapath/slice_poller.h"
#include "model/rdma_context.h"
#include "model/rdma_endpoint.h"
#include "model/slicing.h"
#include "tent/log.h"

namespace tent::rdma {

namespace {

thread_local uint32_t tls_direct_rr = 0;
thread_local uint32_t tls_status_polls = 0;

// No default member initializers: a plan's 64 lanes stay unwritten until plan_()
// fills the ones it uses (zeroing them all cost a 2 KiB memset per submit).
struct Lane {
  RdmaContext* ctx;
  RdmaEndPoint* ep;
  RdmaSlice* slice;
  int slot;
  bool quota;
  bool poster;  // holds the direct QP's single-poster token
};

}  // namespace

struct DirectPlan {
  static constexpr size_t kMax = kMaxDevices;
  Lane lanes[kMax];     // [0, filled) are written
  uint32_t parts = 0;   // lanes the request needs
  uint32_t filled = 0;  // lanes plan_() has written (== parts once it accepted)
};

// Undoes everything a plan holds: quotas, lanes, slices. Nothing was posted.
static void releasePlan(const DatapathContext& dp, RdmaTask& task, DirectPlan& plan) noexcept {
  for (uint32_t p = 0; p < plan.filled; ++p) {
    Lane& l = plan.lanes[p];
    if (l.poster) l.ep->releaseDirectPoster();
    if (l.quota) l.ep->returnDirectQuota();
    if (l.slot >= 0) l.ctx->releaseDirectLane(&task);
    if (l.slice) dp.slicePool().release(l.slice);
  }
  plan.filled = 0;
}

DirectDecline DirectPath::trySubmitDirect(RdmaTask& task, uint64_t now) noexcept {
  // Admitted (mode and size cap) when the request was resolved: admission().
  // (attempted is not counted here: it is succeeded + the declines, fillStats())
  DirectPlan plan;
  DirectDecline d = plan_(task, now, plan);
  if (d == DirectDecline::kAccepted) d = acquire_(task, plan);
  if (d != DirectDecline::kAccepted) {
    releasePlan(dp_, task, plan);
    countDecline(d);
    return d;
  }
  post_(task, now, plan);
  counters_.succeeded.fetch_add(1, std::memory_order_relaxed);
  return DirectDecline::kAccepted;
}

// Chooses distinct local devices and their endpoints: min(eligible rank-0 devices,
// ceil(length / block_size)) slices, the target device by the worker path's rule.
DirectDecline DirectPath::plan_(RdmaTask& task, uint64_t now, DirectPlan& plan) noexcept {
  const uint8_t* candidates = task.placement;  // the request's placement (placeTask)
  const size_t n = task.placement_count;
  if (n == 0) return DirectDecline::kUnresolvable;
  const uint64_t block = dp_.config().workers.block_size;
  const uint64_t len = task.request.length;
  uint64_t wanted = block ? (len + block - 1) / block : 1;
  plan.parts = static_cast<uint32_t>(std::min<uint64_t>(n, std::max<uint64_t>(wanted, 1)));
  // One WR per lane: a piece longer than a WR may carry goes to the worker path,
  // which cuts it into slices that fit.
  if ((len + plan.parts - 1) / plan.parts > dp_.maxWrBytes()) return DirectDecline::kOverSizeCap;
  const uint32_t start = tls_direct_rr++;
  const auto& tb = task.peer->descriptor.buffers[task.target_buffer];
  for (uint32_t p = 0; p < plan.parts; ++p) {
    uint32_t local = candidates[(start + p) % n];
    uint64_t off = 0, piece = 0;
    evenSplit(len, plan.parts, p, &off, &piece);
    const auto& region = regionAt(tb, task.request.target_offset + off);
    int peer = choosePeerDevice(task.peer->same_name, local, region.rank0,
                                static_cast<uint32_t>(task.peer->descriptor.devices.size()),
                                start + p, tb.rkeys);
    if (peer < 0) return DirectDecline::kUnresolvable;
    RdmaEndPoint* ep =
        getEndpointForContextIndex(local, *task.record, static_cast<uint32_t>(peer), now);
    // No ready endpoint, or a peer without a direct QP: the worker path serves it.
    if (!ep || !ep->directQp()) return DirectDecline::kEndpointNotReady;
    plan.lanes[plan.filled++] = Lane{&dp_.context(local), ep, nullptr, -1, false, false};
  }
  return DirectDecline::kAccepted;
}

// All or nothing: every lane, every quota and every slice, before any post.
DirectDecline DirectPath::acquire_(RdmaTask& task, DirectPlan& plan) noexcept {
  for (uint32_t p = 0; p < plan.parts; ++p) {
    Lane& l = plan.lanes[p];
    l.slot = l.ctx->acquireLaneSlot(&task);
    if (l.slot < 0) return DirectDecline::kLaneBusy;
    l.quota = l.ep->tryTakeDirectQuota();
    if (!l.quota) return DirectDecline::kLaneBusy;
    // Another caller is posting on this direct QP right now (direct.qp_depth > 1):
    // never two posters on one QP; this request takes the worker path instead.
    l.poster = l.ep->tryTakeDirectPoster();
    if (!l.poster) return DirectDecline::kLaneBusy;
    l.slice = dp_.slicePool().allocate();
    if (!l.slice) return DirectDecline::kLaneBusy;
  }
  return DirectDecline::kAccepted;
}

void DirectPath::post_(RdmaTask& task, uint64_t submit_ns, DirectPlan& plan) noexcept {
  const Request& req = task.request;
  uint64_t mask = 0;
  for (uint32_t p = 0; p < plan.parts; ++p) mask |= 1ull << plan.lanes[p].ctx->index();
  task.reset(req, plan.parts);
  task.direct_contexts.store(mask, std::memory_order_relaxed);
  task.direct.store(true, std::memory_order_release);
  const auto& tb = task.peer->descriptor.buffers[task.target_buffer];
  for (uint32_t p = 0; p < plan.parts; ++p) {
    Lane& l = plan.lanes[p];
    RdmaSlice* s = l.slice;
    uint64_t off = 0, piece = 0;
    evenSplit(req.length, plan.parts, p, &off, &piece);
    // Stamped with the task's own submit time (read per task, just before its plan,
    // not at the start of the batch): the histogram and direct.timeout_ms measure this
    // WR from there, however long the batch before it took, at one clock read per task.
    const uint64_t now = submit_ns;
    // piece <= maxWrBytes() (plan_), so the SGE's 32 bits hold it.
    s->init(task, off, piece, static_cast<uint16_t>(p), now);
    s->local_device = static_cast<uint16_t>(l.ctx->index());
    s->peer_device = static_cast<uint16_t>(l.ep->peerDevice());
    s->lkey = task.local_buffer->lkeys[s->local_device];
    s->rkey = tb.rkeys[s->peer_device];
    s->endpoint = l.ep;
    s->qp_index = static_cast<uint32_t>(l.slot);
    s->post_ns = now;
    fabric::Sge sge{s->source_addr, static_cast<uint32_t>(s->length), s->lkey};
    fabric::SendWr wr{
        reinterpret_cast<uint64_t>(s), s->opcode, true, 1, &sge, s->target_addr, s->rkey, nullptr};
    l.ctx->notePosted(l.slot, now, l.ep, s);
    // Before the post: another thread may poll its completion right after it.
    s->moveTo(SliceState::kPostedDirect, SliceState::kAllocated);
    const fabric::SendWr* bad = nullptr;
    const int rc = l.ep->directQp()->postSend(&wr, &bad);
    l.ep->releaseDirectPoster();
    l.poster = false;
    if (rc == 0) continue;
    // Post failed (the QP left RTS under us): this piece takes the worker path.
    // Nothing of it was posted, so its lane, quota and timeout slot return at once.
    // A dead device's reaper may have taken the slice already (failDeadLanes).
    if (!l.ctx->releaseLaneForCompletion(&task)) continue;
    counters_.post_failures.fetch_add(1, std::memory_order_relaxed);
    l.ep->returnDirectQuota();
    dp_.requestReset(l.ep);
    fallbackSlice(task, s, now);
  }
}

unsigned DirectPath::pollContexts(const std::vector<RdmaContext*>& contexts) noexcept {
  // A lane whose caller may have stopped (abandoned, or expired) is reaped here
  // whatever the config says: progress never depends on the caller. With poll_by_rail
  // the rail poller also takes over any lane older than rail_grace_us: before that
  // its caller, if it spins, reaps it, and the rail lcore does not race it for the CQ.
  const auto& cfg = dp_.config().direct;
  const uint64_t timeout = uint64_t{cfg.timeout_ms} * 1000000;
  const uint64_t grace =
      cfg.poll_by_rail ? std::min<uint64_t>(uint64_t{cfg.rail_grace_us} * 1000, timeout) : timeout;
  const uint64_t now = clock::engineNowNs();
  unsigned n = 0;
  for (RdmaContext* ctx : contexts) {
    if (ctx->dead()) {
      n += failDeadLanes(*ctx);
      continue;
    }
    if (ctx->needsReaper(now, grace)) n += pollContext(*ctx, true);
  }
  return n;
}

// A dead device completes nothing, not even a flush: its rail poller (the one reaper
// of this context) fails the WRs posted on its lanes. Each lane goes to whichever of
// this and a late completion releases it first (claimDeadLane), so a slice is handled
// once. The task fails: no retry elsewhere, the WR's effect is unknown.
unsigned DirectPath::failDeadLanes(RdmaContext& ctx) noexcept {
  unsigned n = 0;
  for (uint32_t slot = 0; slot < ctx.laneDepth(); ++slot) {
    RdmaSlice* s = ctx.claimDeadLane(slot);
    if (s == nullptr) continue;
    RdmaTask& task = *s->task;
    s->endpoint->returnDirectQuota();
    dp_.requestReset(s->endpoint);
    counters_.completion_errors.fetch_add(1, std::memory_order_relaxed);
    counters_.dead_device_failures.fetch_add(1, std::memory_order_relaxed);
    task.recordError(TransferState::FAILED);
    abandon(task);
    dp_.finishSlice(s, SliceResult::kFailed);
    ++n;
  }
  return n;
}

unsigned DirectPath::pollTask(const RdmaTask& task) noexcept {
  uint64_t mask = task.direct_contexts.load(std::memory_order_acquire);
  // A status poll that finds nothing costs no clock read; one in 64 also expires
  // old lanes (the rail poller expires them every pass whatever callers do).
  const bool reap = (++tls_status_polls & 63) == 0;
  unsigned n = 0;
  while (mask) {
    int i = std::countr_zero(mask);
    mask &= mask - 1;
    n += pollContext(dp_.context(static_cast<size_t>(i)), reap);
  }
  return n;
}

void DirectPath::abandon(const RdmaTask& task) noexcept {
  uint64_t mask = task.direct_contexts.load(std::memory_order_acquire);
  while (mask) {
    int i = std::countr_zero(mask);
    mask &= mask - 1;
    dp_.context(static_cast<size_t>(i)).markAbandoned(&task);
    // A blocked rail lcore would see the mark only at its next timed wake-up.
    if (SlicePoller* rail = dp_.railPoller(static_cast<uint32_t>(i))) rail->wakeLcore();
  }
}

unsigned DirectPath::pollContext(RdmaContext& ctx, bool reap) noexcept {
  fabric::WorkCompletion wc[16];
  // The CQ hands each completion to exactly one poller; all that follows runs once.
  int n = ctx.directCq()->poll(wc, 16);
  if (n <= 0 && !reap) return 0;
  // After the poll: the completion time of what it returned (never before its post).
  const uint64_t now = clock::engineNowNs();
  for (int i = 0; i < n; ++i)
    completeSlice(reinterpret_cast<RdmaSlice*>(wc[i].wr_id), wc[i].status, now);
  if (reap) expire(ctx, now);
  return n > 0 ? static_cast<unsigned>(n) : 0;
}

void DirectPath::completeSlice(RdmaSlice* s, fabric::WcStatus status, uint64_t now) noexcept {
  RdmaEndPoint* ep = s->endpoint;
  RdmaContext& ctx = ep->context();
  RdmaTask* task = s->task;
  // Its lane, released here; a dead device's reaper that took it first owns the slice.
  if (!ctx.releaseLaneForCompletion(task)) return;
  uint64_t latency = now > s->post_ns ? now - s->post_ns : 0;
  size_t bucket = latency < 2 ? 0 : static_cast<size_t>(63 - std::countl_zero(latency));
  counters_.latency[std::min(bucket, DirectCounters::kBuckets - 1)].fetch_add(
      1, std::memory_order_relaxed);
  counters_.latency_sum_ns.fetch_add(latency, std::memory_order_relaxed);
  ep->returnDirectQuota();
  ep->noteCompletion(status);
  if (status == fabric::WcStatus::kSuccess) {
    counters_.bytes.fetch_add(s->length, std::memory_order_relaxed);
    dp_.finishSlice(s, SliceResult::kSuccess);
    return;
  }
  dp_.requestReset(ep);
  if (latency > uint64_t{dp_.config().direct.timeout_ms} * 1000000) {
    counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
    // Its other pieces were posted with it: past the timeout too, reaped as expired.
    task->recordError(TransferState::TIMEOUT);
    dp_.finishSlice(s, SliceResult::kTimeout);
    return;
  }
  counters_.completion_errors.fetch_add(1, std::memory_order_relaxed);
  retryOrFail(*task, s, status, now);
}

// The worker path's rule: another device pair, within workers.max_slice_retries. A
// flush is not this WR's fault (its endpoint was reset, possibly for an error of an
// unrelated data QP), so it does not use up a retry; the retry itself is a worker
// slice, whose flushes count.
void DirectPath::retryOrFail(RdmaTask& task, RdmaSlice* s, fabric::WcStatus status,
                             uint64_t now) noexcept {
  const bool canceled = task.cancelRequested();
  const bool flushed = status == fabric::WcStatus::kFlushed;
  if (canceled || task.failing() ||
      (!flushed && s->retries >= dp_.config().workers.max_slice_retries)) {
    if (!canceled) task.recordError(TransferState::FAILED);
    abandon(task);
    dp_.finishSlice(s, canceled ? SliceResult::kCanceled : SliceResult::kFailed);
    return;
  }
  if (!flushed) ++s->retries;
  counters_.retries.fetch_add(1, std::memory_order_relaxed);
  // Another device pair; without one (cannot happen: the plan found this one) the
  // pair it had. The worker path's own retries move it on from there.
  (void)dp_.routeSlice(*s, now);
  fallbackSlice(task, s, now);
}

// A direct WR past direct.timeout_ms: reset its endpoint, so the WR is flushed and its
// completion (handled above, as TIMEOUT) releases the lane and quota.
void DirectPath::expire(RdmaContext& ctx, uint64_t now) noexcept {
  RdmaEndPoint* expired[4];
  uint64_t limit = uint64_t{dp_.config().direct.timeout_ms} * 1000000;
  size_t n = ctx.expiredLanes(now, limit, expired, 4);
  for (size_t i = 0; i < n; ++i) dp_.requestReset(expired[i]);
}

RdmaEndPoint* DirectPath::getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                                     uint32_t peer_device, uint64_t now) noexcept {
  RdmaEndPoint* ep = nullptr;
  return dp_.lookup(context, segment, peer_device, now, &ep) == EndpointLookup::kReady ? ep
                                                                                       : nullptr;
}

RdmaEndPoint* DirectPath::getEndpointForContextIndex(uint32_t context, SegmentRecord& record,
                                                     uint32_t peer_device, uint64_t now) noexcept {
  RdmaEndPoint* ep = nullptr;
  return dp_.lookup(record, context, peer_device, now, &ep) == EndpointLookup::kReady ? ep
                                                                                      : nullptr;
}

void DirectPath::fallbackSlice(RdmaTask& task, RdmaSlice* s, uint64_t now) noexcept {
  s->endpoint = nullptr;
  s->enqueue_ns = now;
  if (dp_.enqueue(task, s)) return;
  task.recordError(TransferState::FAILED);
  abandon(task);
  dp_.finishSlice(s, SliceResult::kFailed);
}

}  // namespace tent::rdma
