// tebench's clock. Every time tebench measures goes through nowNs(), so a test
// can install a virtual clock (advanced by a fake engine's calls) and check
// exactly which calls a column's window contains, with no real-time thresholds.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tent::bench {

using ClockFn = int64_t (*)() noexcept;

inline int64_t steadyNowNs() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The installed clock; steady_clock unless a test replaced it. A relaxed load
// of one pointer: no cost worth measuring next to a clock read.
inline std::atomic<ClockFn> g_bench_clock{&steadyNowNs};

inline int64_t nowNs() noexcept {
  return g_bench_clock.load(std::memory_order_relaxed)();
}

// For tests: installs `fn` (nullptr restores steady_clock).
inline void setBenchClockForTesting(ClockFn fn) noexcept {
  g_bench_clock.store(fn ? fn : &steadyNowNs, std::memory_order_relaxed);
}

}  // namespace tent::bench
