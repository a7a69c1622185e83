// workers.priority_lane (docs/config.md): latency-sensitive requests that take the
// worker path go to their context's rail poller when the lane is on, and queue with
// bulk on the background pollers when it is off; `auto` is on unless direct.mode is
// off, so `direct.mode: off` alone is the pre-RFC engine. Manual lcores: lcore 0 runs
// the rail pollers, lcore 1 the background poller, and the test steps them itself.
#include <gtest/gtest.h>

#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

struct PriorityLane : DirectFixture {
  void SetUp() override {}  // each test picks its config

  uint64_t heldBy(rdma::SlicePoller::Kind kind) {
    uint64_t n = 0;
    for (size_t i = 0; i < t().pollerCount(); ++i)
      if (t().poller(i).kind() == kind) n += t().poller(i).heldSlices();
    return n;
  }
  // Submits a FOREGROUND_GET WRITE on context 0 and checks which poller kind holds it.
  BatchId submitForeground(uint32_t seed) {
    fillPattern(src, 4096, seed);
    return submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  }
  void expectCompletedWithBytes(BatchId b, uint32_t seed) {
    TransferStatus st = waitTask(*engine, b, 0);
    EXPECT_EQ(st.state, TransferState::COMPLETED);
    EXPECT_EQ(st.transferred_bytes, 4096u);
    EXPECT_EQ(checkPattern(dst, 4096, seed), -1);
  }
};

TEST_F(PriorityLane, DirectModeOffAloneIsThePreRfcEngine) {
  init("direct: {mode: off}\n");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(engine->stats().paths, "direct.mode=off workers.priority_lane=off (auto)");
  BatchId b = submitForeground(71);
  EXPECT_FALSE(engine->taskFor(b, 0)->direct.load());
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kRail), 0u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kBackground), 1u);  // behind bulk, as before
  expectCompletedWithBytes(b, 71);
  EXPECT_EQ(engine->stats().worker.foreground_fallback_slices, 0u);
  EXPECT_EQ(engine->stats().direct.fallback_mode_off, 1u);
}

TEST_F(PriorityLane, OnWithTheDirectPathOffServesForegroundOnTheRailPoller) {
  init("direct: {mode: off}\n", ", priority_lane: on");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(engine->stats().paths, "direct.mode=off workers.priority_lane=on");
  BatchId b = submitForeground(72);
  rdma::RdmaTask* task = engine->taskFor(b, 0);
  EXPECT_FALSE(task->direct.load());
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kRail), 1u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kBackground), 0u);
  // Only the rail lcore runs: the slice is its to post and complete.
  ASSERT_TRUE(waitFor([&] {
    t().runtime().runOnce(0);
    return task->loadState() != TransferState::PENDING;
  }));
  expectCompletedWithBytes(b, 72);
  EXPECT_EQ(engine->stats().worker.foreground_fallback_slices, 1u);
}

TEST_F(PriorityLane, BulkNeverTakesTheLane) {
  init("direct: {mode: off}\n", ", priority_lane: on");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 73);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096, IntentType::MIGRATION), 0b01);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kRail), 0u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kBackground), 1u);
  expectCompletedWithBytes(b, 73);
}

TEST_F(PriorityLane, OffSendsDirectFallbacksBehindBulk) {
  init("", ", priority_lane: off");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(engine->stats().paths, "direct.mode=auto workers.priority_lane=off");
  rdma::RdmaTask holder;  // the lane is busy: the request falls back
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  BatchId b = submitForeground(74);
  t().context(0).releaseDirectLane(&holder);
  EXPECT_FALSE(engine->taskFor(b, 0)->direct.load());
  EXPECT_EQ(engine->stats().direct.fallback_lane_busy, 1u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kRail), 0u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kBackground), 1u);
  expectCompletedWithBytes(b, 74);
}

TEST_F(PriorityLane, AutoSendsDirectFallbacksToTheRailPoller) {
  init("");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(engine->stats().paths, "direct.mode=auto workers.priority_lane=on (auto)");
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  BatchId b = submitForeground(75);
  t().context(0).releaseDirectLane(&holder);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kRail), 1u);
  EXPECT_EQ(heldBy(rdma::SlicePoller::Kind::kBackground), 0u);
  expectCompletedWithBytes(b, 75);
}

}  // namespace
}  // namespace tent::testing
