// A small test-and-test-and-set spinlock: the emulated NIC's internal serialisation.
// Critical sections are a few hundred nanoseconds; after a short spin the waiter
// yields the CPU, because on a small, oversubscribed machine the holder may have
// been preempted (spinning on then only burns its time slice).
#pragma once

#include <sched.h>

#include <atomic>

#include "base/cpu_relax.h"

namespace tent::fabric::soft {

class Spinlock {
 public:
  void lock() noexcept {
    unsigned spins = 0;
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          cpuRelax();
        } else {
          sched_yield();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !flag_.load(std::memory_order_relaxed) &&
           !flag_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  static constexpr unsigned kSpinsBeforeYield = 128;
  std::atomic<bool> flag_{false};
};

class SpinGuard {
 public:
  explicit SpinGuard(Spinlock& l) noexcept : l_(l) { l_.lock(); }
  ~SpinGuard() { l_.unlock(); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;

 private:
  Spinlock& l_;
};

}  // namespace tent::fabric::soft
