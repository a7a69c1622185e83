// The direct path in manual lcore mode: selection, multi-rail all-or-fallback,
// fallbacks, completion (caller or rail poller), errors, timeout, cancel, teardown.
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "base/ebr.h"
#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

using Direct = DirectFixture;

TEST_F(Direct, ForegroundGetPostsDirectAndCallerCompletesIt) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 1);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));
  auto d = direct();
  EXPECT_EQ(d.attempted, 1u);
  EXPECT_EQ(d.succeeded, 1u);
  // No poller is stepped: getTransferStatus alone drives the direct completion.
  auto st = pollCaller(b);
  ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(st.transferred_bytes, 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 1), -1);
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_EQ(engine->stats().worker.tasks, 0u);
  EXPECT_EQ(engine->stats().bytes_transferred, 4096u);
  uint64_t hist = 0;
  for (auto v : direct().latency_histogram_ns) hist += v;
  EXPECT_EQ(hist, 1u);
}

TEST_F(Direct, DeadlineSelectsDirectAndUnspecDoesNot) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 8192, 2);
  BatchId b =
      submitOne(req(OpCode::WRITE, 0, 4096, IntentType::UNSPEC, rdma::steadyNowNs() + 1000000));
  EXPECT_EQ(pollCaller(b).state, TransferState::COMPLETED);
  EXPECT_EQ(direct().succeeded, 1u);
  BatchId w = submitOne(req(OpCode::WRITE, 4096, 4096, IntentType::MIGRATION));
  EXPECT_EQ(direct().attempted, 1u);  // not latency-sensitive: never tried
  EXPECT_EQ(waitTask(*engine, w, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(engine->stats().worker.tasks, 1u);
  EXPECT_EQ(checkPattern(dst, 8192, 2), -1);
}

TEST_F(Direct, ReadBackThroughDirect) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(dst, 65536, 3);
  std::memset(src, 0, 65536);
  BatchId b = submitOne(req(OpCode::READ, 0, 65536));
  ASSERT_EQ(pollCaller(b).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(src, 65536, 3), -1);
  EXPECT_EQ(direct().succeeded, 1u);
}

TEST_F(Direct, MultiRailSplitsOverDistinctDevices) {
  ASSERT_TRUE(waitEndpoints());
  auto before0 = engine->provider().device(0).counters().wrs;
  auto before1 = engine->provider().device(1).counters().wrs;
  fillPattern(src, 256 << 10, 4);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 256 << 10));  // 4 blocks, 2 devices -> 2 slices
  auto* task = engine->taskFor(b, 0);
  ASSERT_NE(task, nullptr);
  EXPECT_EQ(task->slice_count, 2u);
  EXPECT_EQ(task->direct_contexts.load(), 0b11u);
  ASSERT_EQ(pollCaller(b).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 256 << 10, 4), -1);
  EXPECT_EQ(engine->provider().device(0).counters().wrs - before0, 1u);
  EXPECT_EQ(engine->provider().device(1).counters().wrs - before1, 1u);
  EXPECT_EQ(lanesInUse(), 0u);
  // One block or less: one slice on one device.
  BatchId small = submitOne(req(OpCode::WRITE, 0, 65536));
  EXPECT_EQ(engine->taskFor(small, 0)->slice_count, 1u);
  EXPECT_EQ(pollCaller(small).state, TransferState::COMPLETED);
}

TEST_F(Direct, AllOrFallbackWhenOneLaneIsBusy) {
  ASSERT_TRUE(waitEndpoints());
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(1).tryAcquireDirectLane(&holder));
  fillPattern(src, 256 << 10, 5);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 256 << 10));
  auto d = direct();
  EXPECT_EQ(d.fallback_lane_busy, 1u);
  EXPECT_EQ(d.succeeded, 0u);
  // Nothing was posted directly, and the lane of context 0 was released again.
  EXPECT_EQ(t().context(0).lanesInUse(), 0u);
  EXPECT_EQ(t().context(1).lanesInUse(), 1u);
  EXPECT_FALSE(engine->taskFor(b, 0)->direct.load());
  ASSERT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 256 << 10, 5), -1);
  EXPECT_GT(engine->stats().worker.foreground_fallback_slices, 0u);
  EXPECT_TRUE(t().context(1).releaseDirectLane(&holder));
  EXPECT_EQ(t().slicePool().available(), t().slicePool().capacity());
}

