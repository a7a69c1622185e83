// direct.rail_grace_us (docs/direct-path-semantics.md): with poll_by_rail the rail
// poller leaves a freshly posted lane to its caller - it does not race a spinning
// caller for the direct CQ - and takes the lane over once the grace has passed, so a
// caller that stopped polling still sees its task complete. Manual lcores: the test
// steps the rail lcore (0) itself.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

using DirectGrace = DirectFixture;

TEST_F(DirectGrace, RailPollerLeavesAFreshLaneToItsCaller) {
  init("direct: {rail_grace_us: 3600000, timeout_ms: 3600000}\n");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 61);
  const auto submitted = std::chrono::steady_clock::now();
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));
  rdma::RdmaTask* task = engine->taskFor(b, 0);
  ASSERT_TRUE(task->direct.load());
  for (int i = 0; i < 200; ++i) t().runtime().runOnce(0);
  // The claim holds while the grace (an hour) runs; a thread stalled that long would
  // rightly see the rail poller take over, so only then is there nothing to check.
  if (std::chrono::steady_clock::now() - submitted < std::chrono::minutes(50)) {
    EXPECT_EQ(task->loadState(), TransferState::PENDING);
    EXPECT_EQ(lanesInUse(), 1u);
  }
  TransferStatus st = pollCaller(b);  // the caller reaps its own completion
  EXPECT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(st.transferred_bytes, 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 61), -1);
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_EQ(direct().succeeded, 1u);
}

TEST_F(DirectGrace, RailPollerTakesOverOnceTheGraceHasPassed) {
  init("direct: {rail_grace_us: 0, timeout_ms: 3600000}\n");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 62);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));
  rdma::RdmaTask* task = engine->taskFor(b, 0);
  ASSERT_TRUE(task->direct.load());
  // Never the caller's getTransferStatus: only the rail lcore runs.
  ASSERT_TRUE(waitFor([&] {
    t().runtime().runOnce(0);
    return task->loadState() != TransferState::PENDING;
  }));
  EXPECT_EQ(task->loadState(), TransferState::COMPLETED);
  EXPECT_EQ(task->transferred_bytes.load(), 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 62), -1);
  EXPECT_EQ(lanesInUse(), 0u);
}

}  // namespace
}  // namespace tent::testing
