// Registration at scale over the verbs provider's real code on the loopback fake
// device (soft0, soft1): every device registers at the same time (the fake's
// rendezvous shows the overlap, no clock involved), buffers longer than the
// devices' max_mr_size become chunks with their own keys and move bytes, and a
// failure on one device releases what the others registered.
#include <gtest/gtest.h>
#include <tbb/info.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/support/engine_test_util.h"

namespace tent::testing {
namespace {

using fabric::testing::engineTestVerbs;
using fabric::testing::RegistrationModel;

class VerbsRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testFabric() != TestFabric::kFakeVerbs)
      GTEST_SKIP() << "needs TENT_TEST_PROVIDER=fake-verbs (meson suite fake-verbs)";
    engineTestVerbs().setRegistrationModel({});
  }
  void TearDown() override {
    engine.reset();
    if (testFabric() == TestFabric::kFakeVerbs) engineTestVerbs().setRegistrationModel({});
  }
  void open(const RegistrationModel& model) {
    engineTestVerbs().setRegistrationModel(model);  // max_mr_size is read at open
    // Without notify links: each registers one MR of its own when its endpoint connects
    // (during the first move), which the MR counts below would see.
    engine = makeEngine(simYaml("notify: {enabled: false}\n"));
    ASSERT_NE(engine, nullptr);
  }
  int64_t liveMrs() { return engineTestVerbs().stats().mrs; }

  // One request within the engine (LOCAL_SEGMENT_ID), waited for.
  TransferState move(OpCode op, void* local, void* remote, uint64_t length) {
    auto b = engine->allocateBatch(1);
    EXPECT_TRUE(b.ok());
    Request r;
    r.opcode = op;
    r.source = local;
    r.target_id = LOCAL_SEGMENT_ID;
    r.target_offset = reinterpret_cast<uint64_t>(remote);
    r.length = length;
    EXPECT_TRUE(engine->submitTransfer(*b, {&r, 1}).ok());
    auto st = waitTask(*engine, *b, 0);
    EXPECT_TRUE(engine->freeBatch(*b).ok());
    return st.state;
  }

  std::unique_ptr<TransferEngineImpl> engine;
};

TEST_F(VerbsRegistration, DevicesRegisterConcurrently) {
  // Both devices must be inside reg_mr at once for either to go on; TBB runs as
  // many at once as the machine has hardware threads (one on a single-CPU host).
  const uint32_t expected = static_cast<uint32_t>(std::min(2, tbb::info::default_concurrency()));
  open({});
  std::vector<uint8_t> buf(1 << 20);
  RegistrationModel model;
  model.meet = expected;
  model.ns_per_page = 1000;  // what pinning costs, roughly; only adds to the overlap
  engineTestVerbs().setRegistrationModel(model);
  const uint64_t before = engineTestVerbs().stats().registrations;
  ASSERT_TRUE(engine->registerLocalMemory(buf.data(), buf.size(), "cpu:0").ok());
  EXPECT_EQ(engineTestVerbs().stats().registrations - before, 2u);  // one per device
  EXPECT_EQ(engineTestVerbs().stats().reg_in_flight_max, expected);
  EXPECT_TRUE(engine->unregisterLocalMemory(buf.data()).ok());
}

TEST_F(VerbsRegistration, RelaxedOrderingIsAskedFor) {
  open({});
  std::vector<uint8_t> buf(65536);
  const auto before = engineTestVerbs().stats();
  ASSERT_TRUE(engine->registerLocalMemory(buf.data(), buf.size(), "cpu:0").ok());
  const auto after = engineTestVerbs().stats();
  EXPECT_EQ(after.registrations - before.registrations, 2u);
  EXPECT_EQ(after.relaxed_registrations - before.relaxed_registrations, 2u);
  EXPECT_TRUE(engine->unregisterLocalMemory(buf.data()).ok());
}

