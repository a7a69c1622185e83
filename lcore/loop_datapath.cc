// LcoreLoop datapath: the pass, the EAL loop, busy/idle accounting, idle sleeps.
#include <rte_cycles.h>
#include <rte_pause.h>

#include "lcore/loop.h"

namespace tent::lcore {

namespace {

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
  bool armed = false;
  uint64_t prev = rte_rdtsc();
  // stop_ is loaded after arm_lc() too: a stop requested before the arm is seen here,
  // one requested after it rings the doorbell.
  while (!stop_.load(std::memory_order_acquire)) {
    // After arm_lc() this pass is the re-check of doorbell.h: work enqueued before
    // the arm is found here, work enqueued after it rings.
    const bool busy = pass_lc() != 0;
    if (busy) {
      if (armed) doorbell_.disarm_lc();
      armed = false;
      backoff_.onBusy();
    } else if (armed) {
      sleep_lc();
      armed = false;
    } else {
      armed = idle_lc();
    }
    // One TSC read per pass: the idle action (pause, sleep) counts as idle time.
    const uint64_t now = rte_rdtsc();
    account_lc(busy, now - prev);
    prev = now;
  }
  if (armed) doorbell_.disarm_lc();
  t_in_pass = false;
  active_.store(false, std::memory_order_release);
}

// Spin, pause, nap, or arm the doorbell for a block after one more pass; true when
// armed. A nap (a poller expects unannounced work, or block_max_us is 0) needs no
// re-check: producers do not ring it, it ends on its timer.
bool LcoreLoop::idle_lc() noexcept {
  uint32_t nap_us = 0;
  switch (backoff_.step(&nap_us)) {
    case IdleAction::kSpin:
      return false;
    case IdleAction::kPause:
      rte_pause();
      return false;
    case IdleAction::kSleep:
      break;
  }
  if (block_max_us_ == 0 || pollersNeedPolling_lc()) {
    bump(sleeps_, 1);  // counted when it starts, so a long sleep is visible at once
    (void)doorbell_.nap_lc(nap_us);
    return false;
  }
  doorbell_.arm_lc();
  return true;
}

bool LcoreLoop::pollersNeedPolling_lc() const noexcept {
  for (const Poller* poller : current_.load(std::memory_order_acquire)->pollers) {
    if (poller->needsPolling_lc()) return true;
  }
  return false;
}

// The re-check pass after arming found nothing: block until woken.
void LcoreLoop::sleep_lc() noexcept {
  // Counted when it starts, so a long sleep is visible at once.
  bump(sleeps_, 1);
  bump(blocks_, 1);
  (void)doorbell_.wait_lc(block_max_us_);
}

}  // namespace tent::lcore
