// Local memory that a pending task still uses cannot be unregistered or freed: the
// address-reuse sequence of a READ or WRITE held in flight (manual lcores: nothing
// moves until the test steps the pollers), then an unregister, then a new buffer at
// the same address (the application's pool hands the range out again). Were the
// unregister to succeed, the task's queued slices would land in (READ) or be sent
// from (WRITE) the new buffer, and the task would report COMPLETED.
// Runs on every provider of the suites (soft, fake-verbs, tcp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <future>
#include <vector>

#include "fabric/soft/soft_faults.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kLen = 256 << 10;  // four worker slices of 64 KiB

struct MemoryInUse : ::testing::Test {
  void SetUp() override { init(simYaml()); }
  void init(const std::string& yaml) {
    engine = makeEngine(yaml);
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

  // Runs `call` (an unregistration of `addr` that cancels) on a thread and, once it
  // has retired the buffer, steps the pollers on this one until it returns: the
  // pollers see the cancellation before any of the tasks' slices (deterministic), and
  // the drain the call waits for happens (manual lcores: only stepping brings it).
  Status whileStepping(void* addr, std::function<Status()> call) {
    auto done = std::async(std::launch::async, std::move(call));
    auto ready = [&] { return done.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
    EXPECT_TRUE(eventually([&] { return retired(addr) || ready(); }));
    EXPECT_TRUE(eventually([&] {
      engine->transport().stepPollers();
      return ready();
    }, 60));
    return done.get();
  }
  Status unregisterCanceling(void* addr) {
    return whileStepping(addr, [&] {
      return engine->unregisterLocalMemory(addr, UnregisterMode::kCancelTransfers);
    });
  }
  bool retired(void* addr) const {
    auto table = engine->transport().localTable();
    const rdma::LocalBuffer* b = table->find(reinterpret_cast<uint64_t>(addr), 1);
    return !b || b->use.retired();
  }
  uint64_t users(void* addr) const {
    auto table = engine->transport().localTable();
    const rdma::LocalBuffer* b = table->find(reinterpret_cast<uint64_t>(addr), 1);
    return b ? b->use.users() : 0;
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

// kCancelTransfers: the READ's slices not posted yet are dropped, the task ends
// CANCELED with nothing moved, and the call returns once it did; the range is then
// unregistered (a submit naming it fails) and the application may reuse it. A task
// on another buffer runs on.
TEST_F(MemoryInUse, CancelTransfersCancelsTheReadReturnsDrainedAndNothingLandsAfter) {
  std::vector<uint8_t> other(kLen, 0);
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  ASSERT_TRUE(engine->registerLocalMemory(other.data(), kLen, "cpu:0").ok());
  fillPattern(target, kLen, 3);
  const BatchId batch = submitHeld(OpCode::READ);
  auto kept = *engine->allocateBatch(1);
  Request r = req(OpCode::READ, other.data());
  ASSERT_TRUE(engine->submitTransfer(kept, {&r, 1}).ok());
  EXPECT_EQ(users(pool.data()), 1u);

  ASSERT_TRUE(unregisterCanceling(pool.data()).ok());
  const auto st = *engine->getTransferStatus(batch, 0);
  EXPECT_EQ(st.state, TransferState::CANCELED);
  EXPECT_EQ(st.transferred_bytes, 0u);
  fillPattern(pool.data(), kLen, 99);  // B
  Request again = req(OpCode::READ, pool.data());
  auto b2 = *engine->allocateBatch(1);
  EXPECT_EQ(engine->submitTransfer(b2, {&again, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(waitTask(*engine, kept, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(other.data(), kLen, 3), -1);
  EXPECT_TRUE(drainPollers(*engine));
  EXPECT_EQ(checkPattern(pool.data(), kLen, 99), -1) << "B received bytes after unregistration";
  for (BatchId b : {batch, kept, b2}) EXPECT_TRUE(engine->freeBatch(b).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(other.data()).ok());
}

// WRs already posted (their completion held back 200 ms by the soft NIC) drain
// through their completion: refused while they are out, canceled and drained with
// kCancelTransfers (the task ends CANCELED, its posted bytes counted, as after
// cancelTransfer()).
TEST_F(MemoryInUse, PostedWrsDrainBeforeCancelTransfersReturns) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  auto* faults = fabric::soft::faultInjector(engine->provider());
  ASSERT_NE(faults, nullptr);
  fabric::soft::FaultRule rule;
  rule.every_nth = 1;
  rule.action = fabric::soft::FaultAction::kDelay;
  rule.delay_ns = 200'000'000;
  ASSERT_TRUE(faults->addRule(rule).ok());
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  fillPattern(target, kLen, 8);
  const BatchId batch = submitHeld(OpCode::READ);
  // Step until every slice is posted: then only completions are outstanding.
  ASSERT_TRUE(eventually([&] {
    engine->transport().stepPollers();
    uint64_t posted = engine->stats().worker.slices_posted;
    return posted == 4;
  }));
  ASSERT_EQ(engine->getTransferStatus(batch, 0)->state, TransferState::PENDING);
  EXPECT_EQ(engine->unregisterLocalMemory(pool.data()).code(), StatusCode::kFailedPrecondition);

  ASSERT_TRUE(unregisterCanceling(pool.data()).ok());
  const auto st = *engine->getTransferStatus(batch, 0);
  EXPECT_EQ(st.state, TransferState::CANCELED);
  EXPECT_EQ(st.transferred_bytes, kLen);
  EXPECT_EQ(engine->stats().worker.slices_completed, 4u);  // every WR completed first
  faults->clearRules();
  EXPECT_TRUE(engine->freeBatch(batch).ok());
}

// A latency-sensitive READ on the direct path: its WR is posted at submit and the task
// stays PENDING until someone polls its completion. The buffer is in use all along.
TEST_F(MemoryInUse, DirectPathTaskHoldsItsBufferUntilItsCompletionIsPolled) {
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  // Until the direct path takes one: the first ones connect the endpoints.
  BatchId batch = 0;
  std::vector<BatchId> warm;
  fillPattern(target, 4096, 21);
  for (int i = 0; i < 20 && engine->stats().direct.succeeded == 0; ++i) {
    batch = *engine->allocateBatch(1);
    warm.push_back(batch);
    Request r = req(OpCode::READ, pool.data(), 4096);
    r.intent_type = IntentType::FOREGROUND_GET;
    ASSERT_TRUE(engine->submitTransfer(batch, {&r, 1}).ok());
    if (engine->stats().direct.succeeded == 0) {
      ASSERT_EQ(waitTask(*engine, batch, 0).state, TransferState::COMPLETED);
    }
  }
  ASSERT_EQ(engine->stats().direct.succeeded, 1u);
  // Read without polling (getTransferStatus would reap the completion).
  ASSERT_EQ(engine->taskFor(batch, 0)->loadState(), TransferState::PENDING);
  EXPECT_EQ(users(pool.data()), 1u);
  EXPECT_EQ(engine->unregisterLocalMemory(pool.data()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(waitTask(*engine, batch, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(pool.data(), 4096, 21), -1);
  EXPECT_EQ(users(pool.data()), 0u);
  EXPECT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());
  for (BatchId b : warm) EXPECT_TRUE(engine->freeBatch(b).ok());
}

// Tasks that never run hold no pin: a submit refused for a later request, a request
// already past its deadline.
TEST_F(MemoryInUse, TasksThatNeverRunLeaveTheBufferFree) {
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  auto batch = *engine->allocateBatch(2);
  Request reqs[2] = {req(OpCode::READ, pool.data(), 4096), req(OpCode::READ, pool.data(), 0)};
  EXPECT_EQ(engine->submitTransfer(batch, reqs).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(users(pool.data()), 0u);
  auto late = *engine->allocateBatch(1);
  Request r = req(OpCode::READ, pool.data(), 4096);
  r.deadline_ns = 1;  // long past
  ASSERT_TRUE(engine->submitTransfer(late, {&r, 1}).ok());
  EXPECT_EQ(engine->getTransferStatus(late, 0)->state, TransferState::TIMEOUT);
  EXPECT_EQ(users(pool.data()), 0u);
  EXPECT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());
  for (BatchId b : {batch, late}) EXPECT_TRUE(engine->freeBatch(b).ok());
}

// Past timeouts.unregister_drain_ms the call gives up: Timeout naming the count, the
// buffer stays registered and usable (the task it had canceled is let run again).
TEST_F(MemoryInUse, CancelThatCannotDrainInTimeLeavesTheBufferRegistered) {
  std::string yaml = simYaml();
  const std::string timeouts = "timeouts: {endpoint_destroy_ms: 200";
  yaml.replace(yaml.find(timeouts), timeouts.size(), timeouts + ", unregister_drain_ms: 0");
  init(yaml);
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  fillPattern(target, kLen, 4);
  const BatchId batch = submitHeld(OpCode::READ);
  // Nobody steps the pollers: the queued slices are not dropped yet.
  const Status s = engine->unregisterLocalMemory(pool.data(), UnregisterMode::kCancelTransfers);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.toString();
  EXPECT_NE(s.message().find("1 transfer"), std::string::npos) << s.toString();
  EXPECT_EQ(waitTask(*engine, batch, 0).state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(pool.data(), kLen, 4), -1);
  EXPECT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());
  EXPECT_TRUE(engine->freeBatch(batch).ok());
}

// freeLocalMemory with kCancelTransfers: canceled, drained, then freed.
TEST_F(MemoryInUse, FreeLocalMemoryWithCancelTransfersFreesOnceDrained) {
  auto* mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kLen, "cpu:0"));
  auto b = *engine->allocateBatch(1);
  Request r = req(OpCode::READ, mem);
  ASSERT_TRUE(engine->submitTransfer(b, {&r, 1}).ok());
  ASSERT_TRUE(whileStepping(mem, [&] {
                return engine->freeLocalMemory(mem, UnregisterMode::kCancelTransfers);
              }).ok());
  EXPECT_EQ(engine->getTransferStatus(b, 0)->state, TransferState::CANCELED);
  EXPECT_EQ(engine->freeLocalMemory(mem).code(), StatusCode::kNotFound);
  EXPECT_TRUE(engine->freeBatch(b).ok());
}

// Unregistration deregisters the memory regions at once, even while a finished task
// in a batch not freed yet still holds the table snapshot that listed the buffer (a
// peer holding the old rkey then gets a remote access error, as from a NIC), and the
// engine's own descriptor no longer lists the range.
TEST_F(MemoryInUse, UnregisteredRangeIsDeregisteredAtOnce) {
  ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok());
  auto done = *engine->allocateBatch(1);
  Request r = req(OpCode::READ, pool.data(), 4096);
  ASSERT_TRUE(engine->submitTransfer(done, {&r, 1}).ok());
  ASSERT_EQ(waitTask(*engine, done, 0).state, TransferState::COMPLETED);
  const auto snapshot = engine->taskFor(done, 0)->local_table;
  const rdma::LocalBuffer* old = snapshot->find(reinterpret_cast<uint64_t>(pool.data()), 1);
  ASSERT_NE(old, nullptr);
  ASSERT_TRUE(engine->unregisterLocalMemory(pool.data()).ok());
  for (const auto& mr : old->mrs) EXPECT_EQ(mr, nullptr) << "an MR outlived unregistration";
  std::memset(pool.data(), 0, kLen);
  fillPattern(target, 4096, 6);
  Request into = req(OpCode::WRITE, target, 4096);
  into.target_offset = reinterpret_cast<uint64_t>(pool.data());
  auto b = *engine->allocateBatch(1);
  EXPECT_EQ(engine->submitTransfer(b, {&into, 1}).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(std::all_of(pool.begin(), pool.end(), [](uint8_t x) { return x == 0; }));
  for (BatchId id : {done, b}) EXPECT_TRUE(engine->freeBatch(id).ok());
}

// Churn: register, use, unregister (refused while in use, then canceling) many times
// with batches kept until the end; every count returns to its baseline and the MRs do
// not pile up (on soft, with room for only a few per device).
TEST_F(MemoryInUse, ChurnReturnsEveryCountToBaseline) {
  std::string yaml = simYaml();
  if (testFabric() == TestFabric::kSoft) {
    const std::string budget = "retry_budget_ms: 50";
    yaml.replace(yaml.find(budget), budget.size(), budget + "\n    max_mrs: 8");
  }
  init(yaml);
  const uint32_t pool_free = engine->transport().slicePool().available();
  std::vector<BatchId> batches;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(engine->registerLocalMemory(pool.data(), kLen, "cpu:0").ok()) << i;
    fillPattern(target, 4096, static_cast<uint32_t>(i));
    auto b = *engine->allocateBatch(1);
    Request r = req(OpCode::READ, pool.data(), (i % 2) ? 4096 : kLen);
    ASSERT_TRUE(engine->submitTransfer(b, {&r, 1}).ok());
    batches.push_back(b);
    ASSERT_EQ(engine->unregisterLocalMemory(pool.data()).code(), StatusCode::kFailedPrecondition);
    if (i % 2) {
      ASSERT_EQ(waitTask(*engine, b, 0).state, TransferState::COMPLETED) << i;
      ASSERT_EQ(checkPattern(pool.data(), 4096, static_cast<uint32_t>(i)), -1) << i;
      ASSERT_TRUE(engine->unregisterLocalMemory(pool.data()).ok()) << i;
    } else {
      ASSERT_TRUE(unregisterCanceling(pool.data()).ok()) << i;
      ASSERT_EQ(engine->getTransferStatus(b, 0)->state, TransferState::CANCELED) << i;
    }
    ASSERT_EQ(users(pool.data()), 0u);
  }
  EXPECT_TRUE(drainPollers(*engine));
  EXPECT_EQ(engine->transport().slicePool().available(), pool_free);
  EXPECT_EQ(engine->transport().localTable()->buffers.size(), 1u);  // the target alone
  for (BatchId b : batches) EXPECT_TRUE(engine->freeBatch(b).ok());
  EXPECT_EQ(engine->batches().liveBatches(), 0u);
}

}  // namespace
}  // namespace tent::testing
