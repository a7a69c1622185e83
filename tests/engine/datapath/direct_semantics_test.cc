// Direct-path semantics (issue 13, docs/direct-path-semantics.md): lanes released on
// every path whatever the test order, terminal means drained, progress without a
// polling caller (poll_by_rail: false), one failure semantics, no truncation,
// deadlines. Manual lcores: the test steps the rail lcore (0) and the background
// lcore (1) itself; nothing here depends on how fast the machine is.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/ebr.h"
#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

using DirectSemantics = DirectFixture;

// Every lane, quota, poster token and slice a direct task held is back.
void expectNothingHeld(DirectFixture& f) {
  EXPECT_EQ(f.lanesInUse(), 0u);
  EXPECT_EQ(f.direct().lanes_in_use, 0u);
  for (uint32_t c = 0; c < f.t().contextCount(); ++c) {
    auto* ep = f.endpoint(c);
    if (!ep) continue;
    EXPECT_EQ(ep->directDepth(), 0u) << "context " << c;
    if (ep->directQp()) {
      EXPECT_TRUE(ep->tryTakeDirectPoster()) << "context " << c;
      ep->releaseDirectPoster();
    }
  }
  EXPECT_TRUE(drainPollers(*f.engine));
  EXPECT_EQ(f.t().slicePool().available(), f.t().slicePool().capacity());
}

// Steps only the rail lcore (never the caller's getTransferStatus) until `done`.
bool stepRailUntil(DirectFixture& f, const std::function<bool()>& done) {
  return waitFor([&] {
    f.t().runtime().runOnce(0);
    return done();
  });
}

// A lane held elsewhere makes a two-part plan decline after it acquired the other
// context's lane, quota, poster and slice: all of it goes back. Both contexts are
// held in turn, and each is tried twice, so the round-robin start (which differs with
// test order) covers "acquired first" and "acquired second".
TEST_F(DirectSemantics, DeclinedPlanReleasesEverythingWhateverTheOrder) {
  ASSERT_TRUE(waitEndpoints());
  uint32_t seed = 100;
  for (uint32_t held = 0; held < 2; ++held) {
    for (int round = 0; round < 2; ++round) {
      rdma::RdmaTask holder;
      ASSERT_TRUE(t().context(held).tryAcquireDirectLane(&holder));
      fillPattern(src, 256 << 10, ++seed);
      BatchId b = submitOne(req(OpCode::WRITE, 0, 256 << 10));
      EXPECT_FALSE(engine->taskFor(b, 0)->direct.load());
      EXPECT_EQ(t().context(1 - held).lanesInUse(), 0u) << "held " << held << " round " << round;
      EXPECT_EQ(direct().lanes_in_use, 1u);
      ASSERT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);
      EXPECT_EQ(checkPattern(dst, 256 << 10, seed), -1);
      EXPECT_TRUE(t().context(held).releaseDirectLane(&holder));
      expectNothingHeld(*this);
      // The other context's lane, quota and poster really are free: a direct post there.
      const uint64_t before = direct().succeeded;
      fillPattern(src, 4096, ++seed);
      BatchId d = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 1ull << (1 - held));
      EXPECT_EQ(direct().succeeded, before + 1);
      ASSERT_EQ(pollCaller(d).state, TransferState::COMPLETED);
      EXPECT_EQ(checkPattern(dst, 4096, seed), -1);
      expectNothingHeld(*this);
    }
  }
}

