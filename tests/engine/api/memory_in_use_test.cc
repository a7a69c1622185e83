// Local memory that a pending task still uses cannot be unregistered or freed: the
// address-reuse sequence of a READ or WRITE held in flight (manual lcores: nothing
// moves until the test steps the pollers), then an unregister, then a new buffer at
// the same address (the application's pool hands the range out again). Were the
// unregister to succeed, the task's queued slices would land in (READ) or be sent
// from (WRITE) the new buffer, and the task would report COMPLETED.
// Runs on every provider of the suites (soft, fake-verbs, tcp).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kLen = 256 << 10;  // four worker slices of 64 KiB

struct MemoryInUse : ::testing::Test {
  void SetUp() override {
    engine = makeEngine(simYaml());
    ASSERT_NE(engine, nullptr);
    auto t = engine->allocateLocalMemory(kLen, "cpu:0");
    ASSERT_TRUE(t.ok()) << t.status().toString();
    target = static_cast<uint8_t*>(*t);
    pool.assign(kLen, 0);
  }
  Request req(OpCode op, void* local, uint64_t len = kLen) const {
    Request r;
    r.opcode = op;
    r.source = local;
    r.target_id = LOCAL_SEGMENT_ID;
    r.target_offset = reinterpret_cast<uint64_t>(target);
    r.length = len;
    return r;
  }
  // Submits one request on the worker path; nothing is posted until the test steps.
  BatchId submitHeld(OpCode op) {
    auto b = engine->allocateBatch(1);
    EXPECT_TRUE(b.ok());
    Request r = req(op, pool.data());
    EXPECT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
    EXPECT_EQ(engine->getTransferStatus(*b, 0)->state, TransferState::PENDING);
    return *b;
  }

  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* target = nullptr;  // registered, engine-allocated: the "peer's" bytes
  std::vector<uint8_t> pool;  // the application's memory: buffer A, then buffer B
};

TEST_F(MemoryInUse, ReadPendingIntoABlocksUnregisterAndNeverLandsInANewBufferB) {
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  fillPattern(target, kLen, 7);
  const BatchId batch = submitHeld(OpCode::READ);

  const Status s = engine->unregisterLocalMemory(pool.data());
  if (s.ok()) {
    // A is gone as far as the engine said: the pool reuses the range for B.
    fillPattern(pool.data(), kLen, 99);
    const TransferStatus st = waitTask(*engine, batch, 0);
    ADD_FAILURE() << "unregister returned OK while a READ into A was pending; the READ then "
                  << "ended " << toString(st.state) << " and B "
                  << (checkPattern(pool.data(), kLen, 99) == -1 ? "kept its bytes"
                                                                 : "received the peer's bytes");
    return;
  }
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
  EXPECT_NE(s.message().find("1 transfer"), std::string::npos) << s.toString();
  // A is still registered and the READ lands in it.
  const TransferStatus st = waitTask(*engine, batch, 0);
  EXPECT_EQ(st.state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(pool.data(), kLen, 7), -1);
  ASSERT_TRUE(engine->freeBatch(batch).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());  // the task ended
}

TEST_F(MemoryInUse, WritePendingFromABlocksUnregisterAndNeverSendsANewBufferB) {
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  fillPattern(pool.data(), kLen, 5);
  std::memset(target, 0, kLen);
  const BatchId batch = submitHeld(OpCode::WRITE);

  const Status s = engine->unregisterLocalMemory(pool.data());
  if (s.ok()) {
    fillPattern(pool.data(), kLen, 99);  // B: the application's next, unrelated data
    const TransferStatus st = waitTask(*engine, batch, 0);
    ADD_FAILURE() << "unregister returned OK while a WRITE from A was pending; the WRITE then "
                  << "ended " << toString(st.state) << " and the peer "
                  << (checkPattern(target, kLen, 99) == -1 ? "received B's bytes" : "kept A's");
    return;
  }
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
  EXPECT_EQ(waitTask(*engine, batch, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(target, kLen, 5), -1);
  ASSERT_TRUE(engine->freeBatch(batch).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());
}

// Engine-allocated memory: freeLocalMemory is refused the same way, and the memory
// stays allocated and registered (the READ lands in it).
TEST_F(MemoryInUse, FreeLocalMemoryIsRefusedWhileAReadLandsInIt) {
  auto a = engine->allocateLocalMemory(kLen, "cpu:0");
  ASSERT_TRUE(a.ok());
  auto* mem = static_cast<uint8_t*>(*a);
  std::memset(mem, 0, kLen);
  fillPattern(target, kLen, 11);
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::READ, mem);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());

  const Status s = engine->freeLocalMemory(mem);
  ASSERT_FALSE(s.ok()) << "freeLocalMemory returned OK while a READ into the memory was pending";
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
  EXPECT_EQ(waitTask(*engine, *b, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(mem, kLen, 11), -1);
  EXPECT_TRUE(engine->freeLocalMemory(mem).ok());
  EXPECT_EQ(engine->freeLocalMemory(mem).code(), StatusCode::kNotFound);
  ASSERT_TRUE(engine->freeBatch(*b).ok());
}

}  // namespace
}  // namespace tent::testing
