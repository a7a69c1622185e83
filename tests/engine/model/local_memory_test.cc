// The local buffer table the datapath reads without a lock (LocalMemory::view(), an
// EBR-published snapshot): a replaced snapshot is freed only once no read section can
// hold it, and every one of them is freed - none accumulates over register churn.
#include <gtest/gtest.h>

#include <vector>

#include "base/ebr.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

TEST(LocalMemoryView, ReplacedViewsOutliveAReaderAndAreFreedAfterIt) {
  auto engine = makeEngine(simYaml(""));
  ASSERT_NE(engine, nullptr);
  const rdma::LocalMemory& local = engine->transport().localMemory();
  std::vector<uint8_t> a(8192), b(8192);
  const rdma::LocalTableView* seen = nullptr;
  {
    ebr::ReadSection reader;  // a submit in progress, as far as EBR can tell
    seen = local.view();
    ASSERT_TRUE(engine->registerLocalMemory(a.data(), a.size(), "cpu:0").ok());
    ASSERT_TRUE(engine->registerLocalMemory(b.data(), b.size(), "cpu:0").ok());
    EXPECT_EQ(local.retiredViews(), 2u);         // the reader may still hold both
    EXPECT_EQ(seen->table->buffers.size(), 0u);  // and what it read is intact
    EXPECT_EQ(local.view()->table->buffers.size(), 2u);
  }
  // The next change finds every earlier snapshot unreachable and frees it.
  ASSERT_TRUE(engine->unregisterLocalMemory(a.data()).ok());
  EXPECT_EQ(local.retiredViews(), 0u);
  EXPECT_EQ(local.view()->table->buffers.size(), 1u);
}

TEST(LocalMemoryView, RegisterChurnKeepsNoRetiredViewAndTransfersStillVerify) {
  auto engine = makeEngine(simYaml(""));
  ASSERT_NE(engine, nullptr);
  auto* src = static_cast<uint8_t*>(*engine->allocateLocalMemory(1 << 16, "cpu:0"));
  auto* dst = static_cast<uint8_t*>(*engine->allocateLocalMemory(1 << 16, "cpu:0"));
  std::vector<uint8_t> scratch(4096);
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(engine->registerLocalMemory(scratch.data(), scratch.size(), "cpu:0").ok());
    fillPattern(src, 4096, static_cast<uint32_t>(i));
    Request r{OpCode::WRITE, src, LOCAL_SEGMENT_ID, reinterpret_cast<uint64_t>(dst), 4096};
    auto batch = *engine->allocateBatch(1);
    ASSERT_TRUE(engine->submitTransfer(batch, {&r, 1}).ok());
    ASSERT_TRUE(engine->unregisterLocalMemory(scratch.data()).ok());  // the task holds its table
    ASSERT_EQ(waitTask(*engine, batch, 0).state, TransferState::COMPLETED) << i;
    ASSERT_EQ(checkPattern(dst, 4096, static_cast<uint32_t>(i)), -1) << i;
    ASSERT_TRUE(engine->freeBatch(batch).ok());
  }
  EXPECT_EQ(engine->transport().localMemory().retiredViews(), 0u);
}

}  // namespace
}  // namespace tent::testing
