// The poller's run-to-completion pass: drain the ring into the pending list, post
// pending slices in chains per QP within QP depth and CQ room, poll data CQs,
// handle completions (retry on another device pair, or finish), and expire
// slices past their software timeout. Nothing here blocks or allocates. A slice's
// status is accounted only once its WR can no longer touch memory (completed or
// flushed): a software timeout records TIMEOUT at once and waits for the flush.
#include "base/clock.h"
#include "base/ebr.h"
#include "datapath/datapath_context.h"
#include "datapath/direct_path.h"
#include "datapath/slice_poller.h"
#include "model/rdma_context.h"
#include "model/rdma_endpoint.h"
#include "model/slicing.h"
#include "tent/log.h"

#include <cassert>
#include <cerrno>

namespace tent::rdma {

namespace {
// A counter only this lcore writes: no locked read-modify-write needed.
void bumpLc(std::atomic<uint64_t>& c, uint64_t n) noexcept {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

lcore::PollResult SlicePoller::poll_lc() noexcept {
  // One read section per pass: endpoints and segment records this pass looks at
  // stay alive until it ends (the lcore's quiescent point).
  ebr::ReadSection section;
  uint64_t now = clock::engineNowNs();
  unsigned work = drainRing_lc();
  work += postPending_lc(now);
  work += pollDataCqs_lc(now);
  if (direct_) work += direct_->pollContexts(rail_contexts_);
  if ((++passes_ & 63) == 0) checkTimeouts_lc(now);
  flushFinished_lc();
  return work ? lcore::PollResult::kBusy : lcore::PollResult::kIdle;
}

unsigned SlicePoller::drainRing_lc() noexcept {
  RdmaSlice* burst[kMaxPost];
  const unsigned max = dp_.config().workers.burst;  // <= kMaxPost (the config's range)
  unsigned n = ring_->dequeueBurst_sc(burst, max);
  if (n == 0) return 0;
  for (unsigned i = 0; i < n; ++i) pushPending_lc(burst[i]);
  return n;
}

namespace {
// Rail pollers serve latency-sensitive slices earliest deadline first.
uint64_t deadlineKey(const RdmaSlice* s) noexcept {
  const uint64_t d = s->deadline_ns;
  return d ? d : UINT64_MAX;
}
}  // namespace

void SlicePoller::pushPending_lc(RdmaSlice* s) noexcept {
  // Drained from the ring, kept back by a pass, not posted (ENOMEM), or a retry.
  s->moveTo(SliceState::kPending, SliceState::kQueued, SliceState::kPending, SliceState::kStaged,
            SliceState::kPosted);
  s->next = nullptr;
  if (!pending_tail_) {
    pending_head_ = pending_tail_ = s;
    return;
  }
  const uint64_t key = kind_ == Kind::kRail ? deadlineKey(s) : 0;
  if (kind_ != Kind::kRail || deadlineKey(pending_tail_) <= key) {
    pending_tail_->next = s;  // the common case: in order (FIFO, or no deadline)
    pending_tail_ = s;
    return;
  }
  if (key < deadlineKey(pending_head_)) {
    s->next = pending_head_;
    pending_head_ = s;
    return;
  }
  RdmaSlice* at = pending_head_;  // last slice with a key <= ours
  while (at->next && deadlineKey(at->next) <= key) at = at->next;
  s->next = at->next;
  at->next = s;
}

// Puts the slices kept back by a pass (in their order) before those pushed during it:
// a plain splice on background pollers, a merge by deadline on rail pollers.
void SlicePoller::mergePending_lc(RdmaSlice* head, RdmaSlice* tail) noexcept {
  if (!head) return;
  if (kind_ != Kind::kRail || !pending_head_) {
    tail->next = pending_head_;
    if (!pending_head_) pending_tail_ = tail;
    pending_head_ = head;
    return;
  }
  RdmaSlice* other = pending_head_;
  RdmaSlice* out_head = nullptr;
  RdmaSlice* out_tail = nullptr;
  while (head || other) {
    RdmaSlice** from =
        (!other || (head && deadlineKey(head) <= deadlineKey(other))) ? &head : &other;
    RdmaSlice* s = *from;
    *from = s->next;
    s->next = nullptr;
    if (out_tail)
      out_tail->next = s;
    else
      out_head = s;
    out_tail = s;
  }
  pending_head_ = out_head;
  pending_tail_ = out_tail;
}

namespace {
void pushBack(RdmaSlice*& head, RdmaSlice*& tail, RdmaSlice* s) noexcept {
  s->next = nullptr;
  s->prev = tail;
  if (tail)
    tail->next = s;
  else
    head = s;
  tail = s;
}

void unlinkFrom(RdmaSlice*& head, RdmaSlice*& tail, RdmaSlice* s) noexcept {
  if (s->prev)
    s->prev->next = s->next;
  else if (head == s)
    head = s->next;
  if (s->next)
    s->next->prev = s->prev;
  else if (tail == s)
    tail = s->prev;
  s->next = s->prev = nullptr;
}
}  // namespace

void SlicePoller::pushInflight_lc(RdmaSlice* s) noexcept {
  pushBack(inflight_head_, inflight_tail_, s);
}

void SlicePoller::unlinkInflight_lc(RdmaSlice* s) noexcept {
  unlinkFrom(inflight_head_, inflight_tail_, s);
}

void SlicePoller::unlinkTimedOut_lc(RdmaSlice* s) noexcept {
  unlinkFrom(timed_out_head_, timed_out_tail_, s);
}

unsigned SlicePoller::postPending_lc(uint64_t now) noexcept {
  if (!pending_head_) return 0;
  staged_ = 0;
  chain_count_ = 0;
  // Walk the pending list once: slices that cannot go now keep their order. Retried
  // slices pushed during the walk land on the (new) pending list and follow them.
  RdmaSlice* keep_head = nullptr;
  RdmaSlice* keep_tail = nullptr;
  RdmaSlice* s = pending_head_;
  pending_head_ = pending_tail_ = nullptr;
  unsigned handled = 0;
  while (s) {
    RdmaSlice* next = s->next;
    Stage r = staged_ < kMaxPost ? stageSlice_lc(s, now) : Stage::kKeep;
    if (r == Stage::kKeep) {
      s->next = nullptr;
      if (keep_tail)
        keep_tail->next = s;
      else
        keep_head = s;
      keep_tail = s;
    } else {
      ++handled;  // staged, or finished / requeued: never touch `s` again here
    }
    s = next;
  }
  mergePending_lc(keep_head, keep_tail);
  postChains_lc(now);
  return handled;
}

// kStaged: in a chain for this pass; kKeep: stays pending (endpoint handshaking, no
// QP or CQ room); kGone: finished (freed) or requeued for a retry.
SlicePoller::Stage SlicePoller::stageSlice_lc(RdmaSlice* s, uint64_t now) noexcept {
  const auto& wcfg = dp_.config().workers;
  RdmaTask& task = *s->task;
  // A canceled or failing task starts no new WR; its status waits for those posted.
  if (task.cancelRequested() || task.failing()) {
    finish_lc(s, SliceResult::kCanceled);
    return Stage::kGone;
  }
  // `now` was read at the start of the pass: a slice enqueued since is younger than it.
  if (now > s->enqueue_ns && now - s->enqueue_ns > uint64_t{wcfg.slice_timeout_ms} * 1000000) {
    bumpLc(counters_.slice_timeouts, 1);
    finish_lc(s, SliceResult::kTimeout);
    return Stage::kGone;
  }
  // Its device went down since it was routed: another one, or FAILED without one.
  if (dp_.context(s->local_device).down()) {
    failOrRetry_lc(s, now);
    return Stage::kGone;
  }
  RdmaEndPoint* ep = nullptr;
  auto found = dp_.lookup(s->local_device, s->segment, s->peer_device, now, &ep);
  if (found == EndpointLookup::kConnecting) {
    // A retry (the fabric failed this slice: its peer did not answer within the
    // provider's retry budget) does not wait for a new endpoint while the peer's control
    // session answers nothing either (a partition): it moves on, and the task ends
    // FAILED within the retry budgets instead of TIMEOUT at slice_timeout_ms. A first
    // attempt waits: the session may be catching up (a link that just came back).
    if (s->retries == 0 || !dp_.segmentSlow(s->segment)) return Stage::kKeep;
    failOrRetry_lc(s, now);
    return Stage::kGone;
  }
  if (found != EndpointLookup::kReady) {
    failOrRetry_lc(s, now);
    return Stage::kGone;
  }
  std::span<fabric::QueuePair* const> qps = ep->qpsFor(posting_index_);
  if (qps.empty()) return forward_lc(s);  // a retry routed it to another poller's endpoint
  RdmaContext& ctx = ep->context();
  if (cq_inflight_[ctx.index()] + staged_ >= ctx.dataCq(posting_index_)->depth())
    return Stage::kKeep;
  // A QP of ours on this endpoint with room, counting WRs staged this pass.
  const uint32_t n = static_cast<uint32_t>(qps.size());
  for (uint32_t k = 0; k < n; ++k) {
    fabric::QueuePair* qp = qps[(rr_ + k) % n];
    Chain* chain = nullptr;
    for (uint32_t c = 0; c < chain_count_; ++c)
      if (chains_[c].qp == qp) chain = &chains_[c];
    uint32_t planned = chain ? chain->count : 0;
    if (qp->outstanding() + planned >= qp->maxSendWr()) continue;
    if (!chain) {
      if (chain_count_ == kMaxChains) return Stage::kKeep;
      chain = &chains_[chain_count_++];
      *chain = Chain{qp, &ctx, nullptr, nullptr, 0};
    }
    fabric::Sge& sge = sges_[staged_];
    fabric::SendWr& wr = wrs_[staged_++];
    // s->length <= the max message size (submitWorker), so 32 bits hold it.
    sge = fabric::Sge{s->source_addr, static_cast<uint32_t>(s->length), s->lkey};
    wr = fabric::SendWr{
        reinterpret_cast<uint64_t>(s), s->opcode, true, 1, &sge, s->target_addr, s->rkey, nullptr};
    if (chain->tail)
      chain->tail->next = &wr;
    else
      chain->head = &wr;
    chain->tail = &wr;
    ++chain->count;
    s->moveTo(SliceState::kStaged, SliceState::kPending);
    s->endpoint = ep;
    s->qp_index = (rr_ + k) % n;
    rr_++;
    return Stage::kStaged;
  }
  return Stage::kKeep;
}

SlicePoller::Stage SlicePoller::forward_lc(RdmaSlice* s) noexcept {
  if (!dp_.enqueue(*s->task, s)) return Stage::kKeep;  // its ring is full: try next pass
  bumpLc(released_, 1);                                // the other poller holds it now
  return Stage::kGone;
}

void SlicePoller::postChains_lc(uint64_t now) noexcept {
  for (uint32_t c = 0; c < chain_count_; ++c) {
    Chain& chain = chains_[c];
    const fabric::SendWr* bad = nullptr;
    const uint64_t posted = clock::engineNowNs();  // the post itself, not the start of the pass
    int rc = chain.qp->postSend(chain.head, &bad);
    for (const fabric::SendWr* wr = chain.head; wr; wr = wr->next) {
      auto* s = reinterpret_cast<RdmaSlice*>(wr->wr_id);
      if (rc != 0 && wr == bad) {
        // The rest of the chain was not posted: requeue (ENOMEM) or retry elsewhere.
        for (const fabric::SendWr* r = wr; r; r = r->next) {
          auto* rs = reinterpret_cast<RdmaSlice*>(r->wr_id);
          RdmaEndPoint* ep = rs->endpoint;
          rs->endpoint = nullptr;
          if (rc == ENOMEM) {
            pushPending_lc(rs);
          } else {  // the QP left RTS (reset under us): retire and retry elsewhere
            if (ep) dp_.requestReset(ep);
            failOrRetry_lc(rs, now);
          }
        }
        break;
      }
      s->moveTo(SliceState::kPosted, SliceState::kStaged);
      s->post_ns = posted;
      ++cq_inflight_[chain.context->index()];
      pushInflight_lc(s);
      bumpLc(counters_.slices_posted, 1);
    }
  }
  chain_count_ = 0;
  staged_ = 0;
}

unsigned SlicePoller::pollDataCqs_lc(uint64_t now) noexcept {
  fabric::WorkCompletion wc[kPollBatch];
  unsigned total = 0;
  for (size_t i = 0; i < cq_inflight_.size(); ++i) {
    if (cq_inflight_[i] == 0) continue;
    if (dp_.context(i).dead()) {
      total += failDead_lc(static_cast<uint32_t>(i));
      continue;
    }
    int n = dp_.context(i).dataCq(posting_index_)->poll(wc, kPollBatch);
    if (n < 0) {
      TENT_DLOG(kEngine, "data CQ overflow on context %zu", i);
      continue;
    }
    if (n > 0) now = clock::engineNowNs();  // completion time: after the poll that returned them
    for (int k = 0; k < n; ++k) {
      auto* s = reinterpret_cast<RdmaSlice*>(wc[k].wr_id);
      --cq_inflight_[i];
      complete_lc(s, wc[k].status, now);
    }
    total += static_cast<unsigned>(n);
  }
  return total;
}

void SlicePoller::complete_lc(RdmaSlice* s, fabric::WcStatus status, uint64_t now) noexcept {
  const auto& wcfg = dp_.config().workers;
  if (s->in(SliceState::kTimedOut)) {  // its task is failing with TIMEOUT: account it, never retry
    unlinkTimedOut_lc(s);
    if (s->endpoint) s->endpoint->noteCompletion(status);
    finish_lc(s,
              status == fabric::WcStatus::kSuccess ? SliceResult::kSuccess : SliceResult::kTimeout);
    return;
  }
  assert(s->in(SliceState::kPosted));
  unlinkInflight_lc(s);
  RdmaContext& ctx = dp_.context(s->local_device);
  if (s->endpoint) s->endpoint->noteCompletion(status);
  if (status == fabric::WcStatus::kSuccess) {
    ctx.recordSliceSuccess();
    bumpLc(counters_.slices_completed, 1);
    bumpLc(counters_.bytes, s->length);
    finish_lc(s, SliceResult::kSuccess);
    return;
  }
  TENT_DLOG(kEngine, "slice error %d on context %u", static_cast<int>(status), s->local_device);
  bumpLc(counters_.slice_errors, 1);
  ctx.recordSliceError(wcfg.device_error_threshold, uint64_t{wcfg.device_pause_ms} * 1000000, now);
  if (s->endpoint) dp_.requestReset(s->endpoint);
  failOrRetry_lc(s, now);
}

// A dead device completes nothing, not even a flush: the slices posted there fail
// here, on the lcore that owns them (no retry: what the WR did is unknown). Slices
// already timed out wait for no completion either: checkTimeouts_lc keeps them on
// the timed-out list, and they finish with their TIMEOUT here.
unsigned SlicePoller::failDead_lc(uint32_t context) noexcept {
  unsigned n = 0;
  for (RdmaSlice* s = inflight_head_; s != nullptr;) {
    RdmaSlice* next = s->next;
    if (s->local_device == context) {
      unlinkInflight_lc(s);
      --cq_inflight_[context];
      if (s->endpoint) dp_.requestReset(s->endpoint);
      bumpLc(counters_.slice_errors, 1);
      bumpLc(counters_.dead_device_failures, 1);
      s->task->recordError(TransferState::FAILED);
      finish_lc(s, SliceResult::kFailed);
      ++n;
    }
    s = next;
  }
  for (RdmaSlice* s = timed_out_head_; s != nullptr;) {
    RdmaSlice* next = s->next;
    if (s->local_device == context) {
      unlinkTimedOut_lc(s);
      --cq_inflight_[context];
      finish_lc(s, SliceResult::kTimeout);
      ++n;
    }
    s = next;
  }
  // Nothing else of ours is posted there; what is left was counted for the same WRs.
  cq_inflight_[context] = 0;
  return n;
}

void SlicePoller::failOrRetry_lc(RdmaSlice* s, uint64_t now) noexcept {
  const auto& wcfg = dp_.config().workers;
  bool canceled = s->task->cancelRequested();
  if (canceled || s->task->failing() || s->retries >= wcfg.max_slice_retries) {
    finish_lc(s, canceled ? SliceResult::kCanceled : SliceResult::kFailed);
    return;
  }
  ++s->retries;
  bumpLc(counters_.slice_retries, 1);
  if (!dp_.routeSlice(*s, now)) {
    finish_lc(s, SliceResult::kFailed);
    return;
  }
  pushPending_lc(s);
}

void SlicePoller::finish_lc(RdmaSlice* s, SliceResult result) noexcept {
  if (!dp_.accountSlice(s, result)) {  // a task's own slice: not ours to touch any more
    bumpLc(released_, 1);
    return;
  }
  finished_[finished_count_++] = s;
  if (finished_count_ == kFinishBatch) flushFinished_lc();
}

void SlicePoller::flushFinished_lc() noexcept {
  if (finished_count_ == 0) return;
  dp_.slicePool().releaseBurst(finished_.data(), finished_count_);
  bumpLc(released_, finished_count_);
  finished_count_ = 0;
}

void SlicePoller::checkTimeouts_lc(uint64_t now) noexcept {
  uint64_t limit = uint64_t{dp_.config().workers.slice_timeout_ms} * 1000000;
  // The in-flight list is in post order: only its head can be the oldest.
  while (inflight_head_ && now > inflight_head_->post_ns && now - inflight_head_->post_ns > limit) {
    RdmaSlice* s = inflight_head_;
    unlinkInflight_lc(s);
    bumpLc(counters_.slice_timeouts, 1);
    // The task fails with TIMEOUT, published once its WRs drain: the reset flushes this
    // one, and its completion (complete_lc) accounts the slice.
    s->task->recordError(TransferState::TIMEOUT);
    s->moveTo(SliceState::kTimedOut, SliceState::kPosted);
    pushBack(timed_out_head_, timed_out_tail_, s);
    if (s->endpoint) dp_.requestReset(s->endpoint);
  }
}

}  // namespace tent::rdma