// The post fails (the direct QP left RTS under us): lane, quota and poster return at
// once, and the piece completes on the worker path.
TEST_F(DirectSemantics, PostFailureReleasesAtOnceAndFallsBack) {
  ASSERT_TRUE(waitEndpoints());
  // A proven connection (one completion): its reset reconnects at once, no backoff.
  BatchId warm = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_EQ(pollCaller(warm).state, TransferState::COMPLETED);
  fillPattern(src, 4096, 21);
  BatchId b = 0;
  {
    ebr::ReadSection hold;  // the reset endpoint stays readable while we look at it
    auto* ep = endpoint(0);
    ASSERT_NE(ep->directQp(), nullptr);
    ASSERT_TRUE(ep->directQp()->modifyToError().ok());
    b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
    EXPECT_EQ(direct().post_failures, 1u);
    EXPECT_EQ(lanesInUse(), 0u);  // before anyone polls
    EXPECT_EQ(direct().lanes_in_use, 0u);
    EXPECT_EQ(ep->directDepth(), 0u);
    EXPECT_TRUE(ep->tryTakeDirectPoster());
    ep->releaseDirectPoster();
    EXPECT_EQ(engine->getTransferStatus(b, 0)->state, TransferState::PENDING);
  }
  ASSERT_TRUE(stepRailUntil(
      *this, [&] { return engine->taskFor(b, 0)->loadState() != TransferState::PENDING; }));
  auto st = engine->getTransferStatus(b, 0);
  EXPECT_EQ(st->state, TransferState::COMPLETED);
  EXPECT_EQ(st->transferred_bytes, 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 21), -1);
  EXPECT_GT(engine->stats().worker.foreground_fallback_slices, 0u);
  expectNothingHeld(*this);
}

// A piece whose fallback finds its rail poller's ring full fails its task (nothing of
// it is posted) and returns its slice; the task's other piece, posted direct, is reaped
// by the rail lcore although the caller never polls (poll_by_rail: false) and no
// timeout comes near; FAILED once it drained.
TEST_F(DirectSemantics, FallbackIntoAFullRingFailsAndReleases) {
  init("direct: {poll_by_rail: false, timeout_ms: 600000}\n", ", ring_size: 64");
  ASSERT_TRUE(waitEndpoints());
  BatchId warm = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_EQ(pollCaller(warm).state, TransferState::COMPLETED);
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  ASSERT_TRUE(t().context(1).tryAcquireDirectLane(&holder));
  // Fill the rail lcore's ring with fallbacks until a submit finds it full.
  auto fill = engine->allocateBatch(128);
  size_t queued = 0;
  for (; queued < 128; ++queued) {
    Request r = req(OpCode::WRITE, 4096, 4096);
    if (!engine->submitTransferWithMask(*fill, {&r, 1}, 0b01).ok()) break;
  }
  ASSERT_LT(queued, 128u);
  t().context(0).releaseDirectLane(&holder);
  t().context(1).releaseDirectLane(&holder);
  BatchId b = 0;
  {
    ebr::ReadSection hold;
    auto* ep = endpoint(0);
    ASSERT_TRUE(ep->directQp()->modifyToError().ok());  // the post fails: fallback
    b = submitOne(req(OpCode::WRITE, 0, 256 << 10));    // two pieces, both contexts
    EXPECT_EQ(direct().post_failures, 1u);
    EXPECT_EQ(ep->directDepth(), 0u);
  }
  auto* task = engine->taskFor(b, 0);
  ASSERT_EQ(task->direct_contexts.load(), 0b11u);
  EXPECT_TRUE(task->failing());
  ASSERT_TRUE(stepRailUntil(*this, [&] {
    auto s = task->loadState();
    if (s != TransferState::PENDING) {
      EXPECT_EQ(lanesInUse(), 0u);
    }
    return s != TransferState::PENDING;
  }));
  EXPECT_EQ(task->loadState(), TransferState::FAILED);
  EXPECT_EQ(lanesInUse(), 0u);
  for (size_t i = 0; i < queued; ++i)
    EXPECT_EQ(waitTask(*engine, *fill, i).state, TransferState::COMPLETED) << i;
  ASSERT_TRUE(waitFor([&] { return endpoint(0) != nullptr; }));
  expectNothingHeld(*this);
}

