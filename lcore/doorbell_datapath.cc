// Doorbell slow paths: the futex wake (a producer found the lcore asleep) and the
// lcore's timed wait. No allocation, no logging; the only syscalls are the futex.
#include <linux/futex.h>
#include <time.h>

#include <cerrno>

#include "lcore/doorbell.h"
#include "lcore/futex.h"

namespace tent::lcore {

namespace {

timespec deadlineAfter(uint32_t us) noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  constexpr long kNsPerS = 1000000000L;
  long ns = t.tv_nsec + static_cast<long>(us % 1000000) * 1000;
  t.tv_sec += static_cast<time_t>(us / 1000000) + ns / kNsPerS;
  t.tv_nsec = ns % kNsPerS;
  return t;
}

}  // namespace

void Doorbell::wake(uint32_t from) noexcept {
  // Of several producers that saw the state, only the one that takes it wakes.
  uint32_t expected = from;
  if (!state_.compare_exchange_strong(expected, kAwake, std::memory_order_acq_rel)) return;
  wakes_.fetch_add(1, std::memory_order_relaxed);
  (void)futexCall(state_, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

bool Doorbell::sleep_lc(uint32_t state, uint32_t us) noexcept {
  const timespec deadline = deadlineAfter(us);
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline: a spurious wake-up
  // (or a late FUTEX_WAKE meant for an earlier sleep) waits again for the rest only.
  while (state_.load(std::memory_order_acquire) == state) {
    const long rc =
        futexCall(state_, FUTEX_WAIT_BITSET_PRIVATE, state, &deadline, FUTEX_BITSET_MATCH_ANY);
    if (rc != 0 && errno == ETIMEDOUT) break;
  }
  // kAwake here means a producer took the doorbell: rung. `state`: timed out.
  return state_.exchange(kAwake, std::memory_order_acquire) == kAwake;
}

}  // namespace tent::lcore
