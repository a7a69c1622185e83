#include "base/clock.h"
#include "base/tsc_rate.h"

#include <time.h>

#include <cstdio>
#include <cstring>
#include <mutex>

namespace tent::clock {

uint64_t monotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace detail {
TscScale g_scale{};
std::atomic<bool> g_tsc_on{false};
}  // namespace detail

namespace {

constexpr uint64_t kCalibrationNs = 20'000'000;  // 20 ms: a rate error of a few ppm

struct Pair {
  uint64_t tsc;
  uint64_t ns;
};

#if defined(__x86_64__)
// A TSC reading and a CLOCK_MONOTONIC reading taken as close together as this
// thread can manage: the tightest of a few brackets, its TSC at the midpoint.
Pair readPair() noexcept {
  Pair best{0, 0};
  uint64_t best_span = ~0ull;
  for (int i = 0; i < 8; ++i) {
    const uint64_t t0 = __rdtsc();
    const uint64_t ns = monotonicNs();
    const uint64_t t1 = __rdtsc();
    if (t1 - t0 < best_span) {
      best_span = t1 - t0;
      best = {t0 + (t1 - t0) / 2, ns};
    }
  }
  return best;
}

// Taken at load time, so the usual first calibrate() (an engine starting well
// after the process did) needs no wait.
const Pair g_load_pair = readPair();
#endif

bool kernelKeepsTimeWithTsc() noexcept {
  std::FILE* f =
      std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f == nullptr) return false;
  char name[32] = {};
  const bool read = std::fgets(name, sizeof name, f) != nullptr;
  std::fclose(f);
  return read && std::strncmp(name, "tsc", 3) == 0 && (name[3] == '\n' || name[3] == '\0');
}

std::once_flag g_once;
std::atomic<double> g_tsc_hz{0};

void calibrateOnce() noexcept {
#if defined(__x86_64__)
  // The rate is measured wherever there is a TSC (lcores count cycles with it); the
  // engine's clock switches to it only where the kernel keeps time with it too.
  const bool use_for_clock = kernelKeepsTimeWithTsc();
  Pair start = g_load_pair;
  Pair now = readPair();
  if (now.ns < start.ns + kCalibrationNs) {
    const uint64_t wait = start.ns + kCalibrationNs - now.ns;
    timespec ts{static_cast<time_t>(wait / 1000000000ull), static_cast<long>(wait % 1000000000ull)};
    nanosleep(&ts, nullptr);
    now = readPair();
  }
  if (now.tsc <= start.tsc || now.ns <= start.ns) return;  // a TSC that did not advance
  g_tsc_hz.store(
      static_cast<double>(now.tsc - start.tsc) * 1e9 / static_cast<double>(now.ns - start.ns),
      std::memory_order_release);
  if (!use_for_clock) return;
  const unsigned __int128 num = static_cast<unsigned __int128>(now.ns - start.ns) << 32;
  detail::g_scale = {now.tsc, now.ns, static_cast<uint64_t>(num / (now.tsc - start.tsc))};
  detail::g_tsc_on.store(true, std::memory_order_release);
#endif
}

}  // namespace

void calibrate() noexcept {
  std::call_once(g_once, calibrateOnce);
}

double tscHz() noexcept {
  return g_tsc_hz.load(std::memory_order_acquire);
}

const char* source() noexcept {
  return detail::g_tsc_on.load(std::memory_order_acquire) ? "tsc" : "clock_gettime";
}

}  // namespace tent::clock