// One failure semantics: a direct piece that fails retries on the worker path (another
// device pair) within workers.max_slice_retries, as a worker slice does.
TEST_F(DirectSemantics, FailedDirectPieceRetriesAndCompletes) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kCompletionError);
  fillPattern(src, 256 << 10, 22);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 256 << 10));  // two pieces, both contexts
  ASSERT_EQ(engine->taskFor(b, 0)->direct_contexts.load(), 0b11u);
  ASSERT_TRUE(stepRailUntil(*this, [&] {
    (void)engine->getTransferStatus(b, 0);
    return engine->taskFor(b, 0)->loadState() != TransferState::PENDING;
  }));
  auto st = engine->getTransferStatus(b, 0);
  EXPECT_EQ(st->state, TransferState::COMPLETED);
  EXPECT_EQ(st->transferred_bytes, 256u << 10);
  EXPECT_EQ(checkPattern(dst, 256 << 10, 22), -1);
  EXPECT_EQ(direct().completion_errors, 1u);
  EXPECT_EQ(direct().retries, 1u);  // the failed piece, once more on the worker path
  expectNothingHeld(*this);
}

// An error on a data QP resets the endpoint, which flushes the direct QP too: the
// unrelated direct task is not failed by it (a flush retries without using up a retry).
TEST_F(DirectSemantics, DataQpErrorDoesNotFailAnUnrelatedDirectTask) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("", ", max_slice_retries: 0");
  ASSERT_TRUE(waitEndpoints());
  auto* ep = endpoint(0);
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 30'000'000'000ull);
  fillPattern(src, 4096, 23);
  BatchId d = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_TRUE(engine->taskFor(d, 0)->direct.load());
  for (auto* qp : ep->qpsFor(ep->owner())) {  // the bulk slice's data QPs on soft0
    fabric::soft::FaultRule rule;
    rule.qp_num = qp->qpNum();
    rule.every_nth = 1;
    rule.max_hits = 1;
    rule.action = fabric::soft::FaultAction::kCompletionError;
    rule.status = fabric::WcStatus::kRemoteAccess;
    ASSERT_TRUE(faults().addRule(rule).ok());
  }
  BatchId bulk = submitMasked(*this, req(OpCode::WRITE, 65536, 4096, IntentType::MIGRATION), 0b01);
  EXPECT_EQ(waitTask(*engine, bulk, 0).state, TransferState::FAILED);  // no retry allowed
  ASSERT_EQ(waitTask(*engine, d, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(engine->getTransferStatus(d, 0)->transferred_bytes, 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 23), -1);
  faults().clearRules();
  expectNothingHeld(*this);
}

// poll_by_rail: false, and the caller cancels and stops polling: the rail lcore still
// reaps the WR (after direct.timeout_ms resets its endpoint), releases the lane, and
// CANCELED is published only then.
TEST_F(DirectSemantics, CallerOnlyPollingCancelStillReaped) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("direct: {poll_by_rail: false, timeout_ms: 20}\n");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 30'000'000'000ull);
  fillPattern(src, 4096, 24);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  auto* task = engine->taskFor(b, 0);
  ASSERT_TRUE(task->direct.load());
  ASSERT_TRUE(engine->cancelTransfer(b, 0).ok());
  // Never again through the caller: only the rail lcore runs.
  ASSERT_TRUE(stepRailUntil(*this, [&] {
    auto st = task->loadState();
    if (st != TransferState::PENDING) {  // terminal => drained
      EXPECT_EQ(lanesInUse(), 0u);
    }
    return st != TransferState::PENDING;
  }));
  EXPECT_EQ(task->loadState(), TransferState::CANCELED);
  EXPECT_EQ(task->transferred_bytes.load(), 0u);  // flushed
  EXPECT_EQ(direct().timeouts, 1u);
  ASSERT_TRUE(waitFor([&] { return endpoint(0) != nullptr; }));
  expectNothingHeld(*this);
}

