// WaiterBell's futex calls: the wake (a completer found a sleeper) and the waiter's
// bounded wait. No allocation, no logging; the only syscalls are the futex.
#include <linux/futex.h>
#include <time.h>

#include <climits>

#include "lcore/futex.h"
#include "lcore/waiter_bell.h"

namespace tent::lcore {

void WaiterBell::arm() noexcept {
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // The waiter's fence of waiter_bell.h: its later reads (sequence, the task) come after
  // the registration in the seq_cst order the completer's read of sleepers_ is in.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void WaiterBell::wakeAll() noexcept {
  sequence_.fetch_add(1, std::memory_order_seq_cst);
  wakes_.fetch_add(1, std::memory_order_relaxed);
  (void)futexCall(sequence_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
}

bool WaiterBell::wait(uint32_t seen, uint32_t us) noexcept {
  if (sequence_.load(std::memory_order_seq_cst) != seen) return true;
  // FUTEX_WAIT's timeout is relative: a spurious wake-up ends this nap early, and the
  // caller's loop checks its task and naps again.
  timespec t{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  (void)futexCall(sequence_, FUTEX_WAIT_PRIVATE, seen, &t);
  return sequence_.load(std::memory_order_seq_cst) != seen;
}

}  // namespace tent::lcore
