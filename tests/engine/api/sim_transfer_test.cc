// Manual lcore mode: the test steps every poller; transfers go through the soft
// fabric within this process (LOCAL_SEGMENT_ID) over two soft devices.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <thread>
#include <vector>

#include "fabric/soft/soft_faults.h"
#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

constexpr size_t kBuf = 4 << 20;

struct SimTransfer : ::testing::Test {
  void SetUp() override { init(simYaml()); }
  void init(const std::string& yaml) {
    engine = makeEngine(yaml);
    ASSERT_NE(engine, nullptr);
    auto a = engine->allocateLocalMemory(kBuf, "cpu:0");
    auto b = engine->allocateLocalMemory(kBuf, "cpu:0");
    ASSERT_TRUE(a.ok() && b.ok());
    src = static_cast<uint8_t*>(*a);
    dst = static_cast<uint8_t*>(*b);
    std::memset(dst, 0, kBuf);
  }
  Request req(OpCode op, void* local, void* remote, uint64_t len) {
    Request r;
    r.opcode = op;
    r.source = local;
    r.target_id = LOCAL_SEGMENT_ID;
    r.target_offset = reinterpret_cast<uint64_t>(remote);
    r.length = len;
    return r;
  }
  // Submits `batch` requests of `block` bytes each and waits for all.
  void transfer(OpCode op, uint8_t* local, uint8_t* remote, size_t block, size_t batch) {
    auto b = engine->allocateBatch(batch);
    ASSERT_TRUE(b.ok());
    std::vector<Request> reqs;
    for (size_t i = 0; i < batch; ++i)
      reqs.push_back(req(op, local + i * block, remote + i * block, block));
    ASSERT_TRUE(engine->submitTransfer(*b, reqs).ok());
    for (size_t i = 0; i < batch; ++i) {
      auto st = waitTask(*engine, *b, i);
      ASSERT_EQ(st.state, TransferState::COMPLETED) << "task " << i;
      EXPECT_EQ(st.transferred_bytes, block);
    }
    auto all = engine->getBatchTransferStatus(*b);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->state, TransferState::COMPLETED);
    EXPECT_EQ(all->transferred_bytes, block * batch);
    EXPECT_TRUE(engine->freeBatch(*b).ok());
  }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
};

TEST_F(SimTransfer, WriteThenReadBackAcrossBlockAndBatchSizes) {
  uint32_t seed = 1;
  for (size_t block : {size_t{4096}, size_t{65536}, size_t{100000}, size_t{1} << 20}) {
    for (size_t batch : {size_t{1}, size_t{3}}) {
      size_t bytes = block * batch;
      fillPattern(src, bytes, seed);
      std::memset(dst, 0, bytes);
      transfer(OpCode::WRITE, src, dst, block, batch);
      ASSERT_EQ(checkPattern(dst, bytes, seed), -1)
          << "WRITE block " << block << " batch " << batch;
      std::memset(src, 0, bytes);
      transfer(OpCode::READ, src, dst, block, batch);
      ASSERT_EQ(checkPattern(src, bytes, seed), -1) << "READ block " << block << " batch " << batch;
      ++seed;
    }
  }
}

