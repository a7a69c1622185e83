// Soft NIC datapath, completion side: the link model and CQ polling.
//
// Nothing runs in the background. Whoever takes the device lock (a post publishing
// WRs, a poll, a counter read) first runs the link model up to "now": the WRs whose
// bytes have crossed the link by then get their completion time (crossing time +
// latency + injected delay, never before the previous WR of their QP). A poll then
// hands out the completions that are visible, oldest first.
#include <cmath>
#include <cstdint>

#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

namespace {
uint64_t ceilNs(double t) noexcept {
  // Tolerate rounding noise of the model's arithmetic; never report early.
  return static_cast<uint64_t>(std::ceil(t - 1e-6));
}
}  // namespace

// ---- link model ---------------------------------------------------------------------

void DeviceState::advanceLocked(double t) noexcept {
  PortModel& p = port;
  if (p.bytes_per_ns <= 0 || t <= p.now_ns) return;  // unlimited links hold nothing in flight
  while (p.active_count > 0) {
    PortClass& k = p.servedClass();
    SoftQp* next = k.active;
    for (SoftQp* q = k.active->port_next_; q != nullptr; q = q->port_next_) {
      if (q->tag_ < next->tag_) next = q;
    }
    double dt = (next->tag_ - k.vtime) * k.active_count / p.bytes_per_ns;
    if (dt < 0) dt = 0;
    if (p.now_ns + dt > t) {  // nothing more finishes before t: serve the class up to t
      k.vtime += (t - p.now_ns) * p.bytes_per_ns / k.active_count;
      p.busy_ns += t - p.now_ns;
      p.now_ns = t;
      return;
    }
    p.now_ns += dt;
    p.busy_ns += dt;
    k.vtime = next->tag_;
    next->finishHeadLocked(p.now_ns);
  }
  p.now_ns = t;
}

void DeviceState::activateLocked(SoftQp& qp) noexcept {
  PortClass& k = port.classes[qp.service_class_];
  qp.tag_ = k.vtime + static_cast<double>(SoftQp::chargedBytes(qp.slot(qp.transmitted_)));
  qp.port_prev_ = nullptr;
  qp.port_next_ = k.active;
  if (k.active != nullptr) k.active->port_prev_ = &qp;
  k.active = &qp;
  qp.in_port_ = true;
  ++k.active_count;
  ++port.active_count;
}

void DeviceState::deactivateLocked(SoftQp& qp) noexcept {
  PortClass& k = port.classes[qp.service_class_];
  if (qp.port_prev_ != nullptr) qp.port_prev_->port_next_ = qp.port_next_;
  if (qp.port_next_ != nullptr) qp.port_next_->port_prev_ = qp.port_prev_;
  if (k.active == &qp) k.active = qp.port_next_;
  qp.port_prev_ = qp.port_next_ = nullptr;
  qp.in_port_ = false;
  --port.active_count;
  if (--k.active_count == 0) k.vtime = 0;  // idle: virtual time restarts (tags are relative)
}

void DeviceState::setPortUp(bool up) noexcept {
  SpinGuard g(lock);
  port_up.store(up, std::memory_order_release);
  if (up) return;
  const uint64_t now = core->now();
  advanceLocked(static_cast<double>(now));
  for (PortClass& k : port.classes) {
    while (k.active != nullptr) k.active->failInFlightLocked(WcStatus::kRetryExceeded, now);
  }
}

// ---- per-QP completion bookkeeping ----------------------------------------------------

void SoftQp::completeSlotLocked(WrSlot& s, double at) noexcept {
  PortModel& p = dev_->port;
  uint64_t visible = ceilNs(at) + p.latency_ns + s.extra_delay_ns;
  if (visible < last_visible_) visible = last_visible_;  // a QP completes in order
  s.visible_ns = visible;
  last_visible_ = visible;
  ++p.wrs;
  p.bytes += chargedBytes(s);
}

void SoftQp::finishHeadLocked(double at) noexcept {
  completeSlotLocked(slot(transmitted_), at);
  ++transmitted_;
  if (transmitted_ < tail_.load(std::memory_order_relaxed)) {
    tag_ = dev_->port.classes[service_class_].vtime +
           static_cast<double>(chargedBytes(slot(transmitted_)));
  } else {
    dev_->deactivateLocked(*this);
  }
}

