// The engine's clock for its own timestamps: post and enqueue times, timeouts,
// backoff, grace periods, latency histograms. Read on every submit and every
// completion, so it costs what one rdtsc costs (15 ns on the reference VM, against
// 37 ns for a vDSO clock_gettime) wherever the kernel's own CLOCK_MONOTONIC runs on
// the TSC; elsewhere it is CLOCK_MONOTONIC.
//
// Its readings are comparable only with each other: it agrees with CLOCK_MONOTONIC
// when the TSC is taken into use and then drifts from it by its calibration error
// (a few parts per million). A user's deadline_ns is on std::chrono::steady_clock
// and is compared with steady_clock readings, never with this clock.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tent::clock {

// CLOCK_MONOTONIC in ns: the clock of the control plane's timers and of the soft
// NIC's link model (each compares only with its own readings).
uint64_t monotonicNs() noexcept;

namespace detail {
struct TscScale {
  uint64_t tsc_base;  // TSC at the moment the scale was taken into use
  uint64_t ns_base;   // CLOCK_MONOTONIC then
  uint64_t mult_q32;  // ns per tick, 32 fractional bits
};
extern TscScale g_scale;            // written once, before g_tsc_on is set
extern std::atomic<bool> g_tsc_on;  // release-stored once the scale is valid
}  // namespace detail

inline uint64_t engineNowNs() noexcept {
#if defined(__x86_64__)
  if (detail::g_tsc_on.load(std::memory_order_acquire)) {
    const detail::TscScale& s = detail::g_scale;
    const uint64_t ticks = __rdtsc() - s.tsc_base;
    return s.ns_base +
           static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * s.mult_q32) >> 32);
  }
#endif
  return monotonicNs();
}

// Control path: measures the TSC rate against CLOCK_MONOTONIC and, where the kernel
// itself keeps time with the TSC (its current clocksource is "tsc"), switches
// engineNowNs() to it. Idempotent; the first call in a process may sleep up to
// 20 ms to measure; each engine calls it when it starts.
void calibrate() noexcept;

// For stats and tests: "tsc" or "clock_gettime".
const char* source() noexcept;

}  // namespace tent::clock
