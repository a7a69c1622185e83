// LcoreLoop datapath: the pass, the EAL loop, busy/idle accounting, idle sleeps.
#include <rte_cycles.h>

#include <algorithm>

#include "lcore/loop.h"

namespace tent::lcore {

namespace {

// Sleeps are cut into chunks so a stop request or a new poller set wakes the
// lcore promptly even under a policy with long sleeps.
constexpr uint32_t kSleepChunkUs = 200;

thread_local bool t_in_pass = false;

// Single writer (the lcore): a relaxed load+store, no locked instruction.
inline void bump(std::atomic<uint64_t>& counter, uint64_t by) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace

size_t LcoreLoop::pass_lc() noexcept {
  // seq_cst (a plain load on x86): see LcoreLoop::publish().
  const PollerSet* set = current_.load(std::memory_order_seq_cst);
  size_t busy = 0;
  for (Poller* poller : set->pollers) {
    busy += poller->poll_lc() == PollResult::kBusy ? 1 : 0;
  }
  // The quiescent point: every call into `set`'s pollers of this pass is done.
  seen_generation_.store(set->generation, std::memory_order_release);
  return busy;
}

void LcoreLoop::account_lc(bool busy, uint64_t cycles) noexcept {
  bump(busy ? busy_cycles_ : idle_cycles_, cycles);
  bump(busy ? busy_passes_ : idle_passes_, 1);
}

bool LcoreLoop::inPass() noexcept {
  return t_in_pass;
}

size_t LcoreLoop::runOnce_lc() noexcept {
  active_.store(true, std::memory_order_seq_cst);
  t_in_pass = true;
  const uint64_t start = rte_rdtsc();
  const size_t busy = pass_lc();
  account_lc(busy != 0, rte_rdtsc() - start);
  t_in_pass = false;
  active_.store(false, std::memory_order_release);
  return busy;
}

void LcoreLoop::run_lc() noexcept {
  backoff_.onBusy();  // a relaunched loop starts spinning
  t_in_pass = true;   // the whole loop: pollers run on this thread at any time
  uint64_t prev = rte_rdtsc();
  while (!stop_.load(std::memory_order_acquire)) {
    const bool busy = pass_lc() != 0;
    if (busy) {
      backoff_.onBusy();
    } else {
      backoff_.onIdle();  // sleeps through sleepUnlessWoken()
    }
    // One TSC read per pass: the idle action (pause, sleep) counts as idle time.
    const uint64_t now = rte_rdtsc();
    account_lc(busy, now - prev);
    prev = now;
  }
  t_in_pass = false;
  active_.store(false, std::memory_order_release);
}

bool LcoreLoop::mustWake() const noexcept {
  return stop_.load(std::memory_order_acquire) ||
         published_generation_.load(std::memory_order_acquire) !=
             seen_generation_.load(std::memory_order_relaxed);
}

void LcoreLoop::sleepUnlessWoken(void* self, uint32_t us) noexcept {
  auto* loop = static_cast<LcoreLoop*>(self);
  bump(loop->sleeps_, 1);  // counted when it starts, so a long sleep is visible at once
  while (us > 0 && !loop->mustWake()) {
    const uint32_t chunk = std::min(us, kSleepChunkUs);
    IdleBackoff::sleepFor(nullptr, chunk);
    us -= chunk;
  }
}

}  // namespace tent::lcore