void SoftQp::flushLocked(uint64_t now) noexcept {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  for (uint64_t i = delivered_; i < tail; ++i) {
    WrSlot& s = slot(i);
    const bool in_flight = i >= transmitted_;
    if (!in_flight && s.visible_ns <= now) continue;  // its CQE is already in the CQ
    s.status = WcStatus::kFlushed;
    s.visible_ns = now;  // every WR before it is visible by now: order holds
    if (in_flight) ++dev_->port.wrs;
  }
  if (last_visible_ > now) last_visible_ = now;
  if (in_port_) dev_->deactivateLocked(*this);
  transmitted_ = tail;
}

void SoftQp::failInFlightLocked(WcStatus status, uint64_t now) noexcept {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  for (uint64_t i = transmitted_; i < tail; ++i) {
    WrSlot& s = slot(i);
    if (i == transmitted_ && s.status == WcStatus::kSuccess) {
      s.status = status;
    } else if (s.status == WcStatus::kSuccess) {
      s.status = WcStatus::kFlushed;
    }
    s.extra_delay_ns = 0;
    completeSlotLocked(s, static_cast<double>(now));
  }
  if (in_port_) dev_->deactivateLocked(*this);
  transmitted_ = tail;
  setStateLocked(QpState::kError);
}

// A success is final only if the responder was still there when the WR completed
// (its ACK came back). The copy already happened at post, so this is where a
// responder that died (or closed, or left RTR/RTS) while the WR was on the wire is
// noticed: as on RC, the first unacknowledged WR completes with retry-exceeded after
// the retry budget, every later one is flushed behind it, and the QP goes to ERR. A
// WRITE to a dead peer is never reported delivered.
//
// The responder is checked (a few loads of its control file) whenever due completions
// are not yet covered by `responder_seen_ns_`, the latest time it was seen up. A WR
// that completed before the death but is polled only after it fails too: without a
// record of the moment of death the emulation cannot prove the ACK came first, so it
// is stricter than a NIC here, never more lenient (docs/fabric.md).
void SoftQp::confirmDueLocked(uint64_t now) noexcept {
  if (delivered_ == transmitted_) return;
  if (slot(delivered_).visible_ns > now) return;                        // nothing due yet
  if (slot(transmitted_ - 1).visible_ns <= responder_seen_ns_) return;  // all confirmed
  if (responderUp()) {
    responder_seen_ns_ = now;
    return;
  }
  uint64_t first = delivered_;
  while (first < transmitted_ && (slot(first).visible_ns <= responder_seen_ns_ ||
                                  slot(first).status != WcStatus::kSuccess)) {
    ++first;
  }
  if (first == transmitted_) return;
  failFromLocked(first, slot(first).visible_ns + dev_->core->retry_budget_ns);
}

void SoftQp::failFromLocked(uint64_t first, uint64_t visible) noexcept {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  for (uint64_t i = first; i < tail; ++i) {
    WrSlot& s = slot(i);
    if (s.status == WcStatus::kSuccess)
      s.status = i == first ? WcStatus::kRetryExceeded : WcStatus::kFlushed;
    if (i >= transmitted_) ++dev_->port.wrs;  // never crossed the link
    if (s.visible_ns < visible || i >= transmitted_) s.visible_ns = visible;
    visible = s.visible_ns;  // keeps the QP's completions in order
  }
  last_visible_ = visible;
  if (in_port_) dev_->deactivateLocked(*this);
  transmitted_ = tail;
  setStateLocked(QpState::kError);
}

// ---- CQ ------------------------------------------------------------------------------

void CqCore::confirmDueLocked(uint64_t now) noexcept {
  for (SoftQp* q = pending; q != nullptr; q = q->cq_next_) q->confirmDueLocked(now);
}