TEST_F(Direct, FallbackGoesToTheRailPollerNotBehindBulk) {
  ASSERT_TRUE(waitEndpoints());
  // Bulk slices queued on the background lcore (1), which we never step.
  BatchId bulk = submitOne(req(OpCode::WRITE, 1 << 20, 2 << 20, IntentType::UNSPEC));
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  ASSERT_TRUE(t().context(1).tryAcquireDirectLane(&holder));
  fillPattern(src, 4096, 6);
  BatchId fg = submitOne(req(OpCode::WRITE, 0, 4096));
  EXPECT_EQ(direct().fallback_lane_busy, 1u);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine->getTransferStatus(fg, 0)->state == TransferState::PENDING &&
         std::chrono::steady_clock::now() < deadline)
    t().runtime().runOnce(0);  // only the rail lcore
  EXPECT_EQ(engine->getTransferStatus(fg, 0)->state, TransferState::COMPLETED);
  EXPECT_EQ(engine->getTransferStatus(bulk, 0)->state, TransferState::PENDING);
  EXPECT_EQ(checkPattern(dst, 4096, 6), -1);
  t().context(0).releaseDirectLane(&holder);
  t().context(1).releaseDirectLane(&holder);
  EXPECT_EQ(waitTask(*engine, bulk, 0).state, TransferState::COMPLETED);
}

TEST_F(Direct, OverSizeCapFallsBack) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, kBuf, 7);
  BatchId b = submitOne(req(OpCode::WRITE, 0, (4 << 20) - 1 + 1));  // == cap: eligible
  EXPECT_EQ(pollCaller(b).state, TransferState::COMPLETED);
  engine.reset();
  init("direct: {max_bytes: 65536}\n");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 65537, 8);
  BatchId over = submitOne(req(OpCode::WRITE, 0, 65537));
  EXPECT_EQ(direct().fallback_over_size_cap, 1u);
  EXPECT_EQ(waitTask(*engine, over, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 65537, 8), -1);
}

TEST_F(Direct, ModeOffAndForce) {
  engine.reset();
  init("direct: {mode: \"off\"}\n");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 9);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));
  EXPECT_EQ(direct().fallback_mode_off, 1u);
  EXPECT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 9), -1);
  EXPECT_EQ(endpoint(0)->directQp(), nullptr);  // off: no direct QP at all
  engine.reset();
  init("direct: {mode: force}\n");
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 10);
  BatchId f = submitOne(req(OpCode::WRITE, 0, 4096, IntentType::UNSPEC));
  EXPECT_EQ(direct().succeeded, 1u);
  EXPECT_EQ(pollCaller(f).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 10), -1);
}

TEST_F(Direct, EndpointNotReadyFallsBackAndConnects) {
  fillPattern(src, 4096, 11);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));  // nothing connected yet
  EXPECT_EQ(direct().fallback_endpoint_not_ready, 1u);
  EXPECT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 11), -1);
}

TEST_F(Direct, RailPollerCompletesWhenTheCallerDoesNotPoll) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 4096, 12);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 4096));
  auto* task = engine->taskFor(b, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (task->loadState() == TransferState::PENDING && std::chrono::steady_clock::now() < deadline)
    t().runtime().runOnce(0);  // the rail lcore polls the direct CQ
  EXPECT_EQ(task->loadState(), TransferState::COMPLETED);
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_EQ(checkPattern(dst, 4096, 12), -1);
}

