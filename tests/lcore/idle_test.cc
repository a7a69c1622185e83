// IdleBackoff transitions, stepped with an injected sleep (nothing really sleeps).
#include <gtest/gtest.h>

#include <vector>

#include "lcore/idle.h"

namespace tent::lcore {
namespace {

struct SleepLog {
  std::vector<uint32_t> sleeps;
  static void record(void* self, uint32_t us) noexcept {
    static_cast<SleepLog*>(self)->sleeps.push_back(us);
  }
};

config::IdlePolicy policy(uint32_t spin, uint32_t pause, uint32_t min_us, uint32_t max_us) {
  config::IdlePolicy p;
  p.spin_polls = spin;
  p.pause_polls = pause;
  p.sleep_min_us = min_us;
  p.sleep_max_us = max_us;
  return p;
}

TEST(IdleBackoff, SpinsThenPausesThenSleepsDoubling) {
  SleepLog log;
  IdleBackoff backoff(policy(3, 2, 10, 100), &SleepLog::record, &log);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(backoff.onIdle(), IdleAction::kSpin) << i;
  for (int i = 0; i < 2; ++i) EXPECT_EQ(backoff.onIdle(), IdleAction::kPause) << i;
  for (int i = 0; i < 6; ++i) EXPECT_EQ(backoff.onIdle(), IdleAction::kSleep) << i;
  EXPECT_EQ(log.sleeps, (std::vector<uint32_t>{10, 20, 40, 80, 100, 100}));
  EXPECT_EQ(backoff.sleeps(), 6u);
  EXPECT_EQ(backoff.idleStreak(), 11u);
}

TEST(IdleBackoff, BusyPassResetsToSpinningAndMinimumSleep) {
  SleepLog log;
  IdleBackoff backoff(policy(1, 1, 5, 50), &SleepLog::record, &log);
  for (int i = 0; i < 5; ++i) backoff.onIdle();  // spin, pause, sleep 5, 10, 20
  EXPECT_EQ(backoff.nextSleepUs(), 40u);
  backoff.onBusy();
  EXPECT_EQ(backoff.idleStreak(), 0u);
  EXPECT_EQ(backoff.nextSleepUs(), 5u);
  EXPECT_EQ(backoff.onIdle(), IdleAction::kSpin);
  EXPECT_EQ(backoff.onIdle(), IdleAction::kPause);
  EXPECT_EQ(backoff.onIdle(), IdleAction::kSleep);
  EXPECT_EQ(log.sleeps, (std::vector<uint32_t>{5, 10, 20, 5}));
  EXPECT_EQ(backoff.sleeps(), 4u);  // counts every sleep, across resets
}

TEST(IdleBackoff, ZeroSpinAndPauseSleepsAtOnce) {
  SleepLog log;
  IdleBackoff backoff(policy(0, 0, 7, 7), &SleepLog::record, &log);
  EXPECT_EQ(backoff.onIdle(), IdleAction::kSleep);
  EXPECT_EQ(backoff.onIdle(), IdleAction::kSleep);
  EXPECT_EQ(log.sleeps, (std::vector<uint32_t>{7, 7}));
}

TEST(IdleBackoff, DegenerateSleepBoundsStayPositiveAndCapped) {
  SleepLog log;
  IdleBackoff zero(policy(0, 0, 0, 0), &SleepLog::record, &log);
  zero.onIdle();
  zero.onIdle();
  EXPECT_EQ(log.sleeps, (std::vector<uint32_t>{1, 1}));  // never a zero-length busy sleep
  log.sleeps.clear();
  IdleBackoff inverted(policy(0, 0, 50, 10), &SleepLog::record, &log);
  inverted.onIdle();
  inverted.onIdle();
  EXPECT_EQ(log.sleeps, (std::vector<uint32_t>{10, 10}));  // the maximum wins
}

TEST(IdleBackoff, DoublingDoesNotOverflowNearTheTop) {
  SleepLog log;
  IdleBackoff backoff(policy(0, 0, 0x40000000u, 0xF0000000u), &SleepLog::record, &log);
  for (int i = 0; i < 4; ++i) backoff.onIdle();
  EXPECT_EQ(log.sleeps,
            (std::vector<uint32_t>{0x40000000u, 0x80000000u, 0xF0000000u, 0xF0000000u}));
}

TEST(IdleBackoff, DefaultSleepReallySleepsAndReturns) {
  // The real nanosleep path, 1 us: must simply return.
  IdleBackoff backoff(policy(0, 0, 1, 1));
  EXPECT_EQ(backoff.onIdle(), IdleAction::kSleep);
  EXPECT_EQ(backoff.sleeps(), 1u);
}

}  // namespace
}  // namespace tent::lcore