// A buffer registered for remote reads only: peers READ it, a WRITE to it is refused
// and leaves every byte as it was. One registered for remote writes only: the reverse.
// The descriptor carries the access, so the initiator refuses at submit, naming the
// range, the buffer and the access, before anything is posted.
TEST_F(SimTransfer, MemoryAccessModeIsEnforcedForPeers) {
  std::vector<uint8_t> ro(65536), wo(65536);
  fillPattern(ro.data(), ro.size(), 31);
  ASSERT_TRUE(
      engine
          ->registerLocalMemory(ro.data(), ro.size(), "cpu:0", MemoryAccess::kRemoteRead, "weights")
          .ok());
  ASSERT_TRUE(
      engine->registerLocalMemory(wo.data(), wo.size(), "cpu:0", MemoryAccess::kRemoteWrite).ok());
  auto one = [&](OpCode op, void* local, void* remote) {
    auto b = *engine->allocateBatch(1);
    Request r = req(op, local, remote, 65536);
    EXPECT_TRUE(engine->submitTransfer(b, {&r, 1}).ok());
    auto st = waitTask(*engine, b, 0);
    EXPECT_TRUE(engine->freeBatch(b).ok());
    return st.state;
  };
  auto refused = [&](OpCode op, void* local, uint8_t* remote, uint64_t len) {
    auto b = *engine->allocateBatch(1);
    Request r = req(op, local, remote, len);
    Status s = engine->submitTransfer(b, {&r, 1});
    EXPECT_TRUE(engine->freeBatch(b).ok());
    return s;
  };
  auto range = [](const void* p, uint64_t len) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%p, +%lu)", p, static_cast<unsigned long>(len));
    return std::string(buf);
  };
  std::memset(src, 0, 65536);
  EXPECT_EQ(one(OpCode::READ, src, ro.data()), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(src, 65536, 31), -1);
  fillPattern(src, 65536, 32);
  Status w = refused(OpCode::WRITE, src, ro.data() + 4096, 8192);
  EXPECT_EQ(w.code(), StatusCode::kPermissionDenied) << w.toString();
  const std::string& wm = w.message();
  EXPECT_NE(wm.find("WRITE to target " + range(ro.data() + 4096, 8192)), std::string::npos) << wm;
  EXPECT_NE(wm.find("remote access error"), std::string::npos) << wm;
  EXPECT_NE(wm.find("'weights' " + range(ro.data(), ro.size())), std::string::npos) << wm;
  EXPECT_NE(wm.find("read-only (access r)"), std::string::npos) << wm;
  EXPECT_EQ(checkPattern(ro.data(), ro.size(), 31), -1);  // untouched
  EXPECT_EQ(one(OpCode::WRITE, src, wo.data()), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(wo.data(), wo.size(), 32), -1);
  Status r = refused(OpCode::READ, dst, wo.data(), 65536);
  EXPECT_EQ(r.code(), StatusCode::kPermissionDenied) << r.toString();
  EXPECT_NE(r.message().find("READ from target " + range(wo.data(), 65536)), std::string::npos)
      << r.message();
  EXPECT_NE(r.message().find("write-only (access w)"), std::string::npos) << r.message();
  EXPECT_EQ(engine->registerLocalMemory(src + 1, 16, "*", static_cast<MemoryAccess>(0)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parseMemoryAccess("r").value(), MemoryAccess::kRemoteRead);
  EXPECT_EQ(parseMemoryAccess("bogus").status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->unregisterLocalMemory(ro.data()).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(wo.data()).ok());
  // Engine-allocated memory stays registered when someone tries to unregister it.
  EXPECT_EQ(engine->unregisterLocalMemory(src).code(), StatusCode::kFailedPrecondition);
  fillPattern(src, 4096, 33);
  transfer(OpCode::WRITE, src, dst, 4096, 1);
  EXPECT_EQ(checkPattern(dst, 4096, 33), -1);
}

TEST_F(SimTransfer, LargeRequestSpreadsOverBothDevices) {
  fillPattern(src, kBuf, 9);
  transfer(OpCode::WRITE, src, dst, kBuf, 1);
  ASSERT_EQ(checkPattern(dst, kBuf, 9), -1);
  auto& p = engine->provider();
  ASSERT_EQ(p.deviceCount(), 2u);
  EXPECT_GT(p.device(0).counters().bytes, 0u);
  EXPECT_GT(p.device(1).counters().bytes, 0u);
  auto stats = engine->stats();
  EXPECT_EQ(stats.provider, testProviderName());
  EXPECT_EQ(stats.devices.size(), 2u);
  EXPECT_EQ(stats.worker.slices_completed, kBuf / 65536);
  EXPECT_EQ(stats.lcores.size(), 2u);
}

TEST_F(SimTransfer, UserRegisteredMemory) {
  std::vector<uint8_t> a(1 << 20), b(1 << 20, 0);
  ASSERT_TRUE(engine->registerLocalMemory(a.data(), a.size()).ok());
  ASSERT_TRUE(engine->registerLocalMemory(b.data(), b.size()).ok());
  fillPattern(a.data(), a.size(), 3);
  transfer(OpCode::WRITE, a.data(), b.data(), a.size(), 1);
  EXPECT_EQ(checkPattern(b.data(), b.size(), 3), -1);
  EXPECT_TRUE(engine->unregisterLocalMemory(a.data()).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(b.data()).ok());
}

TEST_F(SimTransfer, FailedSliceRetriesOnAnotherDevice) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  auto* faults = fabric::soft::faultInjector(engine->provider());
  ASSERT_NE(faults, nullptr);
  fabric::soft::FaultRule rule;
  rule.device = "soft0";
  rule.every_nth = 1;
  rule.max_hits = 1;
  rule.status = fabric::WcStatus::kRemoteOperation;
  ASSERT_TRUE(faults->addRule(rule).ok());
  fillPattern(src, 1 << 20, 4);
  transfer(OpCode::WRITE, src, dst, 1 << 20, 1);
  EXPECT_EQ(checkPattern(dst, 1 << 20, 4), -1);
  EXPECT_GE(engine->stats().worker.slice_retries, 1u);
  EXPECT_GE(engine->stats().worker.slice_errors, 1u);
}

