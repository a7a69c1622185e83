// waitTransfer's nap (api/wait_nap.h): the whole bound at once for a worker task (its
// end rings the completion bell), the backoff's ramp up to a short bound for a direct
// one (only its caller's poll finds its end), never past the wait's deadline.
#include "api/wait_nap.h"

#include <gtest/gtest.h>

namespace tent {
namespace {

TEST(WaitNap, WorkerTaskNapsUpToTheWorkerBound) {
  EXPECT_EQ(waitNapUs(false, 1'000'000, 10'000'000'000ull), kWorkerWaitNapUs);
  EXPECT_GT(kWorkerWaitNapUs, kDirectWaitNapUs);
}

TEST(WaitNap, DirectTaskNapsUpToTheDirectBound) {
  EXPECT_EQ(waitNapUs(true, 1'000'000, 10'000'000'000ull), kDirectWaitNapUs);
}

TEST(WaitNap, DirectTaskFollowsTheBackoffRamp) {
  EXPECT_EQ(waitNapUs(true, 1, 10'000'000'000ull), 1u);
  EXPECT_EQ(waitNapUs(true, 8, 10'000'000'000ull), 8u);
}

TEST(WaitNap, WorkerTaskSkipsTheRamp) {
  EXPECT_EQ(waitNapUs(false, 1, 10'000'000'000ull), kWorkerWaitNapUs);
}

TEST(WaitNap, NoNapRunsPastTheDeadline) {
  EXPECT_EQ(waitNapUs(false, 1'000'000, 300'000), 301u);  // 300 us left, rounded up
  EXPECT_EQ(waitNapUs(false, 1'000'000, 0), 1u);          // at least 1 us
  EXPECT_EQ(waitNapUs(true, 1'000'000, 50'000), 51u);
}

}  // namespace
}  // namespace tent
