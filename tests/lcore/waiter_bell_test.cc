// WaiterBell: rings only when someone sleeps, wakes every sleeper, and (the lost
// wake-up race) never misses one. No timing thresholds: a missed ring shows as a wait
// that runs to its (very long) bound and returns false.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "lcore/waiter_bell.h"

namespace tent::lcore {
namespace {

constexpr uint32_t kForeverUs = 60'000'000;

TEST(WaiterBell, RingingWithoutSleepersMakesNoSyscall) {
  WaiterBell bell;
  const uint32_t before = bell.sequence();
  for (int i = 0; i < 1000; ++i) bell.ring();
  EXPECT_EQ(bell.wakes(), 0u);
  EXPECT_EQ(bell.sequence(), before);
}

TEST(WaiterBell, ARingBetweenTheReadAndTheWaitEndsTheWaitAtOnce) {
  WaiterBell bell;
  WaiterBellSleeper sleeper(bell);
  sleeper.arm();
  const uint32_t seen = bell.sequence();
  bell.ring();  // the completer found the sleeper before it slept
  EXPECT_EQ(bell.wakes(), 1u);
  EXPECT_TRUE(bell.wait(seen, kForeverUs));
}

TEST(WaiterBell, AnUnrungWaitEndsAtItsBoundAndSaysSo) {
  WaiterBell bell;
  EXPECT_FALSE(bell.wait(bell.sequence(), 1));
}

TEST(WaiterBell, TheSleeperDisarmsWhenItGoes) {
  WaiterBell bell;
  {
    WaiterBellSleeper a(bell);
    WaiterBellSleeper b(bell);
    a.arm();
    a.arm();  // once per sleeper
    b.arm();
    EXPECT_EQ(bell.sleepers(), 2u);
  }
  EXPECT_EQ(bell.sleepers(), 0u);
}

// The waiter's protocol against a completer: arm, read the sequence, check the flag,
// wait. Every round the completer sets the flag and rings; a lost wake-up leaves the
// waiter in a 60 s wait (the test's timeout reports it), never a wrong result.
TEST(WaiterBell, EveryRoundsCompletionWakesItsWaiter) {
  WaiterBell bell;
  constexpr int kRounds = 2000;
  std::atomic<int> done_round{0};
  std::atomic<int> waiting_round{0};
  std::atomic<int> missed{0};
  std::thread waiter([&] {
    WaiterBellSleeper sleeper(bell);
    sleeper.arm();
    for (int r = 1; r <= kRounds; ++r) {
      waiting_round.store(r, std::memory_order_seq_cst);
      for (;;) {
        const uint32_t seen = bell.sequence();
        if (done_round.load(std::memory_order_seq_cst) >= r) break;
        if (!bell.wait(seen, kForeverUs) && done_round.load(std::memory_order_seq_cst) < r)
          missed.fetch_add(1);
      }
    }
  });
  for (int r = 1; r <= kRounds; ++r) {
    while (waiting_round.load(std::memory_order_seq_cst) < r) std::this_thread::yield();
    done_round.store(r, std::memory_order_seq_cst);
    bell.ring();
  }
  waiter.join();
  EXPECT_EQ(missed.load(), 0);
  EXPECT_GE(bell.wakes(), 1u);
}

}  // namespace
}  // namespace tent::lcore
