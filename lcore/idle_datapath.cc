// IdleBackoff runs on every idle pass of an lcore loop: no allocation, no logging.
#include <rte_pause.h>
#include <time.h>

#include <algorithm>

#include "lcore/idle.h"

namespace tent::lcore {

config::IdlePolicy waiterPolicy(uint32_t sleep_max_us) noexcept {
  config::IdlePolicy policy;
  policy.spin_polls = 64;
  policy.pause_polls = 256;
  policy.sleep_min_us = 1;
  policy.sleep_max_us = sleep_max_us;
  return policy;
}

IdleBackoff::IdleBackoff(const config::IdlePolicy& policy, SleepFn sleep,
                         void* sleep_context) noexcept
    : policy_(policy),
      sleep_(sleep != nullptr ? sleep : &sleepFor),
      sleep_context_(sleep_context),
      next_sleep_us_(firstSleepUs()) {}

uint32_t IdleBackoff::firstSleepUs() const noexcept {
  // A zero minimum would never double; an inverted range sleeps the maximum.
  const uint32_t min_us = std::max<uint32_t>(policy_.sleep_min_us, 1);
  return std::min(min_us, std::max<uint32_t>(policy_.sleep_max_us, 1));
}

void IdleBackoff::onBusy() noexcept {
  idle_streak_ = 0;
  next_sleep_us_ = firstSleepUs();
}

IdleAction IdleBackoff::step(uint32_t* sleep_us) noexcept {
  const uint64_t streak = idle_streak_++;
  if (streak < policy_.spin_polls) return IdleAction::kSpin;
  if (streak < uint64_t{policy_.spin_polls} + policy_.pause_polls) return IdleAction::kPause;
  const uint32_t us = next_sleep_us_;
  const uint32_t max_us = std::max<uint32_t>(policy_.sleep_max_us, 1);
  next_sleep_us_ = us >= max_us / 2 ? max_us : us * 2;
  ++sleeps_;
  *sleep_us = us;
  return IdleAction::kSleep;
}

IdleAction IdleBackoff::onIdle() noexcept {
  uint32_t us = 0;
  const IdleAction action = step(&us);
  if (action == IdleAction::kPause) rte_pause();
  if (action == IdleAction::kSleep) sleep_(sleep_context_, us);
  return action;
}

void IdleBackoff::sleepFor(void* /*context*/, uint32_t us) noexcept {
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
  // EINTR cuts the sleep short, which is harmless: the policy sleeps again if still idle.
  // datapath-lint: allow(blocking) the idle policy's sleep, taken only when idle
  nanosleep(&ts, nullptr);
}

}  // namespace tent::lcore
