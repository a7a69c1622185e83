// Doorbell: rings only a sleeper, and (the lost wake-up race) never misses one.
// No timing thresholds: a lost wake-up shows as a wait that hits its bound.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "lcore/doorbell.h"

namespace tent::lcore {
namespace {

using namespace std::chrono_literals;

// Longer than any bounded wait below: a lost wake-up cannot hide behind a timeout.
constexpr uint32_t kForeverUs = 60'000'000;

TEST(Doorbell, RingingAnAwakeOwnerMakesNoSyscall) {
  Doorbell bell;
  for (int i = 0; i < 1000; ++i) bell.ring();
  EXPECT_EQ(bell.wakes(), 0u);
  bell.arm_lc();
  bell.disarm_lc();  // the re-check found work
  bell.ring();
  EXPECT_EQ(bell.wakes(), 0u);
}

TEST(Doorbell, OneWakeForAnArmedOwnerAndTheWaitReturnsRung) {
  Doorbell bell;
  bell.arm_lc();
  bell.ring();
  bell.ring();  // already taken: no second syscall
  EXPECT_EQ(bell.wakes(), 1u);
  EXPECT_TRUE(bell.wait_lc(kForeverUs));  // returns at once: it was rung before the wait
  bell.ring();                            // disarmed by the wait
  EXPECT_EQ(bell.wakes(), 1u);
}

TEST(Doorbell, UnrungWaitTimesOut) {
  Doorbell bell;
  bell.arm_lc();
  EXPECT_FALSE(bell.wait_lc(1));
  bell.ring();  // disarmed: no wake
  EXPECT_EQ(bell.wakes(), 0u);
}

// A nap (the owner still expects unannounced work) ends on its timer: producers do
// not ring it, control threads (attach/detach, stop) do.
TEST(Doorbell, ProducersLeaveANapAloneControlEndsIt) {
  Doorbell bell;
  EXPECT_FALSE(bell.nap_lc(1));  // nobody rang: timed out
  EXPECT_FALSE(bell.sleeping());
  std::atomic<int> rung{-1};
  std::thread owner([&] { rung.store(bell.nap_lc(kForeverUs) ? 1 : 0); });
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!bell.sleeping() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(bell.sleeping());
  EXPECT_FALSE(bell.armed());
  bell.ring();  // a producer: no syscall, the nap goes on
  EXPECT_EQ(bell.wakes(), 0u);
  EXPECT_EQ(rung.load(), -1);
  bell.ringAlways();  // control: ends it
  owner.join();
  EXPECT_EQ(rung.load(), 1);
  EXPECT_EQ(bell.wakes(), 1u);
  EXPECT_FALSE(bell.sleeping());
}

// The protocol of doorbell.h with one owner and `producers` threads, each handing
// over `rounds` items one at a time and waiting (bounded) for it to be taken. The
// owner re-checks after arming and waits "forever" otherwise, so a lost wake-up
// leaves a producer waiting until its bound.
void lostWakeupRace(int producers, uint64_t rounds) {
  Doorbell bell;
  std::atomic<uint64_t> offered{0};  // items handed over (the "ring write")
  std::atomic<uint64_t> taken{0};
  std::atomic<bool> stop{false};
  std::thread owner([&] {
    while (!stop.load(std::memory_order_acquire)) {
      if (taken.load(std::memory_order_relaxed) < offered.load(std::memory_order_acquire)) {
        taken.fetch_add(1, std::memory_order_release);
        continue;
      }
      bell.arm_lc();
      if (stop.load(std::memory_order_acquire) ||
          taken.load(std::memory_order_relaxed) < offered.load(std::memory_order_acquire)) {
        bell.disarm_lc();  // the re-check found work
        continue;
      }
      bell.wait_lc(kForeverUs);
    }
  });
  std::atomic<int> stuck{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (uint64_t i = 0; i < rounds && stuck.load() == 0; ++i) {
        const uint64_t mine = offered.fetch_add(1, std::memory_order_release) + 1;
        bell.ring();
        const auto deadline = std::chrono::steady_clock::now() + 30s;
        while (taken.load(std::memory_order_acquire) < mine) {
          if (std::chrono::steady_clock::now() > deadline) {
            stuck.fetch_add(1);
            break;
          }
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true, std::memory_order_release);
  bell.ring();
  owner.join();
  EXPECT_EQ(stuck.load(), 0) << "a producer waited 30 s for an item: a lost wake-up";
  EXPECT_EQ(taken.load(), offered.load());
  EXPECT_LE(bell.wakes(), uint64_t(producers) * rounds + 1);  // never more than one per ring
}

TEST(Doorbell, NoLostWakeupOneProducer) {
  lostWakeupRace(1, 5000);
}

TEST(Doorbell, NoLostWakeupThreeProducers) {
  lostWakeupRace(3, 2000);
}

}  // namespace
}  // namespace tent::lcore
