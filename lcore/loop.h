// LcoreLoop: the run-to-completion loop of one lcore (private to lcore/).
//
// The loop reads an atomic pointer to an immutable PollerSet. attach/detach
// publish a new set and wait until the lcore has finished a pass over it (it
// stores the generation of the set it just used in `seen_generation_`), or until
// it is not running; only then is the old set freed. So after detach returns the poller is never
// called again. An idle lcore sleeps on its Doorbell, which attach/detach, stop and
// the pollers' producers (Poller::wakeLcore) ring. See docs/lcore.md for the arguments.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "config/config.h"
#include "lcore/doorbell.h"
#include "lcore/idle.h"
#include "lcore/poller.h"
#include "lcore/runtime.h"
#include "tent/status.h"

namespace tent::lcore {

// Replaced as a whole, never modified once published.
struct PollerSet {
  std::vector<Poller*> pollers;
  // Increases with every publication: unlike an address, it is never reused.
  uint64_t generation = 0;
};

class LcoreLoop {
 public:
  LcoreLoop(size_t index, const config::LcoreSpec& spec);
  ~LcoreLoop();
  LcoreLoop(const LcoreLoop&) = delete;
  LcoreLoop& operator=(const LcoreLoop&) = delete;

  // ---- control path (callers serialise these with one mutex) ----
  Status attach(Poller* poller);
  Status detach(Poller* poller);
  bool contains(const Poller* poller) const noexcept;
  LcoreStats stats() const noexcept;
  // Before launching run_lc() on an lcore thread: clears the stop request and
  // marks the loop active, so attach/detach wait for it from now on.
  void prepareLaunch() noexcept;
  // rte_eal_remote_launch refused: the loop never ran.
  void launchFailed() noexcept { active_.store(false, std::memory_order_seq_cst); }
  void requestStop() noexcept;
  // False once the launched loop has returned (or when it was never launched).
  bool active() const noexcept { return active_.load(std::memory_order_seq_cst); }
  // After rte_eal_wait_lcore(): reads the loop's own exit mark, so the caller
  // synchronises with everything the loop did (not only through EAL internals).
  void awaitExit() const noexcept {
    while (active()) {
    }
  }

  // True on a thread that is running a pass of any loop (an lcore thread, or a
  // manual runOnce() in progress): such a thread must not attach or detach, as
  // it would wait for a quiescent point that only it can reach.
  static bool inPass() noexcept;

  // ---- datapath ----
  // Manual mode: one pass, with accounting but without idle policy. Must not
  // run on two threads at once for the same loop.
  size_t runOnce_lc() noexcept;
  // EAL mode: passes until requestStop(); then marks the loop inactive.
  void run_lc() noexcept;

 private:
  size_t pass_lc() noexcept;
  void account_lc(bool busy, uint64_t cycles) noexcept;
  bool idle_lc() noexcept;
  void sleep_lc() noexcept;
  bool pollersNeedPolling_lc() const noexcept;

  Status publish(std::vector<Poller*> next, const char* what, const Poller* poller);
  bool waitQuiescent(uint64_t generation) const;

  const size_t index_;
  IdleBackoff backoff_;    // lcore-private
  uint32_t block_max_us_;  // the policy's longest sleep until woken (0: naps only)
  Doorbell doorbell_;

  // Read by the lcore every pass, written rarely by control threads.
  alignas(64) std::atomic<const PollerSet*> current_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> active_{false};
  uint64_t next_generation_ = 1;  // control side, under the caller's mutex

  // Written only by the lcore (single writer), read by control threads.
  alignas(64) std::atomic<uint64_t> seen_generation_{0};
  std::atomic<uint64_t> busy_cycles_{0};
  std::atomic<uint64_t> idle_cycles_{0};
  std::atomic<uint64_t> busy_passes_{0};
  std::atomic<uint64_t> idle_passes_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<uint64_t> blocks_{0};
};

}  // namespace tent::lcore
