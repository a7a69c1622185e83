#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>
#include <vector>

#include "model/rdma_task.h"

namespace tent::rdma {
namespace {

Request ofLength(uint64_t n) {
  Request r;
  r.length = n;
  return r;
}

TEST(TaskAccounting, CompletesOnceWithAllBytes) {
  RdmaTask t;
  t.reset(ofLength(250), 3);
  EXPECT_EQ(t.loadState(), TransferState::PENDING);
  EXPECT_FALSE(updateSliceStatus(t, 100, SliceResult::kSuccess));
  EXPECT_FALSE(updateSliceStatus(t, 100, SliceResult::kSuccess));
  EXPECT_EQ(t.loadState(), TransferState::PENDING);
  EXPECT_TRUE(updateSliceStatus(t, 50, SliceResult::kSuccess));
  EXPECT_EQ(t.loadState(), TransferState::COMPLETED);
  EXPECT_EQ(t.transferred_bytes.load(), 250u);
  EXPECT_EQ(t.slices_left.load(), 0u);
}

// Terminal means drained: the first error is recorded at once but published only by
// the last slice, when no WR of the task can touch memory any more.
TEST(TaskAccounting, FirstErrorWinsAndIsPublishedWhenDrained) {
  RdmaTask t;
  t.reset(ofLength(40), 4);
  EXPECT_FALSE(updateSliceStatus(t, 10, SliceResult::kSuccess));
  EXPECT_FALSE(updateSliceStatus(t, 0, SliceResult::kTimeout));
  EXPECT_EQ(t.loadState(), TransferState::PENDING);  // two slices still out
  EXPECT_TRUE(t.failing());
  EXPECT_FALSE(updateSliceStatus(t, 0, SliceResult::kFailed));  // a later error does not win
  EXPECT_EQ(t.loadState(), TransferState::PENDING);
  TransferState published = TransferState::INITIAL;
  EXPECT_TRUE(updateSliceStatus(t, 10, SliceResult::kSuccess, &published));  // the last one
  EXPECT_EQ(published, TransferState::TIMEOUT);
  EXPECT_EQ(t.loadState(), TransferState::TIMEOUT);
  EXPECT_EQ(t.transferred_bytes.load(), 20u);
  EXPECT_EQ(t.slices_left.load(), 0u);
  EXPECT_FALSE(t.referenced());
}

TEST(TaskAccounting, CancelIsPublishedWhenTheLastSliceDrains) {
  RdmaTask t;
  t.reset(ofLength(10), 2);
  ASSERT_TRUE(t.recordError(TransferState::CANCELED));  // what cancel() records
  EXPECT_FALSE(updateSliceStatus(t, 5, SliceResult::kSuccess));
  EXPECT_EQ(t.loadState(), TransferState::PENDING);
  EXPECT_TRUE(updateSliceStatus(t, 0, SliceResult::kCanceled));
  EXPECT_EQ(t.loadState(), TransferState::CANCELED);
  EXPECT_EQ(t.transferred_bytes.load(), 5u);
  EXPECT_EQ(t.slices_left.load(), 0u);
}

TEST(TaskAccounting, ErrorsKeepTheTaskPendingUntilEverySliceIsAccounted) {
  RdmaTask t;
  t.reset(ofLength(3), 3);
  EXPECT_FALSE(updateSliceStatus(t, 0, SliceResult::kFailed));
  EXPECT_FALSE(updateSliceStatus(t, 0, SliceResult::kCanceled));
  EXPECT_EQ(t.loadState(), TransferState::PENDING);
  EXPECT_TRUE(t.referenced());
  EXPECT_TRUE(updateSliceStatus(t, 1, SliceResult::kSuccess));
  EXPECT_EQ(t.loadState(), TransferState::FAILED);
}

TEST(TaskAccounting, ConcurrentSlicesFinishExactlyOnce) {
  for (int round = 0; round < 200; ++round) {
    RdmaTask t;
    constexpr int kThreads = 4, kPer = 250;
    t.reset(ofLength(kThreads * kPer - (round % 3 == 0 ? 1 : 0)), kThreads * kPer);
    std::atomic<int> finishers{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i)
      threads.emplace_back([&, i] {
        for (int k = 0; k < kPer; ++k) {
          bool err = (round % 3 == 0) && i == 1 && k == 7;
          if (updateSliceStatus(t, err ? 0 : 1, err ? SliceResult::kFailed : SliceResult::kSuccess))
            finishers.fetch_add(1);
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(finishers.load(), 1);
    EXPECT_EQ(t.loadState(), round % 3 == 0 ? TransferState::FAILED : TransferState::COMPLETED);
  }
}

TEST(SlicePool, AllocatesEverySliceOnceAndRecycles) {
  SlicePool pool(100);
  std::set<RdmaSlice*> seen;
  for (int i = 0; i < 100; ++i) {
    RdmaSlice* s = pool.allocate();
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(seen.insert(s).second);
  }
  EXPECT_EQ(pool.allocate(), nullptr);
  EXPECT_EQ(pool.available(), 0u);
  for (RdmaSlice* s : seen) pool.release(s);
  EXPECT_EQ(pool.available(), 100u);
  EXPECT_NE(pool.allocate(), nullptr);
}

// A slice leaves the pool kAllocated, is initialised once for its task, and returns
// kFree: a plan that declined gives back slices it never handed on.
TEST(SliceState, AllocatedSlicesAreInitialisedOnceAndReturnFree) {
  SlicePool pool(8);
  EXPECT_EQ(pool.countIn(SliceState::kFree), 8u);
  RdmaTask t;
  Request r = ofLength(3000);
  r.opcode = OpCode::READ;
  r.source = reinterpret_cast<void*>(0x10000);
  r.target_offset = 0x20000;
  r.target_id = 7;
  t.reset(r, 1);
  RdmaSlice* s = pool.allocate();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->state, SliceState::kAllocated);
  s->retries = 3;  // left over from an earlier life: init() forgets it
  s->init(t, 1000, 2000, 5, 42);
  EXPECT_EQ(s->state, SliceState::kAllocated);
  EXPECT_EQ(s->task, &t);
  EXPECT_EQ(s->source_addr, 0x10000u + 1000);
  EXPECT_EQ(s->target_addr, 0x20000u + 1000);
  EXPECT_EQ(s->length, 2000u);
  EXPECT_EQ(s->opcode, fabric::WrOpcode::kRdmaRead);
  EXPECT_EQ(s->segment, 7u);
  EXPECT_EQ(s->retries, 0u);
  EXPECT_EQ(s->rr_hint, 5u);
  EXPECT_EQ(s->enqueue_ns, 42u);
  EXPECT_EQ(pool.countIn(SliceState::kAllocated), 1u);
  pool.release(s);
  EXPECT_EQ(pool.countIn(SliceState::kFree), 8u);
  EXPECT_EQ(toString(SliceState::kPostedDirect), "posted-direct");
}

TEST(SlicePool, ConcurrentAllocateReleaseNeverDuplicates) {
  SlicePool pool(64);
  std::atomic<int> holders[64] = {};
  std::atomic<bool> dup{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int k = 0; k < 20000; ++k) {
        RdmaSlice* s = pool.allocate();
        if (!s) continue;
        s->length = static_cast<uint64_t>(k);
        size_t idx = s->qp_index;  // use a field as owner token
        (void)idx;
        pool.release(s);
      }
    });
  for (auto& th : threads) th.join();
  (void)holders;
  EXPECT_FALSE(dup.load());
  EXPECT_EQ(pool.available(), 64u);
  std::set<RdmaSlice*> seen;
  for (int i = 0; i < 64; ++i) EXPECT_TRUE(seen.insert(pool.allocate()).second);
}

// An lcore returns a pass's finished slices in one CAS (releaseBurst) while callers
// allocate and release one at a time: no slice is handed out twice, none is lost.
TEST(SlicePool, BurstReleaseBesideSingleAllocationsLosesAndDuplicatesNothing) {
  constexpr uint32_t kCap = 256;
  SlicePool pool(kCap);
  std::atomic<uint32_t> owner[kCap] = {};  // 0 = free, else the holding thread + 1
  std::atomic<bool> dup{false};
  std::vector<RdmaSlice*> base;  // slice addresses, to map a slice to its index
  for (uint32_t i = 0; i < kCap; ++i) base.push_back(pool.allocate());
  std::sort(base.begin(), base.end());
  pool.releaseBurst(base.data(), kCap);
  EXPECT_EQ(pool.available(), kCap);
  auto index = [&](RdmaSlice* s) {
    return static_cast<size_t>(std::lower_bound(base.begin(), base.end(), s) - base.begin());
  };
  auto claim = [&](RdmaSlice* s, uint32_t who) {
    uint32_t expected = 0;
    if (!owner[index(s)].compare_exchange_strong(expected, who)) dup.store(true);
  };
  auto drop = [&](RdmaSlice* s) { owner[index(s)].store(0); };
  std::vector<std::thread> threads;
  for (uint32_t t = 1; t <= 3; ++t)
    threads.emplace_back([&, t] {
      std::vector<RdmaSlice*> held;
      for (int k = 0; k < 20000; ++k) {
        if (RdmaSlice* s = pool.allocate()) {
          claim(s, t);
          held.push_back(s);
        }
        if (held.size() >= (t == 1 ? 32u : 1u)) {  // thread 1 releases in bursts
          for (RdmaSlice* s : held) drop(s);
          if (t == 1)
            pool.releaseBurst(held.data(), static_cast<uint32_t>(held.size()));
          else
            for (RdmaSlice* s : held) pool.release(s);
          held.clear();
        }
      }
      for (RdmaSlice* s : held) drop(s);
      pool.releaseBurst(held.data(), static_cast<uint32_t>(held.size()));
    });
  for (auto& th : threads) th.join();
  EXPECT_FALSE(dup.load());
  EXPECT_EQ(pool.available(), kCap);
  std::set<RdmaSlice*> seen;
  for (uint32_t i = 0; i < kCap; ++i) EXPECT_TRUE(seen.insert(pool.allocate()).second);
  EXPECT_EQ(pool.allocate(), nullptr);
}

}  // namespace
}  // namespace tent::rdma
