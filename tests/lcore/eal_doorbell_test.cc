// The idle doorbell with real lcores: an idle lcore sleeps until woken, producers
// wake it (and only when it sleeps), stop and attach/detach still reach it, and
// the time it sleeps is accounted as idle. Bounded waits, no timing thresholds.
#include <gtest/gtest.h>
#include <rte_cycles.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "eal_test_util.h"
#include "lcore/ring.h"
#include "ring_race.h"
#include "test_pollers.h"

namespace tent::lcore {
namespace {

using testing::acquireTwoLcores;
using testing::CountingPoller;
using testing::RingPoller;
using testing::runRingRace;
using testing::sleepAtOncePolicy;
using testing::waitFor;

std::unique_ptr<RawRing> makeRing() {
  auto ring = RawRing::create("doorbell", 1024, /*single_consumer=*/true);
  EXPECT_TRUE(ring.ok());
  return ring.ok() ? std::move(ring).value() : nullptr;
}

TEST(EalDoorbell, NoLostWakeupTwoProducers) {
  auto rt = acquireTwoLcores(sleepAtOncePolicy());
  ASSERT_NE(rt, nullptr);
  auto ring = makeRing();
  ASSERT_NE(ring, nullptr);
  RingPoller poller(*ring);
  ASSERT_TRUE(rt->attach(0, &poller).ok());
  const testing::RaceResult r = runRingRace(*ring, poller, 2, 2000);
  ASSERT_TRUE(rt->detach(0, &poller).ok());
  EXPECT_EQ(r.stuck, 0) << "an item waited 30 s in the ring of a sleeping lcore";
  EXPECT_EQ(r.rounds_done, 4000u);
  EXPECT_EQ(poller.errors(), 0u);
  const LcoreStats s = rt->stats(0);
  EXPECT_GT(s.blocks, 0u);  // it did sleep until woken, so the race was run
  EXPECT_GT(s.doorbell_wakes, 0u);
  EXPECT_LE(s.doorbell_wakes, 4000u + 2);  // at most one per hand-over (+ attach, detach)
}

// An lcore that never runs out of its spin window never arms its doorbell: the
// producers make no syscall and the lcore never sleeps.
TEST(EalDoorbell, SpinningLcoreCostsProducersNoSyscall) {
  config::IdlePolicy spin = sleepAtOncePolicy();
  spin.spin_polls = 1 << 30;
  auto rt = acquireTwoLcores(spin);
  ASSERT_NE(rt, nullptr);
  auto ring = makeRing();
  ASSERT_NE(ring, nullptr);
  RingPoller poller(*ring);
  ASSERT_TRUE(rt->attach(0, &poller).ok());
  const testing::RaceResult r = runRingRace(*ring, poller, 1, 500);
  ASSERT_TRUE(rt->detach(0, &poller).ok());
  EXPECT_EQ(r.rounds_done, 500u);
  EXPECT_EQ(rt->stats(0).sleeps, 0u);
  EXPECT_EQ(rt->stats(0).doorbell_wakes, 0u);
}

// A poller that expects unannounced work (posted WRs) keeps its lcore to naps;
// block_max_us 0 does the same for every poller.
TEST(EalDoorbell, PollerThatNeedsPollingGetsNapsOnly) {
  auto rt = acquireTwoLcores(sleepAtOncePolicy());
  ASSERT_NE(rt, nullptr);
  auto ring = makeRing();
  ASSERT_NE(ring, nullptr);
  RingPoller quiet(*ring), polling(*ring, /*needs_polling=*/true);
  ASSERT_TRUE(rt->attach(0, &polling).ok());
  const uint64_t blocks = rt->stats(0).blocks;
  const uint64_t sleeps = rt->stats(0).sleeps;
  ASSERT_TRUE(waitFor([&] { return rt->stats(0).sleeps > sleeps + 100; }));
  EXPECT_EQ(rt->stats(0).blocks, blocks);
  ASSERT_TRUE(rt->detach(0, &polling).ok());
  rt.reset();

  config::IdlePolicy naps = sleepAtOncePolicy();
  naps.block_max_us = 0;
  rt = acquireTwoLcores(naps);
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(rt->attach(0, &quiet).ok());
  ASSERT_TRUE(waitFor([&] { return rt->stats(0).sleeps > 100; }));
  EXPECT_EQ(rt->stats(0).blocks, 0u);
  ASSERT_TRUE(rt->detach(0, &quiet).ok());
}

// Runs `f` on another thread and waits for it (bounded). A hang is a failure, and
// the process cannot continue past it.
template <typename F>
void finishesWithin30s(F f, const char* what) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    f();
    done.store(true);
  });
  if (!waitFor([&] { return done.load(); })) {
    ADD_FAILURE() << what << " did not return within 30 s";
    std::_Exit(1);
  }
  t.join();
}

