// The datapath's requests to the control plane travel through one MPSC ring: connect
// requests (an endpoint slot) and descriptor refetches (a segment id, rate limited), each
// with one wake-up of the control loop when newly queued.
#include <gtest/gtest.h>
#include <poll.h>

#include "model/control_requests.h"
#include "model/segment_table.h"

namespace tent::rdma {
namespace {

bool wakeReady(const ControlRequests& r) {
  pollfd p{r.wakeFd(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(ControlRequests, ConnectsAndRefetchesComeOutInOrderEachOnce) {
  ControlRequests r;
  ASSERT_TRUE(r.init(64, /*refresh_gap_ns=*/0).ok());
  SegmentRecord rec(7, 1, 1);
  EndpointSlot* slot = rec.slot(0, 0);
  slot->record = &rec;
  EXPECT_FALSE(wakeReady(r));
  r.queue(slot);
  r.queue(slot);  // already queued: not twice
  r.queueRefresh(7);
  EXPECT_TRUE(wakeReady(r));
  ControlRequest got;
  ASSERT_TRUE(r.next(&got));
  EXPECT_EQ(got.connect, slot);
  ASSERT_TRUE(r.next(&got));
  EXPECT_EQ(got.connect, nullptr);
  EXPECT_EQ(got.refresh, SegmentId{7});
  EXPECT_FALSE(r.next(&got));
  r.drainWake();
  EXPECT_FALSE(wakeReady(r));
  r.queue(slot);  // dequeued: may be queued again
  ASSERT_TRUE(r.next(&got));
  EXPECT_EQ(got.connect, slot);
}

TEST(ControlRequests, RefetchesAreRateLimited) {
  ControlRequests r;
  ASSERT_TRUE(r.init(64, /*refresh_gap_ns=*/uint64_t{3600} * 1'000'000'000).ok());
  r.queueRefresh(1);
  r.queueRefresh(2);  // inside the gap: dropped (the next request after the gap asks again)
  ControlRequest got;
  ASSERT_TRUE(r.next(&got));
  EXPECT_EQ(got.refresh, SegmentId{1});
  EXPECT_FALSE(r.next(&got));
  EXPECT_EQ(r.refreshesSkipped(), 1u);
}

TEST(ControlRequests, AFullRingDropsARefetchAndTheNextOneIsAsked) {
  ControlRequests r;
  ASSERT_TRUE(r.init(4, /*refresh_gap_ns=*/0).ok());
  size_t queued = 0;
  for (SegmentId id = 1; id <= 16; ++id) r.queueRefresh(id);
  ControlRequest got;
  while (r.next(&got)) ++queued;
  EXPECT_GE(queued, 1u);
  EXPECT_LT(queued, 16u);
  r.queueRefresh(99);
  ASSERT_TRUE(r.next(&got));
  EXPECT_EQ(got.refresh, SegmentId{99});
}

}  // namespace
}  // namespace tent::rdma
