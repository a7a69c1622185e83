// The local buffer table the datapath reads without a lock (LocalMemory::view(), an
// EBR-published snapshot): a replaced snapshot is freed only once no read section can
// hold it, and every one of them is freed - none accumulates over register churn.
// The descriptor names each buffer, says its access and its registration order, and
// segmentBuffers lists them in that order (address order for a v1/v2 descriptor).
#include <gtest/gtest.h>

#include <vector>

#include "base/ebr.h"
#include "model/segments.h"
#include "tests/support/engine_test_util.h"
#include "wire/segment_descriptor.h"

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

// Three pieces of one allocation, registered high, low, middle: the descriptor and
// segmentBuffers keep that order and the names and access modes given.
TEST(LocalMemoryNames, SegmentBuffersComeInRegistrationOrderWithNameAndAccess) {
  auto engine = makeEngine(simYaml(""));
  ASSERT_NE(engine, nullptr);
  std::vector<uint8_t> mem(3 * 8192);
  uint8_t* low = mem.data();
  uint8_t* mid = low + 8192;
  uint8_t* high = mid + 8192;
  ASSERT_TRUE(
      engine->registerLocalMemory(high, 8192, "cpu:0", MemoryAccess::kRemoteWrite, "high").ok());
  ASSERT_TRUE(
      engine->registerLocalMemory(low, 8192, "cpu:0", MemoryAccess::kRemoteReadWrite, "low").ok());
  ASSERT_TRUE(engine->registerLocalMemory(mid, 8192, "cpu:0", MemoryAccess::kRemoteRead).ok());
  auto listed = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(listed.ok()) << listed.status().toString();
  ASSERT_EQ(listed->size(), 3u);
  const auto& v = *listed;
  EXPECT_EQ(v[0].addr, reinterpret_cast<uint64_t>(high));
  EXPECT_EQ(v[0].name, "high");
  EXPECT_EQ(v[0].access, MemoryAccess::kRemoteWrite);
  EXPECT_EQ(v[1].addr, reinterpret_cast<uint64_t>(low));
  EXPECT_EQ(v[1].name, "low");
  EXPECT_EQ(v[1].access, MemoryAccess::kRemoteReadWrite);
  EXPECT_EQ(v[2].addr, reinterpret_cast<uint64_t>(mid));
  EXPECT_EQ(v[2].name, "");
  EXPECT_EQ(v[2].access, MemoryAccess::kRemoteRead);
  EXPECT_LT(v[0].seq, v[1].seq);
  EXPECT_LT(v[1].seq, v[2].seq);
  for (const auto& b : v) EXPECT_EQ(b.length, 8192u);

  // The wire keeps them: what a v3 peer parses is what we built.
  const metadata::SegmentDescriptor d = engine->transport().localMemory().descriptor();
  auto v3 = metadata::parseDescriptor(
      engine->transport().localMemory().encodedDescriptor(metadata::kDescriptorVersion));
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ(*v3, d);
  // A v2 descriptor carries no order, name or access: address order, nothing invented.
  auto v2 = metadata::parseDescriptor(
      engine->transport().localMemory().encodedDescriptor(metadata::kDescriptorVersionV2));
  ASSERT_TRUE(v2.ok());
  const auto old = rdma::segmentBufferInfos(*v2);
  ASSERT_EQ(old.size(), 3u);
  EXPECT_EQ(old[0].addr, reinterpret_cast<uint64_t>(low));
  EXPECT_EQ(old[1].addr, reinterpret_cast<uint64_t>(mid));
  EXPECT_EQ(old[2].addr, reinterpret_cast<uint64_t>(high));
  for (const auto& b : old) {
    EXPECT_EQ(b.name, "");
    EXPECT_FALSE(b.access.has_value());
    EXPECT_EQ(b.seq, 0u);
  }

  // Unregistering keeps the order of the rest; a new registration comes last.
  ASSERT_TRUE(engine->unregisterLocalMemory(high).ok());
  ASSERT_TRUE(
      engine->registerLocalMemory(high, 8192, "cpu:0", MemoryAccess::kRemoteReadWrite, "again")
          .ok());
  listed = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].name, "low");
  EXPECT_EQ((*listed)[1].addr, reinterpret_cast<uint64_t>(mid));
  EXPECT_EQ((*listed)[2].name, "again");
  for (uint8_t* p : {low, mid, high}) EXPECT_TRUE(engine->unregisterLocalMemory(p).ok());
}

TEST(LocalMemoryNames, ANameLongerThanTheWireCarriesIsRefused) {
  auto engine = makeEngine(simYaml(""));
  ASSERT_NE(engine, nullptr);
  std::vector<uint8_t> mem(8192);
  Status s =
      engine->registerLocalMemory(mem.data(), mem.size(), "cpu:0", MemoryAccess::kRemoteReadWrite,
                                  std::string(metadata::kMaxBufferNameBytes + 1, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("at most 255"), std::string::npos) << s.message();
  ASSERT_TRUE(engine
                  ->registerLocalMemory(mem.data(), mem.size(), "cpu:0",
                                        MemoryAccess::kRemoteReadWrite,
                                        std::string(metadata::kMaxBufferNameBytes, 'x'))
                  .ok());
  auto listed = engine->segmentBuffers(LOCAL_SEGMENT_ID);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name.size(), metadata::kMaxBufferNameBytes);
  EXPECT_TRUE(engine->unregisterLocalMemory(mem.data()).ok());
}

}  // namespace
}  // namespace tent::testing
