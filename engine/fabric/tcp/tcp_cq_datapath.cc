// The tcp provider's CQ: push (service thread) and poll (any thread). Lock-free, no
// allocation; no syscall but a yield while a preempted poller holds a cell the
// producer needs.
#include <sched.h>

#include "base/cpu_relax.h"
#include "fabric/tcp/tcp_cq.h"

namespace tent::fabric::tcp {

// The holder is between two statements of claim()/handBack() and depends on nobody,
// so it always gets there; after a short spin we yield, because on a small,
// oversubscribed machine it may have been preempted (as soft's NIC spinlock does).
void CqCore::waitForCell(const Cell& cell, uint64_t pos) noexcept {
  constexpr unsigned kSpinsBeforeYield = 64;
  unsigned spins = 0;
  while (cell.seq.load(std::memory_order_acquire) != pos) {
    if (++spins < kSpinsBeforeYield) {
      cpuRelax();
    } else {
      // datapath-lint: allow(blocking) a poller preempted while it holds the cell; rare
      sched_yield();
    }
  }
}

bool CqCore::push(const Cqe& cqe) noexcept {
  // Counted before a poller can see the completion (the ring's release orders it).
  QpWords& table = cqe.recv ? *recv_words_ : *words_;
  table[cqe.qp_slot].fetch_add(uint64_t{1} << 32, std::memory_order_relaxed);
  uint64_t pos = enqueue_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const uint64_t seq = cell.seq.load(std::memory_order_acquire);
    const int64_t dif = static_cast<int64_t>(seq - pos);
    if (dif == 0) {
      if (enqueue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cell.data = cqe;
        cell.seq.store(pos + 1, std::memory_order_release);
        return true;
      }
    } else if (dif < 0) {
      // The cell still holds the entry one lap back. If a poller has taken that entry
      // (dequeue_ is past it) it is copying it out and gives the cell back next: the
      // ring is not full, wait for the cell. Admission counts entries, and a poller's
      // retire() can release send-queue slots while another poller, preempted between
      // taking and giving back, still holds an older cell.
      if (pos - dequeue_.load(std::memory_order_acquire) <= mask_) {
        waitForCell(cell, pos);
        continue;
      }
      table[cqe.qp_slot].fetch_sub(uint64_t{1} << 32, std::memory_order_relaxed);
      overflowed_.store(true, std::memory_order_release);
      return false;
    } else {
      pos = enqueue_.load(std::memory_order_relaxed);
    }
  }
}

bool CqCore::claim(Claim* out) noexcept {
  uint64_t pos = dequeue_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const uint64_t seq = cell.seq.load(std::memory_order_acquire);
    const int64_t dif = static_cast<int64_t>(seq - (pos + 1));
    if (dif == 0) {
      if (dequeue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        out->pos = pos;
        out->cqe = cell.data;
        return true;
      }
    } else if (dif < 0) {
      return false;
    } else {
      pos = dequeue_.load(std::memory_order_relaxed);
    }
  }
}

void CqCore::handBack(const Claim& claim) noexcept {
  cells_[claim.pos & mask_].seq.store(claim.pos + mask_ + 1, std::memory_order_release);
}

bool CqCore::retire(const Cqe& c) noexcept {
  std::atomic<uint64_t>& word = (c.recv ? *recv_words_ : *words_)[c.qp_slot];
  uint64_t cur = word.load(std::memory_order_acquire);
  for (;;) {
    if (QpWords::generation(cur) != c.qp_gen) return false;
    uint32_t released = QpWords::released(cur);
    const uint32_t next = c.seq + 1;
    // Two pollers may retire completions of one QP out of order: keep the later one.
    if (static_cast<int32_t>(next - released) > 0) released = next;
    const uint64_t want = QpWords::make(c.qp_gen, QpWords::unpolled(cur) - 1, released);
    if (word.compare_exchange_weak(cur, want, std::memory_order_acq_rel,
                                   std::memory_order_acquire)) {
      return true;
    }
  }
}

int CqCore::poll(WorkCompletion* wc, int max) noexcept {
  if (overflowed_.load(std::memory_order_acquire)) return -1;
  int n = drain(wc, max);
  // Nothing yet: move the bytes of this CQ's QPs ourselves (caller-side progress) rather
  // than wait for the service thread to be scheduled, and look again.
  if (n == 0 && max > 0 && progress()) n = drain(wc, max);
  return n;
}

int CqCore::drain(WorkCompletion* wc, int max) noexcept {
  int n = 0;
  Claim c;
  while (n < max && claim(&c)) {
    handBack(c);
    if (retire(c.cqe)) {
      wc[n++] = c.cqe.wc;
    } else {
      reserved.fetch_sub(1, std::memory_order_acq_rel);  // a destroyed QP's entry comes back
    }
  }
  return n;
}

}  // namespace tent::fabric::tcp
