// Stress (not in the default run): the lost wake-up race of eal_doorbell_test.cc,
// longer and with more producers than CPUs, so producers are preempted between
// their ring write and their ring() as well.
#include <gtest/gtest.h>

#include "eal_test_util.h"
#include "lcore/ring.h"
#include "ring_race.h"

namespace tent::lcore {
namespace {

TEST(DoorbellStress, NoLostWakeupFourProducers) {
  auto rt = testing::acquireTwoLcores(testing::sleepAtOncePolicy());
  ASSERT_NE(rt, nullptr);
  auto ring = RawRing::create("doorbell", 1024, /*single_consumer=*/true);
  ASSERT_TRUE(ring.ok());
  testing::RingPoller poller(**ring);
  ASSERT_TRUE(rt->attach(1, &poller).ok());
  const testing::RaceResult r = testing::runRingRace(**ring, poller, 4, 50000);
  ASSERT_TRUE(rt->detach(1, &poller).ok());
  EXPECT_EQ(r.stuck, 0) << "an item waited 30 s in the ring of a sleeping lcore";
  EXPECT_EQ(r.rounds_done, 200000u);
  EXPECT_EQ(poller.errors(), 0u);
  RecordProperty("blocks", std::to_string(rt->stats(1).blocks));
  RecordProperty("doorbell_wakes", std::to_string(rt->stats(1).doorbell_wakes));
}

}  // namespace
}  // namespace tent::lcore
