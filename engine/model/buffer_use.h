// BufferUse: how many tasks use one registered local buffer, and whether it is being
// unregistered. A task pins the buffer its source lies in when it is resolved and
// unpins it when it ends (terminal means drained: no WR of it can touch the memory);
// unregistration succeeds only when no task holds a pin.
//
// Pins and unpins are counted apart, each on its own cache line: the thread that
// resolves a request (the caller) pins, and the thread that ends the task (on the
// worker path, the lcore) unpins, so one shared count made its line cross between the
// two cores twice per transfer. Users are pins - unpins. The "retired" mark shares
// the pin word, so a pin and a retirement cannot both succeed: whichever
// read-modify-write comes first in the word's order wins, the other sees it (a pin
// after the mark fails and gives its count back; a retirement CASes the pin word it
// read, and fails if a pin came since). Unpins only grow and never pass the pins, so a
// retirement that read unpins == pins before its CAS saw no user. The cancel flag sits
// on a line of its own, read by pollers per slice, written only by an unregistration
// that cancels.
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
    const uint64_t before = pins_.fetch_add(1, std::memory_order_acq_rel);
    if ((before & kRetired) == 0) return true;
    pins_.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  // The task ended: none of its WRs can touch the memory any more.
  void unpin() noexcept { unpins_.fetch_add(1, std::memory_order_acq_rel); }
  // An unregistration asked the tasks using the buffer to stop (cancel).
  bool cancelRequested() const noexcept { return cancel_.load(std::memory_order_acquire); }

  // ---- control path ----
  // Retires the buffer if no task uses it: returns 0 then. Otherwise returns how many
  // tasks use it and changes nothing. kRetiredAlready when another call retired it.
  uint64_t tryRetire() noexcept {
    for (;;) {
      uint64_t pins = 0;
      const uint64_t users = snapshot(&pins);
      if (pins & kRetired) return kRetiredAlready;
      if (users != 0) return users;
      // No pin since the snapshot: none is held now.
      if (pins_.compare_exchange_strong(pins, pins | kRetired, std::memory_order_acq_rel)) return 0;
    }
  }
  // Retires the buffer and asks its tasks to cancel, whatever uses it: new pins fail
  // from here on. False when another call retired it already (nothing changed).
  bool retireAndCancel() noexcept {
    if (pins_.fetch_or(kRetired, std::memory_order_acq_rel) & kRetired) return false;
    cancel_.store(true, std::memory_order_release);
    return true;
  }
  // Undoes a retirement that could not finish: the buffer is usable again.
  void unretire() noexcept {
    cancel_.store(false, std::memory_order_release);
    pins_.fetch_and(~kRetired, std::memory_order_acq_rel);
  }
  // Tasks using the buffer (a pin that is failing may count for an instant).
  uint64_t users() const noexcept {
    uint64_t pins = 0;
    return snapshot(&pins);
  }
  bool retired() const noexcept { return pins_.load(std::memory_order_acquire) & kRetired; }

  static constexpr uint64_t kRetiredAlready = ~uint64_t{0};

 private:
  // Users at one instant, and the pin word of that instant: the unpins read before
  // and after the pin word agree, so the pin word was read while unpins held that
  // value (unpins only grow). Reading unpins first keeps pins >= unpins.
  uint64_t snapshot(uint64_t* pin_word) const noexcept {
    for (;;) {
      const uint64_t unpins = unpins_.load(std::memory_order_acquire);
      const uint64_t pins = pins_.load(std::memory_order_acquire);
      if (unpins_.load(std::memory_order_acquire) != unpins) continue;
      *pin_word = pins;
      return (pins & ~kRetired) - unpins;
    }
  }

  static constexpr uint64_t kRetired = uint64_t{1} << 63;
  alignas(64) std::atomic<uint64_t> pins_{0};  // and the kRetired mark
  alignas(64) std::atomic<uint64_t> unpins_{0};
  alignas(64) std::atomic<bool> cancel_{false};
};

}  // namespace tent::rdma
