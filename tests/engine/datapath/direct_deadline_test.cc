// Deadlines, earliest-deadline-first fallbacks, no truncation, completion statistics
// (issue 13). Manual lcores; deadlines are absolute steady-clock times chosen far from
// "now" (hours) or already past, so no outcome depends on the machine's speed.
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/direct_test_util.h"

namespace tent::testing {
namespace {

using Deadlines = DirectFixture;
constexpr uint64_t kHour = 3600ull * 1'000'000'000ull;

uint64_t wrsOnDevices(DirectFixture& f) {
  uint64_t n = 0;
  for (size_t d = 0; d < f.engine->provider().deviceCount(); ++d)
    n += f.engine->provider().device(d).counters().wrs;
  return n;
}

TEST_F(Deadlines, PassedAtSubmitIsNotStarted) {
  ASSERT_TRUE(waitEndpoints());
  std::memset(dst, 0, 8192);
  fillPattern(src, 8192, 31);
  const uint64_t wrs = wrsOnDevices(*this);
  Request late = req(OpCode::WRITE, 0, 4096, IntentType::UNSPEC, rdma::steadyNowNs() - 1);
  Request fine = req(OpCode::WRITE, 4096, 4096, IntentType::UNSPEC, rdma::steadyNowNs() + kHour);
  Request both[] = {late, fine};
  auto b = engine->allocateBatch(2);
  ASSERT_TRUE(engine->submitTransfer(*b, both).ok());
  auto st = engine->getTransferStatus(*b, 0);
  EXPECT_EQ(st->state, TransferState::TIMEOUT);  // at once: nothing to drain
  EXPECT_EQ(st->transferred_bytes, 0u);
  EXPECT_EQ(engine->stats().deadlines.expired_at_submit, 1u);
  EXPECT_EQ(direct().attempted, 1u);  // only the one in time tried the direct path
  ASSERT_EQ(waitTask(*engine, *b, 1).state, TransferState::COMPLETED);
  EXPECT_EQ(wrsOnDevices(*this) - wrs, 1u);  // the late one posted nothing
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(dst[i], 0) << i;
  EXPECT_EQ(std::memcmp(dst + 4096, src + 4096, 4096), 0);
  EXPECT_EQ(engine->stats().deadlines.missed, 0u);
}

// Submits `r` with a deadline `margin` ns ahead, widening the margin until the
// submit itself was in time (a loaded machine may take long to submit).
BatchId submitInTime(DirectFixture& f, Request r, uint64_t mask) {
  for (uint64_t margin = 1'000'000;; margin *= 10) {
    r.deadline_ns = rdma::steadyNowNs() + margin;
    BatchId b = submitMasked(f, r, mask);
    if (f.engine->taskFor(b, 0)->loadState() == TransferState::PENDING) return b;
  }
}

void waitPast(uint64_t deadline) {
  while (rdma::steadyNowNs() <= deadline) std::this_thread::yield();
}

TEST_F(Deadlines, LateCompletionStillCompletesAndCountsAsMissed) {
  ASSERT_TRUE(waitEndpoints());
  // Worker path (both lanes held: it falls back to the rail lcore, not stepped yet).
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  ASSERT_TRUE(t().context(1).tryAcquireDirectLane(&holder));
  fillPattern(src, 4096, 32);
  BatchId w = submitInTime(*this, req(OpCode::WRITE, 0, 4096, IntentType::UNSPEC), 0b01);
  waitPast(engine->taskFor(w, 0)->request.deadline_ns);
  ASSERT_EQ(waitTask(*engine, w, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(engine->getTransferStatus(w, 0)->transferred_bytes, 4096u);
  EXPECT_EQ(checkPattern(dst, 4096, 32), -1);
  EXPECT_EQ(engine->stats().deadlines.missed, 1u);
  t().context(0).releaseDirectLane(&holder);
  t().context(1).releaseDirectLane(&holder);
  // Direct path: the caller polls only after the deadline.
  fillPattern(src + 4096, 4096, 33);
  BatchId d = submitInTime(*this, req(OpCode::WRITE, 4096, 4096, IntentType::UNSPEC), 0b01);
  ASSERT_TRUE(engine->taskFor(d, 0)->direct.load());
  waitPast(engine->taskFor(d, 0)->request.deadline_ns);
  ASSERT_EQ(pollCaller(d).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst + 4096, 4096, 33), -1);
  EXPECT_EQ(engine->stats().deadlines.missed, 2u);
  // In time: not missed.
  BatchId ok = submitMasked(
      *this, req(OpCode::WRITE, 0, 4096, IntentType::UNSPEC, rdma::steadyNowNs() + kHour), 0b01);
  ASSERT_EQ(pollCaller(ok).state, TransferState::COMPLETED);
  EXPECT_EQ(engine->stats().deadlines.missed, 2u);
}

// Latency-sensitive fallbacks on one rail QP of depth 1 (one WR per pass): served
// earliest deadline first, requests without a deadline after them, whatever the
// submission order.
TEST_F(Deadlines, RailLcoreServesFallbacksEarliestDeadlineFirst) {
  init("", ", qp_depth: 1");
  ASSERT_TRUE(waitEndpoints());
  rdma::RdmaTask holder;
  ASSERT_TRUE(t().context(0).tryAcquireDirectLane(&holder));
  ASSERT_TRUE(t().context(1).tryAcquireDirectLane(&holder));
  const uint64_t now = rdma::steadyNowNs();
  const uint64_t deadlines[] = {now + 3 * kHour, 0, now + 1 * kHour, now + 2 * kHour};
  std::vector<Request> reqs;
  for (size_t i = 0; i < 4; ++i) {
    fillPattern(src + i * 4096, 4096, static_cast<uint32_t>(40 + i));
    reqs.push_back(req(OpCode::WRITE, i * 4096, 4096, IntentType::FOREGROUND_GET, deadlines[i]));
  }
  auto b = engine->allocateBatch(4);
  ASSERT_TRUE(engine->submitTransferWithMask(*b, reqs, 0b01).ok());
  EXPECT_EQ(direct().fallback_lane_busy, 4u);
  std::vector<size_t> order;
  ASSERT_TRUE(waitFor([&] {
    t().runtime().runOnce(0);  // the rail lcore only
    for (size_t i = 0; i < 4; ++i) {
      bool done = engine->taskFor(*b, i)->loadState() == TransferState::COMPLETED;
      if (done && std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
    }
    return order.size() == 4;
  }));
  EXPECT_EQ(order, (std::vector<size_t>{2, 3, 0, 1}));
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(checkPattern(dst + i * 4096, 4096, static_cast<uint32_t>(40 + i)), -1) << i;
  t().context(0).releaseDirectLane(&holder);
  t().context(1).releaseDirectLane(&holder);
}

// Payload bytes per device and per intent, from completions on both paths.
TEST_F(Deadlines, BytesPerDeviceAndIntent) {
  ASSERT_TRUE(waitEndpoints());
  fillPattern(src, 12288, 50);
  BatchId d = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);  // direct, soft0
  ASSERT_EQ(pollCaller(d).state, TransferState::COMPLETED);
  BatchId w = submitMasked(*this, req(OpCode::WRITE, 4096, 8192, IntentType::MIGRATION), 0b10);
  ASSERT_EQ(waitTask(*engine, w, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 12288, 50), -1);
  auto s = engine->stats();
  EXPECT_EQ(s.bytes_per_device["soft0"], 4096u);
  EXPECT_EQ(s.bytes_per_device["soft1"], 8192u);
  ASSERT_EQ(s.bytes_per_intent.size(), 6u);
  EXPECT_EQ(s.bytes_per_intent[static_cast<size_t>(IntentType::FOREGROUND_GET)], 4096u);
  EXPECT_EQ(s.bytes_per_intent[static_cast<size_t>(IntentType::MIGRATION)], 8192u);
  EXPECT_EQ(s.bytes_per_intent[0], 0u);
  EXPECT_EQ(s.bytes_transferred, 12288u);
}

// Post and completion are stamped where they happen: no direct latency sample below
// what two clock reads can measure (bucket 0 holds 0 and 1 ns), whoever polls.
TEST_F(Deadlines, LatencyHistogramHasNoImpossibleSamples) {
  ASSERT_TRUE(waitEndpoints());
  for (int i = 0; i < 50; ++i) {
    fillPattern(src, 4096, 60 + i);
    BatchId b = submitMasked(*this, req(OpCode::WRITE, 0, 4096), 0b01);
    if (i % 2) {
      ASSERT_EQ(pollCaller(b).state, TransferState::COMPLETED);
    } else {
      ASSERT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED);  // rail or caller
    }
    EXPECT_EQ(checkPattern(dst, 4096, 60 + i), -1);
  }
  auto h = direct().latency_histogram_ns;
  uint64_t total = 0;
  for (auto v : h) total += v;
  EXPECT_EQ(total, 50u);
  EXPECT_EQ(h[0], 0u);
}

// A small max message size (soft: fabric.soft.max_message_bytes) makes a request
// longer than one WR cheap: it is cut into WRs that fit, never truncated.
TEST_F(Deadlines, RequestLongerThanTheMaxMessageIsSplitNotTruncated) {
  TENT_SKIP_UNLESS_SOFT("fabric.soft.max_message_bytes");
  init("", ", block_size: 4096", "max_message_bytes: 4096");
  ASSERT_TRUE(waitEndpoints());
  const uint64_t wrs = wrsOnDevices(*this);
  // Direct: two pieces of 6194 bytes would not fit one WR each: the worker path
  // carries it in 4096 + 4096 + 4096 + 100 (the tail does not merge past the max).
  const size_t len = 3 * 4096 + 100;
  fillPattern(src, len, 70);
  BatchId b = submitOne(req(OpCode::WRITE, 0, len));
  EXPECT_EQ(direct().fallback_over_size_cap, 1u);
  auto st = waitTask(*engine, b, 0);
  ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(st.transferred_bytes, len);
  EXPECT_EQ(checkPattern(dst, len, 70), -1);
  EXPECT_EQ(wrsOnDevices(*this) - wrs, 4u);
  // Pieces that fit go direct: 8192 = two WRs of 4096 on two devices.
  fillPattern(src, 8192, 71);
  BatchId d = submitOne(req(OpCode::WRITE, 0, 8192));
  EXPECT_EQ(direct().succeeded, 1u);
  ASSERT_EQ(pollCaller(d).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 8192, 71), -1);
  // A bigger READ over the worker path: 256 WRs.
  constexpr size_t kRead = (1 << 20) - 1;
  fillPattern(dst, kRead, 72);
  std::memset(src, 0, kRead);
  BatchId r = submitOne(req(OpCode::READ, 0, kRead, IntentType::MIGRATION));
  st = waitTask(*engine, r, 0);
  ASSERT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(st.transferred_bytes, kRead);
  EXPECT_EQ(checkPattern(src, kRead, 72), -1);
}

TEST_F(Deadlines, WhatCannotBeSlicedIsRefusedWithAMessage) {
  TENT_SKIP_UNLESS_SOFT("fabric.soft.max_message_bytes");
  // A block larger than one WR: the engine refuses to start.
  std::string yaml = simYaml("", "", ", block_size: 8192");
  yaml.replace(yaml.find("    retry_budget_ms: 50\n"), 24,
               "    retry_budget_ms: 50\n    max_message_bytes: 4096\n");
  auto e = TransferEngine::createFromYaml(yaml);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("workers.block_size 8192 exceeds the max message size"),
            std::string::npos)
      << e.status().toString();
  // More slices than the pool holds: INVALID, with the reason.
  init("", ", block_size: 4096, slice_pool: 16", "max_message_bytes: 4096");
  Request r = req(OpCode::WRITE, 0, 17 * 4096, IntentType::MIGRATION);
  auto b = engine->allocateBatch(1);
  Status s = engine->submitTransfer(*b, {&r, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("workers.slice_pool"), std::string::npos) << s.toString();
  EXPECT_EQ(engine->getTransferStatus(*b, 0)->state, TransferState::INVALID);
}

}  // namespace
}  // namespace tent::testing