TEST_F(SimTransfer, PersistentErrorsFailTheTaskAfterRetries) {
  TENT_SKIP_UNLESS_SOFT("the fault injector");
  auto* faults = fabric::soft::faultInjector(engine->provider());
  fabric::soft::FaultRule rule;
  rule.every_nth = 1;  // every WR on every device
  rule.status = fabric::WcStatus::kRemoteAccess;
  ASSERT_TRUE(faults->addRule(rule).ok());
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::WRITE, src, dst, 4096);
  fillPattern(src, 4096, 5);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  auto st = waitTask(*engine, *b, 0);
  EXPECT_EQ(st.state, TransferState::FAILED);
  EXPECT_EQ(st.transferred_bytes, 0u);
  EXPECT_NE(checkPattern(dst, 4096, 5), -1);  // nothing was written
  EXPECT_EQ(engine->stats().worker.slice_retries, engine->config().workers.max_slice_retries);
  faults->clearRules();
  // The endpoints were reset; the next transfer reconnects and succeeds.
  drainPollers(*engine);
  fillPattern(src, 8192, 6);
  transfer(OpCode::WRITE, src, dst, 8192, 1);
  EXPECT_EQ(checkPattern(dst, 8192, 6), -1);
}

TEST_F(SimTransfer, CancelBeforePostingDropsSlices) {
  fillPattern(src, kBuf, 7);
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::WRITE, src, dst, kBuf);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  ASSERT_TRUE(engine->cancelTransfer(*b, 0).ok());
  // Terminal means drained: its slices are still queued on a poller (nobody stepped).
  auto st = engine->getTransferStatus(*b, 0);
  EXPECT_EQ(st->state, TransferState::PENDING);
  ASSERT_TRUE(drainPollers(*engine));
  EXPECT_EQ(engine->getTransferStatus(*b, 0)->state, TransferState::CANCELED);
  EXPECT_EQ(engine->getTransferStatus(*b, 0)->transferred_bytes, 0u);
  for (size_t i = 0; i < kBuf; ++i) ASSERT_EQ(dst[i], 0) << i;  // no slice was posted
  EXPECT_EQ(engine->transport().slicePool().available(),
            engine->transport().slicePool().capacity());
  EXPECT_TRUE(engine->freeBatch(*b).ok());
}

TEST_F(SimTransfer, CancelAfterCompletionKeepsCompleted) {
  fillPattern(src, 4096, 8);
  transfer(OpCode::WRITE, src, dst, 4096, 1);
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::WRITE, src, dst, 4096);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  EXPECT_EQ(waitTask(*engine, *b, 0).state, TransferState::COMPLETED);
  EXPECT_TRUE(engine->cancelTransfer(*b, 0).ok());
  EXPECT_EQ(engine->getTransferStatus(*b, 0)->state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 8), -1);
}

TEST_F(SimTransfer, WaitTransferTimesOutWithoutProgress) {
  // Manual mode and nobody steps: the task stays pending; the wait gives up cleanly.
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::WRITE, src, dst, 4096);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  auto st = engine->waitTransfer(*b, 0, 2'000'000);
  EXPECT_EQ(st.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(waitTask(*engine, *b, 0).state, TransferState::COMPLETED);
}

// A caller asleep in waitTransfer is woken by its task's end (the completion bell), not
// only by its nap's bound: the lcore that finishes the task finds it registered and rings.
TEST_F(SimTransfer, WaitTransferSleepsOnTheCompletionBell) {
  fillPattern(src, 4096, 9);
  auto b = engine->allocateBatch(1);
  Request r = req(OpCode::WRITE, src, dst, 4096);
  ASSERT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
  lcore::WaiterBell& bell = engine->transport().datapath().completionBell();
  const uint64_t wakes_before = bell.wakes();
  std::optional<Result<TransferStatus>> st;
  std::thread waiter([&] { st.emplace(engine->waitTransfer(*b, 0, 60'000'000'000ull)); });
  // Manual mode: nothing moves until the test steps the pollers; the waiter spins, then
  // registers on the bell and sleeps.
  ASSERT_TRUE(eventually([&] { return bell.sleepers() != 0; }));
  ASSERT_TRUE(drainPollers(*engine));
  waiter.join();
  ASSERT_TRUE(st.has_value() && st->ok());
  EXPECT_EQ((*st)->state, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(dst, 4096, 9), -1);
  EXPECT_GT(bell.wakes(), wakes_before);
  EXPECT_EQ(bell.sleepers(), 0u);  // the waiter left the bell when it returned
}

}  // namespace
}  // namespace tent::testing
