// BufferUse: how many tasks use one registered local buffer, and whether it is being
// unregistered. A task pins the buffer its source lies in when it is resolved and
// unpins it when it ends (terminal means drained: no WR of it can touch the memory);
// unregistration succeeds only when no task holds a pin.
//
// The count and the "retired" mark share one atomic word, so a pin and a retirement
// cannot both succeed: whichever read-modify-write comes first in the word's order
// wins, the other sees it (a pin after the mark fails and gives its count back; a
// retirement after a pin sees the count). One RMW per task at start and one at its
// end, no lock; the cancel flag sits on its own cache line, read by pollers per
// slice, written only by an unregistration that cancels.
#pragma once

#include <atomic>
#include <cstdint>

namespace tent::rdma {

class BufferUse {
 public:
  // ---- datapath ----
  // A task starts using the buffer. False when it is unregistered or being
  // unregistered: the task must not start.
  bool pin() noexcept {
    const uint64_t before = word_.fetch_add(1, std::memory_order_acq_rel);
    if ((before & kRetired) == 0) return true;
    word_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  // The task ended: none of its WRs can touch the memory any more.
  void unpin() noexcept { word_.fetch_sub(1, std::memory_order_acq_rel); }
  // An unregistration asked the tasks using the buffer to stop (cancel).
  bool cancelRequested() const noexcept { return cancel_.load(std::memory_order_acquire); }

  // ---- control path ----
  // Retires the buffer if no task uses it: returns 0 then. Otherwise returns how many
  // tasks use it and changes nothing. kRetiredAlready when another call retired it.
  uint64_t tryRetire() noexcept {
    uint64_t expected = 0;
    if (word_.compare_exchange_strong(expected, kRetired, std::memory_order_acq_rel)) return 0;
    return (expected & kRetired) ? kRetiredAlready : expected;
  }
  // Retires the buffer and asks its tasks to cancel, whatever uses it: new pins fail
  // from here on. False when another call retired it already (nothing changed).
  bool retireAndCancel() noexcept {
    if (word_.fetch_or(kRetired, std::memory_order_acq_rel) & kRetired) return false;
    cancel_.store(true, std::memory_order_release);
    return true;
  }
  // Undoes a retirement that could not finish: the buffer is usable again.
  void unretire() noexcept {
    cancel_.store(false, std::memory_order_release);
    word_.fetch_and(~kRetired, std::memory_order_acq_rel);
  }
  // Tasks using the buffer (a pin that is failing may count for an instant).
  uint64_t users() const noexcept { return word_.load(std::memory_order_acquire) & ~kRetired; }
  bool retired() const noexcept { return word_.load(std::memory_order_acquire) & kRetired; }

  static constexpr uint64_t kRetiredAlready = ~uint64_t{0};

 private:
  static constexpr uint64_t kRetired = uint64_t{1} << 63;
  alignas(64) std::atomic<uint64_t> word_{0};
  alignas(64) std::atomic<bool> cancel_{false};
};

}  // namespace tent::rdma