// The same without a timeout in sight: the cancel marks the lane, the rail lcore reaps
// the (slow, 200 ms) WR when it completes; its bytes count, the task reads CANCELED.
TEST_F(DirectSemantics, CallerOnlyPollingCancelReapedWithoutTimeout) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("direct: {poll_by_rail: false, timeout_ms: 600000}\n");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 200'000'000ull);
  fillPattern(src, 4096, 28);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  auto* task = engine->taskFor(b, 0);
  ASSERT_TRUE(engine->cancelTransfer(b, 0).ok());
  ASSERT_TRUE(stepRailUntil(*this, [&] {
    auto st = task->loadState();
    if (st != TransferState::PENDING) {
      EXPECT_EQ(lanesInUse(), 0u);
    }
    return st != TransferState::PENDING;
  }));
  EXPECT_EQ(task->loadState(), TransferState::CANCELED);
  EXPECT_EQ(task->transferred_bytes.load(), 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 28), -1);
  EXPECT_EQ(direct().timeouts, 0u);
  expectNothingHeld(*this);
}

// poll_by_rail: false, two parts, one fails for good and the other is slow (200 ms;
// no timeout comes near): the task stays PENDING while the slow WR may still write;
// the caller stops polling; the rail lcore reaps it (the failure marked its lane) and
// FAILED is published once nothing is posted.
TEST_F(DirectSemantics, CallerOnlyPollingPartialFailureDrainsThenFails) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("direct: {poll_by_rail: false, timeout_ms: 600000}\n", ", max_slice_retries: 0");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kCompletionError, 0, 0);
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 200'000'000ull, 1);
  fillPattern(src, 256 << 10, 25);
  BatchId b = submitOne(req(OpCode::WRITE, 0, 256 << 10));
  auto* task = engine->taskFor(b, 0);
  ASSERT_EQ(task->direct_contexts.load(), 0b11u);
  // The caller polls once: it reaps the error of one part, the other is still posted.
  auto st = engine->getTransferStatus(b, 0);
  if (st->state != TransferState::PENDING) {
    EXPECT_EQ(lanesInUse(), 0u);
  }
  ASSERT_TRUE(stepRailUntil(*this, [&] {
    auto s = task->loadState();
    if (s != TransferState::PENDING) {
      EXPECT_EQ(lanesInUse(), 0u);
    }
    return s != TransferState::PENDING;
  }));
  EXPECT_EQ(task->loadState(), TransferState::FAILED);
  EXPECT_EQ(task->transferred_bytes.load(), 128u << 10);  // the slow part landed
  EXPECT_TRUE(std::memcmp(dst, src, 128 << 10) == 0 ||
              std::memcmp(dst + (128 << 10), src + (128 << 10), 128 << 10) == 0);
  ASSERT_TRUE(waitFor([&] { return endpoint(0) && endpoint(1); }));
  expectNothingHeld(*this);
}

// A batch freed while its direct WR is in flight (and nobody polls: poll_by_rail
// false): the batch outlives the WR, the rail lcore reaps it, nothing leaks.
TEST_F(DirectSemantics, BatchFreedWhileDirectWrInFlight) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("direct: {poll_by_rail: false, timeout_ms: 20}\n");
  ASSERT_TRUE(waitEndpoints());
  faultOnDirectQp(*this, fabric::soft::FaultAction::kDelay, 30'000'000'000ull);
  fillPattern(src, 4096, 26);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_EQ(lanesInUse(), 1u);
  ASSERT_TRUE(engine->freeBatch(b).ok());
  EXPECT_FALSE(engine->getTransferStatus(b, 0).ok());  // the id is gone
  ASSERT_TRUE(stepRailUntil(*this, [&] { return lanesInUse() == 0; }));
  ASSERT_TRUE(waitFor([&] { return endpoint(0) != nullptr; }));
  expectNothingHeld(*this);
  // Without a fault, a batch freed at once still lands every byte.
  fillPattern(src, 4096, 27);
  BatchId c = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
  ASSERT_TRUE(engine->freeBatch(c).ok());
  ASSERT_TRUE(stepRailUntil(*this, [&] { return lanesInUse() == 0; }));
  EXPECT_EQ(checkPattern(dst, 4096, 27), -1);
  expectNothingHeld(*this);
}