// With no retry left (workers.max_slice_retries: 0) a direct completion error fails
// the task, as it fails a worker slice; direct_semantics_test.cc has the retry.
TEST_F(Direct, CompletionErrorFailsTaskReleasesLaneResetsEndpoint) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("", ", max_slice_retries: 0");
  ASSERT_TRUE(waitEndpoints());
  auto* ep = endpoint(0);
  faultOnDirectQp(*this, fabric::soft::FaultAction::kCompletionError);
  fillPattern(src, 4096, 13);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  EXPECT_EQ(direct().succeeded, 1u);
  EXPECT_EQ(pollCaller(b).state, TransferState::FAILED);
  EXPECT_EQ(direct().completion_errors, 1u);
  EXPECT_EQ(direct().retries, 0u);  // max_slice_retries: 0, so no retry
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_EQ(ep->directDepth(), 0u);
  EXPECT_NE(ep->state(), rdma::EndpointState::kReady);  // retired
  // The next request succeeds (a new endpoint generation; direct once it is ready).
  ASSERT_TRUE(waitFor([&] {
    auto* fresh = endpoint(0);
    return fresh && fresh != ep;
  }));
  BatchId next = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  EXPECT_EQ(pollCaller(next).state, TransferState::COMPLETED);
  EXPECT_EQ(direct().succeeded, 2u);
  EXPECT_EQ(checkPattern(dst, 4096, 13), -1);
}

TEST_F(Direct, SoftwareTimeoutGivesTimeout) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  engine.reset();
  init("direct: {timeout_ms: 50}\n");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 30'000'000'000ull);
  fillPattern(src, 4096, 14);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_EQ(direct().succeeded, 1u);
  auto st = pollCaller(b, 20);
  EXPECT_EQ(st.state, TransferState::TIMEOUT);
  EXPECT_EQ(direct().timeouts, 1u);
  EXPECT_EQ(lanesInUse(), 0u);
  // The WR itself was executed at post time (the soft NIC copies then): bytes landed.
  EXPECT_EQ(checkPattern(dst, 4096, 14), -1);
}

TEST_F(Direct, CancelLetsThePostedWrDrain) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 100'000'000ull);  // 100 ms
  fillPattern(src, 4096, 15);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_TRUE(engine->cancelTransfer(b, 0).ok());
  auto* task = engine->taskFor(b, 0);
  // Terminal means drained: CANCELED only once the posted WR can no longer write.
  ASSERT_TRUE(waitFor([&] {
    auto st = engine->getTransferStatus(b, 0)->state;
    if (st != TransferState::PENDING) {
      EXPECT_EQ(task->slices_left.load(), 0u);
    }
    EXPECT_EQ(st == TransferState::PENDING, lanesInUse() == 1u);
    return st != TransferState::PENDING;
  }));
  EXPECT_EQ(engine->getTransferStatus(b, 0)->state, TransferState::CANCELED);
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_EQ(engine->getTransferStatus(b, 0)->transferred_bytes, 4096u);  // it drained normally
  EXPECT_EQ(checkPattern(dst, 4096, 15), -1);
}

TEST_F(Direct, DestroyWithDirectWrOutstandingDrainsThenFrees) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  // The flushed piece retries on the worker path (a flush is not its fault); with the
  // endpoint never proven its slot backs off - for longer than the test - and with no
  // retry left the retry fails instead of reconnecting (which would add endpoints).
  init("endpoints: {reconnect_initial_ms: 600000, reconnect_max_ms: 600000}\n",
       ", max_slice_retries: 0");
  ASSERT_TRUE(waitEndpoints());
  const auto before = engine->stats().resources;
  auto* ep = endpoint(0);
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 30'000'000'000ull);
  fillPattern(src, 4096, 16);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_EQ(ep->directDepth(), 1u);
  {
    ebr::ReadSection section;
    t().datapath().requestReset(ep);  // the control plane moves its QPs (direct too) to ERR
  }
  // The flush completes on the direct CQ; the rail lcore polls it; the endpoint drains
  // and is freed once no reader can hold it, and its passive side (in this loopback
  // engine too) is released. `ep` must not be touched any more.
  ASSERT_TRUE(waitFor([&] {
    t().runtime().runOnce(0);
    auto r = engine->stats().resources;
    return engine->getTransferStatus(b, 0)->state != TransferState::PENDING &&
           r.endpoints_retired == 0 && r.endpoints_live == before.endpoints_live - 2;
  }));
  EXPECT_EQ(engine->getTransferStatus(b, 0)->state, TransferState::FAILED);
  EXPECT_EQ(lanesInUse(), 0u);
  EXPECT_LT(engine->stats().resources.qps_live, before.qps_live);
  EXPECT_EQ(checkPattern(dst, 4096, 16), -1);  // executed at post time, then flushed
}

}  // namespace
}  // namespace tent::testing
