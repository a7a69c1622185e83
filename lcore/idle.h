// IdleBackoff: what a polling loop does after a pass that found no work.
// Spin for `spin_polls` idle passes, then rte_pause() for `pause_polls` passes,
// then sleep, doubling from sleep_min_us to sleep_max_us. Any busy pass resets.
// The lcore loop uses it per lcore; the engine reuses it for its blocking waits.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace tent::lcore {

enum class IdleAction : uint8_t { kSpin = 0, kPause, kSleep };

// The policy of a caller that waits for the engine (a transfer, a drain): spins
// briefly, then sleeps up to `sleep_max_us`, so a wait that is long costs no core.
config::IdlePolicy waiterPolicy(uint32_t sleep_max_us) noexcept;

class IdleBackoff {
 public:
  // Sleeps for `us` microseconds. Injectable so tests step the policy without
  // sleeping, and so the lcore loop can cut a sleep short when it must wake.
  using SleepFn = void (*)(void* context, uint32_t us) noexcept;

  explicit IdleBackoff(const config::IdlePolicy& policy, SleepFn sleep = &sleepFor,
                       void* sleep_context = nullptr) noexcept;

  // A pass did work: back to spinning.
  void onBusy() noexcept;
  // A pass found nothing: spins (returns at once), pauses or sleeps, by policy.
  IdleAction onIdle() noexcept;
  // Like onIdle() but does nothing itself: advances the policy and says what to do,
  // with the sleep's length in *sleep_us for kSleep (counted as a sleep). For a
  // loop that sleeps its own way (the lcore loop sleeps on its doorbell).
  IdleAction step(uint32_t* sleep_us) noexcept;

  // Sleeps taken since construction (never reset by onBusy()).
  uint64_t sleeps() const noexcept { return sleeps_; }
  // Idle passes since the last busy one.
  uint64_t idleStreak() const noexcept { return idle_streak_; }
  // The length of the next sleep, should the policy reach the sleeping phase.
  uint32_t nextSleepUs() const noexcept { return next_sleep_us_; }
  const config::IdlePolicy& policy() const noexcept { return policy_; }

  // The default SleepFn: nanosleep (the context is unused).
  static void sleepFor(void* context, uint32_t us) noexcept;

 private:
  uint32_t firstSleepUs() const noexcept;

  config::IdlePolicy policy_;
  SleepFn sleep_;
  void* sleep_context_;
  uint64_t idle_streak_ = 0;
  uint64_t sleeps_ = 0;
  uint32_t next_sleep_us_;
};

}  // namespace tent::lcore