// Sleeping until woken (a minute, here) must hold up neither detach, attach nor stop.
TEST(EalDoorbell, BlockedLcoreStillAttachesDetachesAndStops) {
  auto rt = acquireTwoLcores(sleepAtOncePolicy());
  ASSERT_NE(rt, nullptr);
  ASSERT_TRUE(waitFor([&] { return rt->stats(0).blocks > 0 && rt->stats(1).blocks > 0; }));
  CountingPoller p("p");
  for (int i = 0; i < 5; ++i) {
    const uint64_t blocks = rt->stats(0).blocks;
    finishesWithin30s([&] { ASSERT_TRUE(rt->attach(0, &p).ok()); }, "attach");
    finishesWithin30s([&] { ASSERT_TRUE(rt->detach(0, &p).ok()); }, "detach");
    ASSERT_TRUE(waitFor([&] { return rt->stats(0).blocks > blocks; }));  // asleep again
  }
  EXPECT_GE(p.calls(), 5u);
  finishesWithin30s([&] { rt.reset(); }, "stop");
}

// The time an lcore sleeps until woken is idle time: the pass that wakes accounts
// it, so the cycles accounted across a block cover the time the test saw pass.
// The lcore is seen asleep (armed) first: with its one poller holding nothing and
// nothing ringing it, it stays so for a minute, so the ring below must wake it.
TEST(EalDoorbell, BlockedTimeIsAccountedAsIdle) {
  auto rt = acquireTwoLcores(sleepAtOncePolicy());
  ASSERT_NE(rt, nullptr);
  auto ring = makeRing();
  ASSERT_NE(ring, nullptr);
  RingPoller poller(*ring);
  ASSERT_TRUE(rt->attach(0, &poller).ok());
  ASSERT_TRUE(waitFor([&] { return rt->stats(0).asleep; }));
  const LcoreStats before = rt->stats(0);  // the sleep now in progress is not in it
  ASSERT_TRUE(before.asleep);
  const uint64_t t0 = rte_rdtsc();
  for (int i = 0; i < 1000; ++i) std::this_thread::yield();
  const uint64_t t1 = rte_rdtsc();
  // Wake it with one item, and wait until it took it and is asleep again: the
  // sleep and the busy pass are accounted by then.
  ASSERT_TRUE(ring->enqueue(reinterpret_cast<void*>(uintptr_t{1})));
  poller.wakeLcore();
  ASSERT_TRUE(waitFor([&] {
    const LcoreStats s = rt->stats(0);
    return poller.seen(0) == 1 && s.busy_passes > before.busy_passes && s.asleep;
  }));
  const LcoreStats after = rt->stats(0);
  ASSERT_TRUE(rt->detach(0, &poller).ok());
  EXPECT_EQ(after.busy_passes - before.busy_passes, 1u);  // the pass that took the item
  EXPECT_GE(after.idle_cycles - before.idle_cycles, t1 - t0);
  EXPECT_EQ(after.doorbell_wakes, before.doorbell_wakes + 1);  // it was asleep: one syscall
}

}  // namespace
}  // namespace tent::lcore
