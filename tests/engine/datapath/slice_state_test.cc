// A slice's explicit state (SliceState, model/rdma_task.h) through the worker and
// direct paths: each hand-off leaves it in the state that names its owner, and every
// slice a transfer used is back in kFree once the transfer ended (counted over the
// whole pool). Manual lcores: lcore 0 runs the rail pollers, lcore 1 the background.
#include <gtest/gtest.h>

#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

using rdma::SliceState;

struct SliceStates : DirectFixture {
  void SetUp() override {}  // each test picks its config
  uint32_t in(SliceState s) { return t().slicePool().countIn(s); }
  uint32_t capacity() { return t().slicePool().capacity(); }
  // Bulk (no deadline, not FOREGROUND_GET): the worker path's background poller.
  Request bulk(size_t len) { return req(OpCode::WRITE, 0, len, IntentType::MIGRATION); }
};

TEST_F(SliceStates, WorkerSlicesGoQueuedPostedAndBackToFree) {
  init("direct: {mode: off}\n");
  ASSERT_TRUE(waitEndpoints());
  ASSERT_EQ(in(SliceState::kFree), capacity());
  constexpr size_t kLen = 4 * 65536;  // four slices of workers.block_size
  fillPattern(src, kLen, 91);
  BatchId b = submitOne(bulk(kLen));
  // Resolved once: the placement stays with the task, the segment record (valid only
  // inside the submit's read section) does not.
  const rdma::RdmaTask* task = engine->taskFor(b, 0);
  EXPECT_GE(task->placement_count, 1u);
  EXPECT_EQ(task->record, nullptr);
  // Nothing ran yet: the ring owns every slice of the task.
  EXPECT_EQ(in(SliceState::kQueued), 4u);
  EXPECT_EQ(in(SliceState::kFree), capacity() - 4);
  // One background pass drains, stages and posts them all (the endpoint is ready and
  // its QP has room); each is then posted, or completed and already returned.
  t().runtime().runOnce(1);
  EXPECT_EQ(in(SliceState::kQueued), 0u);
  EXPECT_EQ(in(SliceState::kPending), 0u);
  EXPECT_EQ(in(SliceState::kStaged), 0u);
  EXPECT_EQ(in(SliceState::kPosted) + in(SliceState::kFree), capacity());
  TransferStatus st = waitTask(*engine, b, 0);
  EXPECT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(st.transferred_bytes, kLen);
  EXPECT_EQ(checkPattern(dst, kLen, 91), -1);
  ASSERT_TRUE(drainPollers(*engine));
  EXPECT_EQ(in(SliceState::kFree), capacity());
}

TEST_F(SliceStates, CanceledBeforePostingEveryQueuedSliceIsFreed) {
  init("direct: {mode: off}\n");
  ASSERT_TRUE(waitEndpoints());
  BatchId b = submitOne(bulk(3 * 65536));
  EXPECT_EQ(in(SliceState::kQueued), 3u);
  ASSERT_TRUE(engine->cancelTransfer(b, 0).ok());
  TransferStatus st = waitTask(*engine, b, 0);
  EXPECT_EQ(st.state, TransferState::CANCELED);
  EXPECT_EQ(st.transferred_bytes, 0u);  // canceled before any WR was posted
  ASSERT_TRUE(drainPollers(*engine));
  EXPECT_EQ(in(SliceState::kFree), capacity());
  EXPECT_EQ(in(SliceState::kDone), 0u);
}

TEST_F(SliceStates, DirectPieceIsPostedDirectUntilItsCallerPollsIt) {
  init("");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 92);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_TRUE(engine->taskFor(b, 0)->direct.load());
  // No poller ran and the caller has not polled: the direct CQ holds its completion.
  EXPECT_EQ(in(SliceState::kPostedDirect), 1u);
  EXPECT_EQ(in(SliceState::kFree), capacity() - 1);
  TransferStatus st = pollCaller(b);
  EXPECT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 92), -1);
  EXPECT_EQ(in(SliceState::kFree), capacity());
}

// A one-slice worker task carries its slice inside itself: the pool is not touched,
// the slice goes Queued -> Posted -> Done and stays with the task, and the task's
// memory (its batch recycled) carries the next one-slice request the same way.
TEST_F(SliceStates, OneSliceWorkerTaskCarriesItsOwnSlice) {
  init("direct: {mode: off}\n");
  ASSERT_TRUE(waitEndpoints());
  for (int round = 0; round < 3; ++round) {
    const auto seed = static_cast<uint8_t>(93 + round);
    fillPattern(src, 4096, seed);
    BatchId b = submitOne(bulk(4096));
    const rdma::RdmaTask* task = engine->taskFor(b, 0);
    EXPECT_TRUE(task->inline_slice.in(SliceState::kQueued)) << round;
    EXPECT_EQ(in(SliceState::kFree), capacity()) << round;
    // Pending and one slice: no progress to report before its end.
    EXPECT_EQ(engine->getTransferStatus(b, 0)->transferred_bytes, 0u);
    TransferStatus st = waitTask(*engine, b, 0);
    EXPECT_EQ(st.state, TransferState::COMPLETED) << round;
    EXPECT_EQ(st.transferred_bytes, 4096u) << round;
    EXPECT_EQ(checkPattern(dst, 4096, seed), -1) << round;
    EXPECT_TRUE(task->inline_slice.in(SliceState::kDone)) << round;
    ASSERT_TRUE(drainPollers(*engine));  // every poller's held count is back to 0
    EXPECT_EQ(in(SliceState::kFree), capacity()) << round;
    ASSERT_TRUE(engine->freeBatch(b).ok());
  }
}

// With every pool slice taken by a queued multi-slice task, a one-slice request is
// still accepted (it needs no pool slice) and both complete with their bytes.
TEST_F(SliceStates, OneSliceRequestNeedsNoPoolSlice) {
  init("direct: {mode: off}\n", ", slice_pool: 4");
  ASSERT_TRUE(waitEndpoints());
  ASSERT_EQ(capacity(), 4u);
  constexpr size_t kBig = 4 * 65536;  // four slices of workers.block_size: the whole pool
  fillPattern(src, kBig + 4096, 97);
  BatchId big = submitOne(bulk(kBig));
  EXPECT_EQ(in(SliceState::kFree), 0u);
  Request small = req(OpCode::WRITE, kBig, 4096, IntentType::MIGRATION);
  BatchId one = submitOne(small);
  TransferStatus st_one = waitTask(*engine, one, 0);
  TransferStatus st_big = waitTask(*engine, big, 0);
  EXPECT_EQ(st_one.state, TransferState::COMPLETED);
  EXPECT_EQ(st_big.state, TransferState::COMPLETED);
  EXPECT_EQ(st_big.transferred_bytes, kBig);
  EXPECT_EQ(checkPattern(dst, kBig + 4096, 97), -1);
  ASSERT_TRUE(drainPollers(*engine));
  EXPECT_EQ(in(SliceState::kFree), capacity());
}

}  // namespace
}  // namespace tent::testing