// The worker path keeps the same rule: a slice past workers.slice_timeout_ms makes
// the task TIMEOUT only once its WR was flushed (the poller holds nothing of it).
TEST_F(DirectSemantics, WorkerTimeoutIsReportedWhenDrained) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  init("", ", slice_timeout_ms: 20");
  ASSERT_TRUE(waitEndpoints());
  auto* ep = endpoint(0);
  for (auto* qp : ep->qpsFor(ep->owner())) {
    fabric::soft::FaultRule rule;
    rule.qp_num = qp->qpNum();
    rule.every_nth = 1;
    rule.max_hits = 1;
    rule.action = fabric::soft::FaultAction::kDelay;
    rule.delay_ns = 30'000'000'000ull;
    ASSERT_TRUE(faults().addRule(rule).ok());
  }
  fillPattern(src, 4096, 29);
  BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096, IntentType::MIGRATION), 0b01);
  auto* task = engine->taskFor(b, 0);
  ASSERT_TRUE(waitFor([&] {
    t().stepPollers();
    if (task->loadState() == TransferState::PENDING) return false;
    uint64_t held = 0;
    for (size_t i = 0; i < t().pollerCount(); ++i) held += t().poller(i).heldSlices();
    EXPECT_EQ(held, 0u);  // terminal => drained
    return true;
  }));
  EXPECT_EQ(task->loadState(), TransferState::TIMEOUT);
  faults().clearRules();
  ASSERT_TRUE(waitFor([&] { return endpoint(0) != nullptr; }));
  expectNothingHeld(*this);
}

// direct.qp_depth > 1 is honoured (lanes and QP depth, no clamp), and several caller
// threads share the lanes: every byte lands, no lane or quota leaks, and no QP ever
// has two posters (the fake verbs device aborts on one).
TEST_F(DirectSemantics, DeepLanesWithSeveralCallerThreads) {
  init("direct: {qp_depth: 4}\n");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(t().context(0).laneDepth(), 4u);
  EXPECT_EQ(endpoint(0)->directQp()->maxSendWr(), 4u);
  constexpr int kThreads = 4, kPerThread = 60;
  constexpr size_t kLen = 8192;
  std::atomic<int> running{kThreads};
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int th = 0; th < kThreads; ++th)
    callers.emplace_back([&, th] {
      for (int k = 0; k < kPerThread; ++k) {
        const size_t off = (static_cast<size_t>(th) * kPerThread + k) * kLen;
        fillPattern(src + off, kLen, static_cast<uint32_t>(1000 + off / kLen));
        Request r = req(OpCode::WRITE, off, kLen);
        auto b = engine->allocateBatch(1);
        if (!b.ok() || !engine->submitTransfer(*b, {&r, 1}).ok()) {
          bad.fetch_add(1);
          continue;
        }
        TransferStatus st;
        do st = *engine->getTransferStatus(*b, 0);  // the main thread steps the lcores
        while (st.state == TransferState::PENDING);
        if (st.state != TransferState::COMPLETED || st.transferred_bytes != kLen) bad.fetch_add(1);
        (void)engine->freeBatch(*b);
      }
      running.fetch_sub(1);
    });
  while (running.load() > 0) t().stepPollers();  // fallbacks (lane or poster busy)
  for (auto& c : callers) c.join();
  EXPECT_EQ(bad.load(), 0);
  for (size_t i = 0; i < size_t{kThreads} * kPerThread; ++i)
    ASSERT_EQ(checkPattern(dst + i * kLen, kLen, static_cast<uint32_t>(1000 + i)), -1) << i;
  EXPECT_GT(direct().succeeded, 0u);
  expectNothingHeld(*this);
  // The top of the range is honoured too.
  init("direct: {qp_depth: 64}\n");
  ASSERT_TRUE(waitEndpoints());
  EXPECT_EQ(t().context(0).laneDepth(), 64u);
  EXPECT_EQ(endpoint(0)->directQp()->maxSendWr(), 64u);
}

}  // namespace
}  // namespace tent::testing
