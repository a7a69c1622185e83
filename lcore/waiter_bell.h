// WaiterBell: how a thread that published a terminal state wakes the callers that
// sleep waiting for one (waitTransfer), at the cost of one syscall only when someone
// sleeps. A waiter first spins (lcore::IdleBackoff), then arms the bell and sleeps on
// it in bounded naps; whoever ends a task rings.
//
// No lost wake-up (the store-fence-load pattern of doorbell.h): the waiter adds itself
// to sleepers_, fences, reads the sequence, then checks its task; the completer
// publishes the state (a seq_cst read-modify-write), then reads sleepers_. Either the
// waiter's check sees the state, or the completer sees the sleeper and moves the
// sequence, which ends (or prevents) the waiter's futex wait. The nap's bound is the
// waiter's safety net besides: work nobody rings for (a direct CQ only its caller
// polls) is found at the next check.
#pragma once

#include <atomic>
#include <cstdint>

namespace tent::lcore {

class WaiterBell {
 public:
  // ---- the completing thread (datapath) ----
  // After publishing a terminal state: wakes every sleeping waiter. With none, one
  // load of a line only waiters write.
  void ring() noexcept {
    if (sleepers_.load(std::memory_order_seq_cst) != 0) wakeAll();
  }

  // ---- waiters ----
  // Registers a sleeper (then re-check before the first wait).
  void arm() noexcept;
  void disarm() noexcept { sleepers_.fetch_sub(1, std::memory_order_acq_rel); }
  // The value to pass to wait(): read before checking what is waited for.
  uint32_t sequence() const noexcept { return sequence_.load(std::memory_order_seq_cst); }
  // Sleeps until the sequence moves past `seen` or `us` microseconds pass; true when
  // it moved (rung, or a ring between the read of `seen` and the wait).
  bool wait(uint32_t seen, uint32_t us) noexcept;

  uint32_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }
  // Rings that found a sleeper (each a futex wake syscall); for tests and stats.
  uint64_t wakes() const noexcept { return wakes_.load(std::memory_order_relaxed); }

 private:
  void wakeAll() noexcept;  // out of line: the slow path

  alignas(64) std::atomic<uint32_t> sequence_{0};
  std::atomic<uint64_t> wakes_{0};
  alignas(64) std::atomic<uint32_t> sleepers_{0};
};

// A waiter's registration, released when it goes out of scope.
class WaiterBellSleeper {
 public:
  explicit WaiterBellSleeper(WaiterBell& bell) noexcept : bell_(bell) {}
  ~WaiterBellSleeper() {
    if (armed_) bell_.disarm();
  }
  WaiterBellSleeper(const WaiterBellSleeper&) = delete;
  WaiterBellSleeper& operator=(const WaiterBellSleeper&) = delete;
  bool armed() const noexcept { return armed_; }
  void arm() noexcept {
    if (!armed_) bell_.arm();
    armed_ = true;
  }

 private:
  WaiterBell& bell_;
  bool armed_ = false;
};

}  // namespace tent::lcore
