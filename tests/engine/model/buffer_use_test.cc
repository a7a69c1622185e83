// BufferUse: the in-use count of a registered buffer and its retirement. A pin and a
// retirement never both succeed, a task's pin is dropped exactly once by whatever
// ends it, and a canceling unregistration makes the task end CANCELED.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "model/buffer_use.h"
#include "model/rdma_task.h"

namespace tent::rdma {
namespace {

TEST(BufferUse, RetireSucceedsOnlyWithoutPinsAndThenRefusesPins) {
  BufferUse use;
  ASSERT_TRUE(use.pin());
  ASSERT_TRUE(use.pin());
  EXPECT_EQ(use.tryRetire(), 2u);  // refused: nothing changed
  EXPECT_FALSE(use.retired());
  use.unpin();
  use.unpin();
  EXPECT_EQ(use.tryRetire(), 0u);
  EXPECT_TRUE(use.retired());
  EXPECT_FALSE(use.pin());
  EXPECT_EQ(use.users(), 0u);  // the failed pin gave its count back
  EXPECT_EQ(use.tryRetire(), BufferUse::kRetiredAlready);
}

TEST(BufferUse, RetireAndCancelStopsNewPinsUntilUnretired) {
  BufferUse use;
  ASSERT_TRUE(use.pin());
  EXPECT_TRUE(use.retireAndCancel());
  EXPECT_FALSE(use.retireAndCancel());  // another call's
  EXPECT_TRUE(use.cancelRequested());
  EXPECT_FALSE(use.pin());
  EXPECT_EQ(use.users(), 1u);
  use.unretire();  // the drain timed out: usable again
  EXPECT_FALSE(use.cancelRequested());
  EXPECT_TRUE(use.pin());
  EXPECT_EQ(use.users(), 2u);
}

// Threads pin and unpin (a bounded number of times) while this one retires: when the
// retirement succeeds no pin is held, and no pin succeeds after it.
TEST(BufferUse, PinAndRetireNeverBothSucceed) {
  for (int round = 0; round < 20; ++round) {
    BufferUse use;
    std::atomic<uint64_t> held{0}, late_pins{0};
    std::atomic<bool> retired{false};
    std::vector<std::thread> pinners;
    for (int t = 0; t < 3; ++t)
      pinners.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) {
          if (!use.pin()) return;
          held.fetch_add(1);
          if (retired.load()) late_pins.fetch_add(1);
          held.fetch_sub(1);
          use.unpin();
        }
      });
    while (use.tryRetire() != 0) std::this_thread::yield();  // the pinners end: bounded
    EXPECT_EQ(held.load(), 0u) << round;
    retired.store(true);
    for (auto& t : pinners) t.join();
    EXPECT_EQ(late_pins.load(), 0u) << round;
    EXPECT_EQ(use.users(), 0u);
    EXPECT_FALSE(use.pin());
  }
}

// The worker path's shape: one thread pins (the caller resolving a request) and
// another unpins (the lcore ending the task), while this one retires. When the
// retirement succeeds no pin is outstanding, none succeeds after it, and the counts
// balance whichever thread ran when.
TEST(BufferUse, PinsOnOneThreadAndUnpinsOnAnotherNeverRaceARetirement) {
  for (int round = 0; round < 20; ++round) {
    BufferUse use;
    // held: pins taken and not yet about to be given back (never above the real count).
    std::atomic<uint64_t> handed{0}, ended{0}, held{0}, late_pins{0};
    std::atomic<bool> retired{false}, pinner_done{false};
    std::thread pinner([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!use.pin()) break;
        held.fetch_add(1);
        if (retired.load()) late_pins.fetch_add(1);
        handed.fetch_add(1, std::memory_order_release);
      }
      pinner_done.store(true, std::memory_order_release);
    });
    std::thread unpinner([&] {
      for (;;) {
        const bool done = pinner_done.load(std::memory_order_acquire);
        const uint64_t h = handed.load(std::memory_order_acquire);
        for (uint64_t e = ended.load(std::memory_order_relaxed); e < h; ++e) {
          held.fetch_sub(1);
          use.unpin();
          ended.store(e + 1, std::memory_order_release);
        }
        if (done && ended.load() == h) return;
        std::this_thread::yield();
      }
    });
    for (uint64_t r; (r = use.tryRetire()) != 0;) {  // the pinner ends: bounded
      EXPECT_LE(r, 2000u);  // neither kRetiredAlready nor an underflowed count
      if (r > 2000u) break;
      std::this_thread::yield();
    }
    EXPECT_EQ(held.load(), 0u) << round;
    retired.store(true);
    pinner.join();
    unpinner.join();
    EXPECT_EQ(late_pins.load(), 0u) << round;
    EXPECT_EQ(use.users(), 0u);
    EXPECT_FALSE(use.pin());
  }
}

TEST(BufferUse, TheLastSliceDropsTheTasksPinBeforeItsStateIsPublished) {
  BufferUse use;
  RdmaTask t;
  ASSERT_TRUE(use.pin());
  t.source_use = &use;
  t.reset(Request{.length = 20}, 2);
  EXPECT_FALSE(updateSliceStatus(t, 10, SliceResult::kSuccess));
  EXPECT_EQ(use.users(), 1u);
  EXPECT_TRUE(updateSliceStatus(t, 10, SliceResult::kSuccess));
  EXPECT_EQ(use.users(), 0u);
  EXPECT_EQ(t.source_use, nullptr);
  t.releaseSource();  // idempotent
  EXPECT_EQ(use.users(), 0u);
}

TEST(BufferUse, ATaskWhoseBufferIsCanceledEndsCanceledWithItsPostedBytes) {
  BufferUse use;
  RdmaTask t;
  ASSERT_TRUE(use.pin());
  t.source_use = &use;
  t.reset(Request{.length = 20}, 2);
  EXPECT_FALSE(t.cancelRequested());
  EXPECT_FALSE(updateSliceStatus(t, 10, SliceResult::kSuccess));
  ASSERT_TRUE(use.retireAndCancel());
  EXPECT_TRUE(t.cancelRequested());
  TransferState published = TransferState::PENDING;
  EXPECT_TRUE(updateSliceStatus(t, 10, SliceResult::kSuccess, &published));
  EXPECT_EQ(published, TransferState::CANCELED);
  EXPECT_EQ(t.transferred_bytes.load(), 20u);
  EXPECT_EQ(use.users(), 0u);
}

TEST(BufferUse, UnstartedTasksAndRefusedSubmitsDropTheirPins) {
  BufferUse use;
  RdmaTask tasks[3];
  for (auto& t : tasks) {
    ASSERT_TRUE(use.pin());
    t.source_use = &use;
  }
  tasks[0].request.length = 8;
  tasks[0].endUnstarted(TransferState::TIMEOUT);
  EXPECT_EQ(tasks[0].loadState(), TransferState::TIMEOUT);
  EXPECT_EQ(use.users(), 2u);
  releaseSources(tasks + 1, 2);
  EXPECT_EQ(use.users(), 0u);
}

}  // namespace
}  // namespace tent::rdma
