// Device events (fatal error, port down / up, address change) and the engine's
// reaction, on the soft provider (events injected through its fault injector) and on
// the verbs provider over the loopback fake device (suite fake-verbs: async events
// through ibv_get_async_event). The tcp provider reports no events: skipped there.
// Manual lcore mode: the test steps the pollers; the control loop reads the events on
// its own thread, so the tests poll for their effect with generous deadlines.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fabric/soft/soft_faults.h"
#include "model/rdma_context.h"
#include "tests/support/engine_test_util.h"
#ifdef TENT_HAVE_VERBS
#include "fabric/verbs/verbs_objects.h"
#endif

namespace tent::testing {
namespace {

using fabric::DeviceEventType;

constexpr size_t kBuf = 4 << 20;
constexpr size_t kTask = 256 << 10;  // 4 slices of 64 KiB
constexpr uint64_t kSoft0 = 0b01, kSoft1 = 0b10;

#define SKIP_WITHOUT_EVENTS()                                                              \
  do {                                                                                     \
    if (testFabric() == TestFabric::kTcp)                                                  \
      GTEST_SKIP() << "the tcp provider reports no device events; this run uses provider " \
                   << testProviderName();                                                  \
  } while (0)

struct Node {
  explicit Node(const std::string& yaml) : engine(makeEngine(yaml)) {
    if (engine) mem = static_cast<uint8_t*>(*engine->allocateLocalMemory(kBuf, "cpu:0"));
  }
  std::unique_ptr<TransferEngineImpl> engine;
  uint8_t* mem = nullptr;
};

#ifdef TENT_HAVE_VERBS
ibv_context* verbsContext(TransferEngineImpl& e, size_t device) {
  auto& d = static_cast<fabric::verbs::VerbsDevice&>(e.transport().context(device).device());
  return d.context();
}

ibv_event_type ibvType(DeviceEventType type) {
  switch (type) {
    case DeviceEventType::kFatal:
      return IBV_EVENT_DEVICE_FATAL;
    case DeviceEventType::kPortDown:
      return IBV_EVENT_PORT_ERR;
    case DeviceEventType::kPortUp:
      return IBV_EVENT_PORT_ACTIVE;
    case DeviceEventType::kAddressChange:
      return IBV_EVENT_GID_CHANGE;
  }
  return IBV_EVENT_DEVICE_FATAL;
}
#endif

// What a NIC would report on the engine's device `device`.
void inject(TransferEngineImpl& e, size_t device, DeviceEventType type) {
#ifdef TENT_HAVE_VERBS
  if (testFabric() == TestFabric::kFakeVerbs) {
    fabric::testing::engineTestVerbs().injectAsyncEvent(verbsContext(e, device), ibvType(type));
    return;
  }
#endif
  auto* faults = fabric::soft::faultInjector(e.provider());
  ASSERT_NE(faults, nullptr);
  ASSERT_TRUE(faults->injectDeviceEvent(e.transport().context(device).name(), type).ok());
}

// Keeps the WRs posted on `device` in flight: their completions do not show for now.
void holdCompletions(TransferEngineImpl& e, size_t device) {
#ifdef TENT_HAVE_VERBS
  if (testFabric() == TestFabric::kFakeVerbs) {
    fabric::testing::engineTestVerbs().holdCompletions(verbsContext(e, device), true);
    return;
  }
#endif
  auto* faults = fabric::soft::faultInjector(e.provider());
  ASSERT_NE(faults, nullptr);
  fabric::soft::FaultRule hold;
  hold.device = e.transport().context(device).name();
  hold.every_nth = 1;
  hold.action = fabric::soft::FaultAction::kDelay;
  hold.delay_ns = uint64_t{3600} * 1'000'000'000;  // longer than any test
  ASSERT_TRUE(faults->addRule(hold).ok());
}

TransferState one(Node& from, uint64_t mask, OpCode op, size_t offset, SegmentId seg,
                  uint8_t* remote, size_t len) {
  auto b = *from.engine->allocateBatch(1);
  Request r{op, from.mem + offset, seg, reinterpret_cast<uint64_t>(remote + offset), len};
  Status s = from.engine->submitTransferWithMask(b, {&r, 1}, mask);
  TransferState st = s.ok() ? waitTask(*from.engine, b, 0).state : TransferState::FAILED;
  (void)from.engine->freeBatch(b);
  return st;
}

uint64_t heldSlices(TransferEngineImpl& e) {
  uint64_t held = 0;
  for (size_t i = 0; i < e.transport().pollerCount(); ++i)
    held += e.transport().poller(i).heldSlices();
  return held;
}

uint32_t lanesInUse(TransferEngineImpl& e) {
  uint32_t n = 0;
  for (size_t i = 0; i < e.transport().contextCount(); ++i)
    n += e.transport().context(i).lanesInUse();
  return n;
}

// Steps the pollers until `pred` holds (the control loop acts on its own thread).
template <typename Pred>
bool stepUntil(TransferEngineImpl& e, Pred pred) {
  return eventually([&] {
    e.transport().stepPollers();
    return pred();
  });
}

class DeviceEvents : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_EVENTS();
    a_ = std::make_unique<Node>(simYaml("", "", workersA()));
    b_ = std::make_unique<Node>(simYaml());
    ASSERT_TRUE(a_->engine && b_->engine && a_->mem && b_->mem);
    auto seg = a_->engine->openSegment(b_->engine->segmentName());
    ASSERT_TRUE(seg.ok()) << seg.status().toString();
    seg_ = *seg;
    // Both rails connected before the tests start counting.
    for (uint64_t mask : {kSoft0, kSoft1}) {
      fillPattern(a_->mem, kTask, 7);
      ASSERT_EQ(one(*a_, mask, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
      ASSERT_EQ(checkPattern(b_->mem, kTask, 7), -1);
    }
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
  }
  EngineStats statsA() { return a_->engine->stats(); }
  virtual std::string workersA() const { return ""; }

  std::unique_ptr<Node> a_, b_;
  SegmentId seg_ = 0;
};

// Tasks in flight on two rails; device soft1 dies. Its tasks (worker slices and a
// direct WR) end FAILED though no completion ever comes; soft0's complete with every
// byte; slices, lanes and the slice pool return to their baseline.
TEST_F(DeviceEvents, FatalErrorFailsTheDeadDevicesTasksOthersComplete) {
  TransferEngineImpl& a = *a_->engine;
  const uint64_t pool_baseline = a.transport().slicePool().available();
  ASSERT_EQ(heldSlices(a), 0u);
  ASSERT_EQ(lanesInUse(a), 0u);
  const uint64_t posted_before = statsA().worker.slices_posted;

  holdCompletions(a, 1);
  constexpr size_t kPerRail = 4;
  std::vector<Request> dead_reqs, live_reqs;
  for (size_t i = 0; i < kPerRail; ++i) {
    const size_t dead_off = i * kTask, live_off = (kPerRail + i) * kTask;
    fillPattern(a_->mem + dead_off, kTask, 100 + static_cast<uint32_t>(i));
    fillPattern(a_->mem + live_off, kTask, 200 + static_cast<uint32_t>(i));
    dead_reqs.push_back({OpCode::WRITE, a_->mem + dead_off, seg_,
                         reinterpret_cast<uint64_t>(b_->mem + dead_off), kTask});
    live_reqs.push_back({OpCode::WRITE, a_->mem + live_off, seg_,
                         reinterpret_cast<uint64_t>(b_->mem + live_off), kTask});
  }
  auto dead = *a.allocateBatch(kPerRail + 1);
  auto live = *a.allocateBatch(kPerRail);
  ASSERT_TRUE(a.submitTransferWithMask(dead, dead_reqs, kSoft1).ok());
  ASSERT_TRUE(a.submitTransferWithMask(live, live_reqs, kSoft0).ok());
  // A latency-sensitive READ on soft1: the direct path (or its rail poller).
  const size_t direct_off = 2 * kPerRail * kTask;
  Request direct{OpCode::READ, a_->mem + direct_off, seg_,
                 reinterpret_cast<uint64_t>(b_->mem + direct_off), 4096};
  direct.intent_type = IntentType::FOREGROUND_GET;
  ASSERT_TRUE(a.submitTransferWithMask(dead, {&direct, 1}, kSoft1).ok());

  // Every worker slice posted: soft1's wait for completions that will never come.
  const uint64_t slices = 2 * kPerRail * (kTask / (64 << 10));
  const bool direct_posted = statsA().direct.succeeded > 0;
  EXPECT_TRUE(direct_posted) << "the READ took the worker path: the direct lane goes untested";
  const uint64_t dead_slices = kPerRail * (kTask / (64 << 10)) + (direct_posted ? 0 : 1);
  ASSERT_TRUE(stepUntil(a, [&] {
    return statsA().worker.slices_posted - posted_before >= slices && heldSlices(a) == dead_slices;
  })) << "not every slice posted, or soft0's did not complete";

  inject(a, 1, DeviceEventType::kFatal);
  ASSERT_TRUE(eventually([&] { return statsA().device_events.fatal == 1; }));
  EXPECT_EQ(statsA().device_events.devices_down, 1u);

  for (size_t i = 0; i <= kPerRail; ++i)
    EXPECT_EQ(waitTask(a, dead, i).state, TransferState::FAILED) << "task " << i << " on soft1";
  for (size_t i = 0; i < kPerRail; ++i) {
    EXPECT_EQ(waitTask(a, live, i).state, TransferState::COMPLETED) << "task " << i << " on soft0";
    EXPECT_EQ(checkPattern(b_->mem + (kPerRail + i) * kTask, kTask, 200 + static_cast<uint32_t>(i)),
              -1);
  }
  const EngineStats st = statsA();
  EXPECT_EQ(st.device_events.failed_slices, kPerRail * (kTask / (64 << 10)));
  if (direct_posted) {
    EXPECT_EQ(st.device_events.failed_direct, 1u);
  }
  ASSERT_TRUE(drainPollers(a));
  EXPECT_EQ(lanesInUse(a), 0u);
  ASSERT_TRUE(a.freeBatch(dead).ok());
  ASSERT_TRUE(a.freeBatch(live).ok());
  EXPECT_EQ(a.transport().slicePool().available(), pool_baseline);

  // The rail stays down: soft1 alone cannot serve; soft0 (and "any device") still do.
  EXPECT_NE(one(*a_, kSoft1, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
  fillPattern(a_->mem, kTask, 9);
  EXPECT_EQ(one(*a_, ~0ull, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(b_->mem, kTask, 9), -1);
  EXPECT_EQ(statsA().bytes_per_device["soft1"], st.bytes_per_device.at("soft1"));
}

// A slice that timed out waits for its flush, which a dead device never sends: the
// fatal error ends it too, and its task with TIMEOUT.
class DeviceEventsShortTimeout : public DeviceEvents {
 protected:
  std::string workersA() const override { return ", slice_timeout_ms: 100"; }
};

TEST_F(DeviceEventsShortTimeout, FatalErrorEndsSlicesWaitingForTheirFlush) {
  TransferEngineImpl& a = *a_->engine;
  const uint64_t pool_baseline = a.transport().slicePool().available();
  holdCompletions(a, 1);
  auto b = *a.allocateBatch(1);
  Request r{OpCode::WRITE, a_->mem, seg_, reinterpret_cast<uint64_t>(b_->mem), kTask};
  ASSERT_TRUE(a.submitTransferWithMask(b, {&r, 1}, kSoft1).ok());
  auto timeouts = [&] {
    uint64_t n = 0;
    for (size_t i = 0; i < a.transport().pollerCount(); ++i)
      n += a.transport().poller(i).counters().slice_timeouts.load();
    return n;
  };
  ASSERT_TRUE(stepUntil(a, [&] { return timeouts() > 0; }));
  inject(a, 1, DeviceEventType::kFatal);
  ASSERT_TRUE(eventually([&] { return statsA().device_events.fatal == 1; }));
  EXPECT_EQ(waitTask(a, b, 0).state, TransferState::TIMEOUT);
  ASSERT_TRUE(drainPollers(a));
  ASSERT_TRUE(a.freeBatch(b).ok());
  EXPECT_EQ(a.transport().slicePool().available(), pool_baseline);
}

// Port down pauses the rail (nothing is routed to it, other rails serve); port up
// resumes it.
TEST_F(DeviceEvents, PortDownPausesTheRailPortUpResumesIt) {
  TransferEngineImpl& a = *a_->engine;
  inject(a, 1, DeviceEventType::kPortDown);
  ASSERT_TRUE(eventually([&] { return statsA().device_events.devices_down == 1; }));
  EXPECT_EQ(statsA().device_events.port_down, 1u);
  const uint64_t soft1_bytes = statsA().bytes_per_device["soft1"];

  EXPECT_NE(one(*a_, kSoft1, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
  fillPattern(a_->mem, kTask, 11);
  EXPECT_EQ(one(*a_, ~0ull, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(b_->mem, kTask, 11), -1);
  EXPECT_EQ(statsA().bytes_per_device["soft1"], soft1_bytes) << "a paused rail carried bytes";

  inject(a, 1, DeviceEventType::kPortUp);
  ASSERT_TRUE(eventually([&] { return statsA().device_events.devices_down == 0; }));
  EXPECT_EQ(statsA().device_events.port_up, 1u);
  fillPattern(a_->mem + kTask, kTask, 12);
  // The first try after the pause may meet an endpoint that the port-down reset: the
  // engine reconnects it; the transfer after that must succeed.
  TransferState st = TransferState::FAILED;
  for (int attempt = 0; attempt < 3 && st != TransferState::COMPLETED; ++attempt)
    st = one(*a_, kSoft1, OpCode::WRITE, kTask, seg_, b_->mem, kTask);
  EXPECT_EQ(st, TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(b_->mem + kTask, kTask, 12), -1);
  EXPECT_GT(statsA().bytes_per_device["soft1"], soft1_bytes);
  ASSERT_TRUE(drainPollers(a));
}

// An address change reaches the descriptor this engine hands out (fake verbs: the
// GID changes in the device's table; soft: its identity stays, the event is counted
// and the descriptor published again).
TEST_F(DeviceEvents, AddressChangeReachesTheDescriptor) {
  TransferEngineImpl& a = *a_->engine;
  const auto before = a.transport().localMemory().descriptor().devices.at(0).port;
#ifdef TENT_HAVE_VERBS
  if (testFabric() == TestFabric::kFakeVerbs) {
    auto& fake = fabric::testing::engineTestVerbs();
    char old_text[INET6_ADDRSTRLEN] = {};
    ASSERT_NE(inet_ntop(AF_INET6, before.gid.data(), old_text, sizeof(old_text)), nullptr);
    // soft0's RoCE v2 IPv4-mapped GID (index 3, the one chosen) is re-addressed.
    ASSERT_TRUE(fake.replaceGid("soft0", 3, "::ffff:10.77.9.1"));
    inject(a, 0, DeviceEventType::kAddressChange);
    ASSERT_TRUE(eventually([&] { return statsA().device_events.address_changes == 1; }));
    const auto after = a.transport().localMemory().descriptor().devices.at(0).port;
    in6_addr want{};
    ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.77.9.1", &want), 1);
    EXPECT_EQ(std::memcmp(after.gid.data(), &want, 16), 0) << "the descriptor names the old GID";
    // Back as it was, for the engines of later tests in this program.
    ASSERT_TRUE(fake.replaceGid("soft0", 3, old_text));
    inject(a, 0, DeviceEventType::kAddressChange);
    ASSERT_TRUE(eventually([&] { return statsA().device_events.address_changes == 2; }));
    EXPECT_EQ(a.transport().localMemory().descriptor().devices.at(0).port, before);
    return;
  }
#endif
  inject(a, 0, DeviceEventType::kAddressChange);
  ASSERT_TRUE(eventually([&] { return statsA().device_events.address_changes == 1; }));
  EXPECT_EQ(a.transport().localMemory().descriptor().devices.at(0).port, before);
  fillPattern(a_->mem, kTask, 13);
  EXPECT_EQ(one(*a_, ~0ull, OpCode::WRITE, 0, seg_, b_->mem, kTask), TransferState::COMPLETED);
  EXPECT_EQ(checkPattern(b_->mem, kTask, 13), -1);
}

}  // namespace
}  // namespace tent::testing
