// Doorbell slow paths: the futex wake (a producer found the lcore asleep) and the
// lcore's timed wait. No allocation, no logging; the only syscalls are the futex.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "lcore/doorbell.h"

namespace tent::lcore {

namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "the futex word is the atomic's storage");

uint32_t* futexWord(std::atomic<uint32_t>& a) noexcept {
  return reinterpret_cast<uint32_t*>(&a);
}

// The doorbell's syscall: FUTEX_WAKE towards a blocked lcore, or the lcore's own wait.
long doorbellFutex(std::atomic<uint32_t>& a, int op, uint32_t val, const timespec* t) noexcept {
  const uint32_t any = FUTEX_BITSET_MATCH_ANY;  // FUTEX_WAIT_BITSET's mask; FUTEX_WAKE ignores it
  uint32_t* w = futexWord(a);
  return syscall(SYS_futex, w, op, val, t, nullptr, any);  // datapath-lint: allow(syscall) doorbell
}

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
  (void)doorbellFutex(state_, FUTEX_WAKE_PRIVATE, 1, nullptr);
}

bool Doorbell::sleep_lc(uint32_t state, uint32_t us) noexcept {
  const timespec deadline = deadlineAfter(us);
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline: a spurious wake-up
  // (or a late FUTEX_WAKE meant for an earlier sleep) waits again for the rest only.
  while (state_.load(std::memory_order_acquire) == state) {
    const long rc = doorbellFutex(state_, FUTEX_WAIT_BITSET_PRIVATE, state, &deadline);
    if (rc != 0 && errno == ETIMEDOUT) break;
  }
  // kAwake here means a producer took the doorbell: rung. `state`: timed out.
  return state_.exchange(kAwake, std::memory_order_acquire) == kAwake;
}

}  // namespace tent::lcore
