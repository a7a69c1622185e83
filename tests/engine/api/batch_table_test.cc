// BatchTable: ids, recycling, retiring busy batches, concurrent use.
#include "api/batch_table.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace tent {
namespace {

TEST(BatchTable, IdsAreLiveUntilFreedAndNeverReused) {
  BatchTable t;
  std::set<BatchId> seen;
  for (int round = 0; round < 100; ++round) {
    auto id = t.allocate(4);
    ASSERT_TRUE(id.ok()) << id.status().toString();
    EXPECT_TRUE(seen.insert(*id).second) << "id " << *id << " handed out twice";
    BatchSlot* s = t.find(*id);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->capacity, 4u);
    EXPECT_GE(s->task_capacity, 4u);
    EXPECT_TRUE(t.free(*id).ok());
    EXPECT_EQ(t.find(*id), nullptr) << "a freed id still resolves";
    EXPECT_EQ(t.free(*id).code(), StatusCode::kNotFound) << "double free";
  }
  EXPECT_EQ(t.liveBatches(), 0u);
  EXPECT_EQ(t.find(0), nullptr);
  EXPECT_EQ(t.find(~0ull), nullptr);
  EXPECT_EQ(t.find(12345), nullptr);
}

TEST(BatchTable, FreedSmallBatchKeepsItsTasksForTheNextOfItsClass) {
  BatchTable t(/*pooled_tasks=*/64);
  auto a = t.allocate(3);
  ASSERT_TRUE(a.ok());
  const rdma::RdmaTask* tasks = t.find(*a)->tasks.get();
  t.find(*a)->tasks[0].state.store(static_cast<uint8_t>(TransferState::COMPLETED));
  t.find(*a)->count.store(1);
  ASSERT_TRUE(t.free(*a).ok());
  auto b = t.allocate(4);  // same class (4)
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(t.find(*b)->tasks.get(), tasks) << "the pooled task array is reused";
  EXPECT_EQ(t.find(*b)->count.load(), 0u);
  EXPECT_EQ(t.find(*b)->tasks[0].loadState(), TransferState::INITIAL) << "recycled tasks reset";
  EXPECT_NE(*a, *b);
  auto big = t.allocate(100);  // above the pooled size: its array goes when freed
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(t.find(*big)->task_capacity, 100u);
  ASSERT_TRUE(t.free(*big).ok());
  ASSERT_TRUE(t.free(*b).ok());
}

TEST(BatchTable, BusyBatchRetiresUntilItsSlicesDrain) {
  BatchTable t;
  auto a = t.allocate(2);
  ASSERT_TRUE(a.ok());
  BatchSlot* s = t.find(*a);
  s->count.store(2);
  s->tasks[1].refs.store(1);  // a slice in flight
  ASSERT_TRUE(t.free(*a).ok());
  EXPECT_EQ(t.find(*a), nullptr) << "the id dies at free, busy or not";
  EXPECT_EQ(t.retiringBatches(), 1u);
  t.reapRetired();
  EXPECT_EQ(t.retiringBatches(), 1u) << "still referenced";
  s->tasks[1].refs.store(0);  // the slice's last touch
  t.reapRetired();
  EXPECT_EQ(t.retiringBatches(), 0u);
  EXPECT_EQ(t.liveBatches(), 0u);
}

TEST(BatchTable, ManyLiveBatchesGrowTheTable) {
  BatchTable t;
  std::vector<BatchId> ids;
  for (uint32_t i = 0; i < 3 * BatchTable::kChunkSlots + 5; ++i) {
    auto id = t.allocate(1 + i % 7);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  EXPECT_EQ(t.liveBatches(), ids.size());
  for (BatchId id : ids) ASSERT_NE(t.find(id), nullptr);
  for (BatchId id : ids) ASSERT_TRUE(t.free(id).ok());
  EXPECT_EQ(t.liveBatches(), 0u);
}

TEST(BatchTable, ConcurrentAllocateAndFreeLoseNothing) {
  BatchTable t;
  constexpr int kThreads = 4, kRounds = 20000;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::vector<BatchId> mine;
      for (int i = 0; i < kRounds; ++i) {
        auto id = t.allocate(1 + (i + th) % 16);
        if (!id.ok()) {
          ++errors;
          continue;
        }
        BatchSlot* s = t.find(*id);
        if (s == nullptr || s->capacity != static_cast<size_t>(1 + (i + th) % 16)) ++errors;
        mine.push_back(*id);
        if (mine.size() > 8) {  // keep a few alive so slots interleave between threads
          if (!t.free(mine.front()).ok()) ++errors;
          mine.erase(mine.begin());
        }
      }
      for (BatchId id : mine)
        if (!t.free(id).ok()) ++errors;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(t.liveBatches(), 0u);
  EXPECT_EQ(t.retiringBatches(), 0u);
}

}  // namespace
}  // namespace tent
