// The datapath does not allocate (issue 14.1): one small transfer as tebench does it
// (allocateBatch, submitTransfer, getTransferStatus until it completes, freeBatch),
// on the worker path and on the direct path, with the pollers stepped on this thread
// (manual lcore mode, soft provider), makes no operator new call once warm. This
// binary replaces the global operator new (it is its own test program); it counts
// calls made on the test thread only, so the control thread's work is not counted.
#include <gtest/gtest.h>

#include "tests/support/counting_allocator.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kBlock = 4096;
constexpr int kWarmup = 200;
constexpr int kMeasured = 2000;

struct NoAlloc : ::testing::TestWithParam<IntentType> {
  void SetUp() override {
    TENT_SKIP_UNLESS_SOFT("the counted loop (the fake verbs device allocates as test code)");
    engine = makeEngine(simYaml());
    ASSERT_NE(engine, nullptr);
    auto a = engine->allocateLocalMemory(kBlock, "cpu:0");
    auto b = engine->allocateLocalMemory(kBlock, "cpu:0");
    ASSERT_TRUE(a.ok() && b.ok());
    src = static_cast<uint8_t*>(*a);
    dst = static_cast<uint8_t*>(*b);
  }
  // One transfer the way tebench times it; false on any failure. Allocation-free
  // itself: no gtest assertion runs inside the counted window.
  bool oneTransfer(uint32_t seed) {
    fillPattern(src, kBlock, seed);
    Request r;
    r.opcode = OpCode::WRITE;
    r.source = src;
    r.target_id = LOCAL_SEGMENT_ID;
    r.target_offset = reinterpret_cast<uint64_t>(dst);
    r.length = kBlock;
    r.intent_type = GetParam();
    auto batch = engine->allocateBatch(1);
    if (!batch.ok()) return false;
    bool ok = engine->submitTransfer(*batch, std::span<const Request>(&r, 1)).ok();
    TransferState state = TransferState::PENDING;
    while (ok && state == TransferState::PENDING) {
      engine->transport().stepPollers();
      auto st = engine->getTransferStatus(*batch, 0);
      ok = st.ok();
      if (ok) state = st->state;
    }
    ok = ok && state == TransferState::COMPLETED;
    ok = engine->freeBatch(*batch).ok() && ok;
    return ok && checkPattern(dst, kBlock, seed) < 0;
  }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
};

TEST_P(NoAlloc, SmallTransferLoopMakesNoAllocation) {
  for (int i = 0; i < kWarmup; ++i) ASSERT_TRUE(oneTransfer(i)) << "warm-up transfer " << i;
  const auto direct_before = engine->stats().direct.succeeded;
  int failed_at = -1;
  size_t allocations = 0;
  {
    CountAllocations counting;
    for (int i = 0; i < kMeasured && failed_at < 0; ++i) {
      if (!oneTransfer(kWarmup + i)) failed_at = i;
    }
    allocations = counting.count();
  }
  EXPECT_EQ(failed_at, -1) << "a measured transfer failed or its bytes differ";
  EXPECT_EQ(allocations, 0u) << "operator new calls in " << kMeasured << " transfers";
  const auto direct = engine->stats().direct.succeeded - direct_before;
  if (GetParam() == IntentType::FOREGROUND_GET) {
    EXPECT_EQ(direct, static_cast<uint64_t>(kMeasured)) << "every transfer on the direct path";
  } else {
    EXPECT_EQ(direct, 0u) << "the worker path only";
  }
  EXPECT_EQ(engine->batches().liveBatches(), 0u);
}

// A batch's notification is posted by the status poll that sees the batch complete:
// that poll (claim, post the SEND, reap acknowledgements and credits) allocates
// nothing either. Binding the notification (submitTransfer) and taking it at the
// target are control path and stay outside the counted window.
TEST(NoAllocNotify, TheStatusPollThatPostsABatchNotificationMakesNoAllocation) {
  TENT_SKIP_UNLESS_SOFT("the counted loop (the fake verbs device allocates as test code)");
  auto a = makeEngine(simYaml());
  auto b = makeEngine(simYaml());
  ASSERT_TRUE(a && b);
  auto src = a->allocateLocalMemory(kBlock, "cpu:0");
  auto dst = b->allocateLocalMemory(kBlock, "cpu:0");
  ASSERT_TRUE(src.ok() && dst.ok());
  auto seg = a->openSegment(b->segmentName());
  ASSERT_TRUE(seg.ok());
  const std::string message(64, 'n');
  size_t allocations = 0, delivered = 0;
  bool ok = true;
  for (int i = 0; i < kWarmup + 500 && ok; ++i) {
    fillPattern(*src, kBlock, i);
    Request r{OpCode::WRITE, *src, *seg, reinterpret_cast<uint64_t>(*dst), kBlock};
    auto batch = a->allocateBatch(1);
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(a->submitTransfer(*batch, {&r, 1}, message).ok());
    TransferState state = TransferState::PENDING;
    {
      CountAllocations counting;
      while (ok && state == TransferState::PENDING) {
        a->transport().stepPollers();
        auto st = a->getBatchTransferStatus(*batch);
        ok = st.ok();
        if (ok) state = st->state;
      }
      if (i >= kWarmup) allocations += counting.count();
    }
    ASSERT_TRUE(ok) << "round " << i;
    ASSERT_EQ(state, TransferState::COMPLETED);
    ASSERT_TRUE(a->freeBatch(*batch).ok());
    auto got = b->waitNotifications(60'000'000'000ull);  // returns the credit
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->size(), 1u);
    ASSERT_EQ(checkPattern(static_cast<uint8_t*>(*dst), kBlock, i), -1);
    ++delivered;
  }
  EXPECT_EQ(delivered, static_cast<size_t>(kWarmup + 500));
  EXPECT_EQ(allocations, 0u) << "operator new calls in 500 status polls that posted";
  EXPECT_EQ(a->stats().notify.sent, delivered);
}

INSTANTIATE_TEST_SUITE_P(Paths, NoAlloc,
                         ::testing::Values(IntentType::UNSPEC, IntentType::FOREGROUND_GET),
                         [](const auto& info) {
                           return info.param == IntentType::UNSPEC ? std::string("WorkerPath")
                                                                   : std::string("DirectPath");
                         });

}  // namespace
}  // namespace tent::testing