void CqCore::addLocked(SoftQp& qp) noexcept {
  qp.cq_prev_ = nullptr;
  qp.cq_next_ = pending;
  if (pending != nullptr) pending->cq_prev_ = &qp;
  pending = &qp;
  qp.in_cq_ = true;
  // Only changed under the device lock: a plain store, no read-modify-write.
  pending_count.store(pending_count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void CqCore::removeLocked(SoftQp& qp) noexcept {
  if (qp.cq_prev_ != nullptr) qp.cq_prev_->cq_next_ = qp.cq_next_;
  if (qp.cq_next_ != nullptr) qp.cq_next_->cq_prev_ = qp.cq_prev_;
  if (pending == &qp) pending = qp.cq_next_;
  qp.cq_prev_ = qp.cq_next_ = nullptr;
  qp.in_cq_ = false;
  pending_count.store(pending_count.load(std::memory_order_relaxed) - 1, std::memory_order_release);
}

uint32_t CqCore::countDueLocked(uint64_t now, uint32_t cap) const noexcept {
  uint32_t n = 0;
  for (const SoftQp* q = pending; q != nullptr; q = q->cq_next_) {
    for (uint64_t i = q->delivered_; i < q->transmitted_; ++i) {
      const WrSlot& s = q->slot(i);
      if (s.visible_ns > now || !q->copied(s)) break;  // in order: the rest of this QP is later
      if (SoftQp::makesCqe(s) && ++n >= cap) return n;
    }
  }
  return n;
}

SoftQp* CqCore::earliestDueLocked(uint64_t now) const noexcept {
  SoftQp* best = nullptr;
  uint64_t best_visible = UINT64_MAX;
  for (SoftQp* q = pending; q != nullptr; q = q->cq_next_) {
    if (q->delivered_ == q->transmitted_) continue;
    const uint64_t v = q->slot(q->delivered_).visible_ns;
    if (v <= now && v < best_visible && q->copied(q->slot(q->delivered_))) {
      best = q;
      best_visible = v;
    }
  }
  return best;
}

bool CqCore::anyLaterThanLocked(uint64_t now) const noexcept {
  for (const SoftQp* q = pending; q != nullptr; q = q->cq_next_) {
    if (q->transmitted_ < q->tail_.load(std::memory_order_relaxed)) return true;
    // Completion times grow along a QP: its last transmitted WR is its latest.
    if (q->transmitted_ > q->delivered_ && q->slot(q->transmitted_ - 1).visible_ns > now)
      return true;
  }
  return false;
}

uint64_t CqCore::pollTimeLocked() noexcept {
  DeviceState& d = *dev;
  if (d.port.bytes_per_ns > 0 || d.core->injectedClock() || anyLaterThanLocked(d.seen_now)) {
    const uint64_t now = d.core->now();
    if (now > d.seen_now) d.seen_now = now;
  }
  return d.seen_now;
}

int CqCore::poll(WorkCompletion* wc, int max) noexcept {
  if (overflowed.load(std::memory_order_relaxed)) return -1;
  if (dev->dead.load(std::memory_order_relaxed)) return 0;  // a fatal error: nothing completes
  if (max <= 0) return 0;
  const bool sends = pending_count.load(std::memory_order_acquire) != 0;
  if (!sends && recv_count.load(std::memory_order_acquire) == 0) return 0;
  DeviceState& d = *dev;
  SpinGuard g(d.lock);
  // Receives first: their sender's completion (an ACK) comes after them on a NIC too.
  const int received = recv_qps != nullptr ? pollRecvLocked(wc, max) : 0;
  if (!sends || received == max) return received;
  wc += received;
  max -= received;
  const uint64_t now = pollTimeLocked();
  d.advanceLocked(static_cast<double>(now));
  confirmDueLocked(now);
  // Every completion visible by now sits in the CQ: more than `depth` is an overflow.
  if (countDueLocked(now, depth + 1) > depth) {
    overflowed.store(true, std::memory_order_relaxed);
    return -1;
  }
  int n = 0;
  while (n < max) {
    SoftQp* q = earliestDueLocked(now);
    if (q == nullptr) break;
    const uint64_t seq = q->delivered_++;
    const WrSlot& s = q->slot(seq);
    if (SoftQp::makesCqe(s)) {
      WorkCompletion& c = wc[n++];
      c.wr_id = s.wr_id;
      c.status = s.status;
      c.opcode = s.opcode;
      c.qp_num = q->qp_num_;
      c.byte_len = s.status == WcStatus::kSuccess ? static_cast<uint32_t>(s.bytes) : 0;
      c.vendor_err = 0;
      // Its send-queue slot and those of the unsignaled WRs before it are free now.
      q->released_.store(seq + 1, std::memory_order_release);
    }
    if (q->delivered_ == q->tail_.load(std::memory_order_relaxed)) removeLocked(*q);
  }
  return received + n;
}

}  // namespace tent::fabric::soft
