// The tcp provider's CQ: push (service thread) and poll (any thread). Lock-free, no
// allocation, no syscall.
#include "fabric/tcp/tcp_cq.h"

namespace tent::fabric::tcp {

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
      table[cqe.qp_slot].fetch_sub(uint64_t{1} << 32, std::memory_order_relaxed);
      overflowed_.store(true, std::memory_order_release);
      return false;
    } else {
      pos = enqueue_.load(std::memory_order_relaxed);
    }
  }
}

bool CqCore::pop(Cqe* out) noexcept {
  uint64_t pos = dequeue_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const uint64_t seq = cell.seq.load(std::memory_order_acquire);
    const int64_t dif = static_cast<int64_t>(seq - (pos + 1));
    if (dif == 0) {
      if (dequeue_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        *out = cell.data;
        cell.seq.store(pos + mask_ + 1, std::memory_order_release);
        return true;
      }
    } else if (dif < 0) {
      return false;
    } else {
      pos = dequeue_.load(std::memory_order_relaxed);
    }
  }
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
  int n = 0;
  Cqe c;
  while (n < max && pop(&c)) {
    if (retire(c)) {
      wc[n++] = c.wc;
    } else {
      reserved.fetch_sub(1, std::memory_order_acq_rel);  // a destroyed QP's entry comes back
    }
  }
  return n;
}

}  // namespace tent::fabric::tcp
