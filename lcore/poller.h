// A poller is one unit of run-to-completion work on an lcore.
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

#include "lcore/doorbell.h"

namespace tent::lcore {

enum class PollResult : uint8_t { kIdle = 0, kBusy = 1 };

class Poller {
 public:
  Poller() = default;
  virtual ~Poller() = default;
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Called only by the lcore the poller is attached to. Must not block.
  virtual PollResult poll_lc() noexcept = 0;
  virtual std::string_view name() const noexcept = 0;

  // Called by the owning lcore after an idle pass, before it sleeps: true while work
  // may appear that nobody announces with wakeLcore() - WRs posted whose completions
  // this poller polls, items it holds back and retries, timers. While any poller of
  // an lcore says so, the lcore's sleeps are naps (at most idle.sleep_max_us;
  // wakeLcore() does not cut them short); when none does, it sleeps until woken (at
  // most idle.block_max_us). The default is the safe answer.
  virtual bool needsPolling_lc() const noexcept { return true; }

  // Any thread, after making work visible to this poller (a ring enqueue, a flag):
  // wakes its lcore if that sleeps until woken. Costs a fence and two loads when
  // the lcore is awake or napping, one futex syscall when it blocks. Guaranteed for work handed
  // over after attach() returned; a no-op on a poller that is not attached.
  void wakeLcore() const noexcept {
    if (Doorbell* d = doorbell_.load(std::memory_order_acquire)) d->ring();
  }

 private:
  friend class LcoreLoop;  // sets the doorbell on attach, clears it on detach
  std::atomic<Doorbell*> doorbell_{nullptr};
};

}  // namespace tent::lcore