TEST_F(VerbsRegistration, BuffersLongerThanMaxMrSizeAreChunksThatMoveBytes) {
  constexpr uint64_t kChunk = 1 << 20;
  RegistrationModel model;
  model.max_mr_size = kChunk;
  open(model);
  const int64_t mrs_before = liveMrs();
  // 3.5 chunks: 4 regions per device, the last one half a chunk.
  const size_t length = 3 * kChunk + kChunk / 2;
  std::vector<uint8_t> a(length), b(length);
  const uint64_t regs_before = engineTestVerbs().stats().registrations;
  ASSERT_TRUE(engine->registerLocalMemory(a.data(), a.size(), "cpu:0").ok());
  ASSERT_TRUE(engine->registerLocalMemory(b.data(), b.size(), "cpu:0").ok());
  EXPECT_EQ(engineTestVerbs().stats().registrations - regs_before, 2u * 4u * 2u);
  EXPECT_EQ(liveMrs() - mrs_before, 16);
  // Every chunk, the last (short) one included, with its own keys on both sides.
  uint32_t seed = 70;
  for (uint64_t off : {uint64_t{0}, kChunk + 4096, 2 * kChunk, 3 * kChunk + 8192}) {
    const uint64_t len = std::min<uint64_t>(256 << 10, length - off);
    fillPattern(a.data() + off, len, seed);
    std::memset(b.data() + off, 0, len);
    ASSERT_EQ(move(OpCode::WRITE, a.data() + off, b.data() + off, len), TransferState::COMPLETED)
        << "offset " << off;
    EXPECT_EQ(checkPattern(b.data() + off, len, seed), -1) << "offset " << off;
    std::memset(a.data() + off, 0, len);
    ASSERT_EQ(move(OpCode::READ, a.data() + off, b.data() + off, len), TransferState::COMPLETED);
    EXPECT_EQ(checkPattern(a.data() + off, len, seed), -1) << "offset " << off;
    ++seed;
  }
  // A request across two chunks has no single region's keys: refused at submit.
  auto batch = engine->allocateBatch(1);
  ASSERT_TRUE(batch.ok());
  Request across;
  across.opcode = OpCode::WRITE;
  across.source = a.data() + kChunk - 4096;
  across.target_id = LOCAL_SEGMENT_ID;
  across.target_offset = reinterpret_cast<uint64_t>(b.data() + 4096);
  across.length = 8192;
  EXPECT_EQ(engine->submitTransfer(*batch, {&across, 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine->freeBatch(*batch).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(a.data()).ok());
  EXPECT_TRUE(engine->unregisterLocalMemory(b.data()).ok());
  EXPECT_EQ(liveMrs(), mrs_before);  // every chunk of the group released
}

TEST_F(VerbsRegistration, FailureOnOneDeviceReleasesTheOthers) {
  RegistrationModel model;
  model.max_mr_size = 1 << 20;
  open(model);
  const int64_t mrs_before = liveMrs();
  model.fail_on_device = "soft1";
  engineTestVerbs().setRegistrationModel(model);
  std::vector<uint8_t> buf(3 << 20);
  Status s = engine->registerLocalMemory(buf.data(), buf.size(), "cpu:0");
  EXPECT_EQ(s.code(), StatusCode::kIoError) << s.toString();
  EXPECT_NE(s.message().find("soft1"), std::string::npos) << s.toString();
  EXPECT_EQ(liveMrs(), mrs_before);  // soft0's three chunks deregistered again
  // Nothing half-registered stays behind: the range registers once the device works.
  model.fail_on_device.clear();
  engineTestVerbs().setRegistrationModel(model);
  ASSERT_TRUE(engine->registerLocalMemory(buf.data(), buf.size(), "cpu:0").ok());
  EXPECT_EQ(liveMrs() - mrs_before, 6);
  EXPECT_TRUE(engine->unregisterLocalMemory(buf.data()).ok());
  EXPECT_EQ(liveMrs(), mrs_before);
}

}  // namespace
}  // namespace tent::testing
