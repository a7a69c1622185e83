// The verbs provider's async events over the loopback fake device: the context's
// async_fd is pollable, every event is read without blocking and acknowledged, port
// events of other ports and events the engine does not use are dropped, a GID change
// refreshes portIdentity(), and a fatal error silences the context's CQs.
#include <gtest/gtest.h>
#include <poll.h>

#include <arpa/inet.h>

#include <cstring>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_ops.h"
#include "loopback_test_util.h"

namespace tent::fabric {
namespace {

using testing::LoopbackOptions;
using testing::LoopbackVerbs;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

struct EventsOnFake : ::testing::Test {
  void SetUp() override {
    LoopbackOptions o;
    o.devices = {{"lb0", true, 0}};
    fake = std::make_unique<LoopbackVerbs>(o);
    auto p = createVerbsProvider(config::VerbsFabricConfig{}, fake->ops());
    ASSERT_TRUE(p.ok()) << p.status().toString();
    provider = std::move(p).value();
  }
  void TearDown() override {
    provider.reset();
    fake.reset();
  }
  Device& device() { return provider->device(0); }
  ibv_context* context() { return static_cast<verbs::VerbsDevice&>(device()).context(); }

  std::unique_ptr<LoopbackVerbs> fake;
  std::unique_ptr<Provider> provider;
};

TEST_F(EventsOnFake, PortEventsAreReadWithoutBlockingAndAcknowledged) {
  const int fd = device().eventFd();
  ASSERT_GE(fd, 0);
  DeviceEventType type{};
  EXPECT_FALSE(readable(fd));
  EXPECT_FALSE(device().nextEvent(&type));

  fake->injectAsyncEvent(context(), IBV_EVENT_PORT_ERR, 1);
  EXPECT_TRUE(readable(fd));
  ASSERT_TRUE(device().nextEvent(&type));
  EXPECT_EQ(type, DeviceEventType::kPortDown);
  EXPECT_FALSE(device().nextEvent(&type));
  EXPECT_FALSE(readable(fd));

  // Another port's event and one the engine does not use: read, acknowledged, dropped.
  fake->injectAsyncEvent(context(), IBV_EVENT_PORT_ERR, 2);
  fake->injectAsyncEvent(context(), IBV_EVENT_SM_CHANGE, 1);
  fake->injectAsyncEvent(context(), IBV_EVENT_PORT_ACTIVE, 1);
  ASSERT_TRUE(device().nextEvent(&type));
  EXPECT_EQ(type, DeviceEventType::kPortUp);
  EXPECT_FALSE(device().nextEvent(&type));
  EXPECT_EQ(fake->stats().async_acks, 4u);
}

TEST_F(EventsOnFake, GidChangeRefreshesThePortIdentity) {
  const PortIdentity before = device().portIdentity();
  ASSERT_TRUE(fake->replaceGid("lb0", 3, "::ffff:10.77.3.3"));
  EXPECT_EQ(device().portIdentity(), before) << "refreshed before the event";
  fake->injectAsyncEvent(context(), IBV_EVENT_GID_CHANGE, 1);
  DeviceEventType type{};
  ASSERT_TRUE(device().nextEvent(&type));
  EXPECT_EQ(type, DeviceEventType::kAddressChange);
  in6_addr want{};
  ASSERT_EQ(inet_pton(AF_INET6, "::ffff:10.77.3.3", &want), 1);
  EXPECT_EQ(std::memcmp(device().portIdentity().gid.data(), &want, 16), 0);
  EXPECT_EQ(device().portLink().gid_type, GidType::kRoceV2);
}

TEST_F(EventsOnFake, FatalErrorSilencesTheContext) {
  auto cq = std::move(device().createCq(64)).value();
  auto qp = std::move(device().createQp({cq.get(), 16, 1})).value();
  ASSERT_TRUE(connectQp(*qp, {qp->qpNum(), device().portIdentity(), 0}).ok());
  std::vector<uint8_t> src(4096, 7), dst(4096, 0);
  auto ms = std::move(device().registerMemory(src.data(), src.size(), kAccessRemoteRead)).value();
  auto md = std::move(device().registerMemory(dst.data(), dst.size(), kAccessRemoteWrite)).value();
  fake->injectAsyncEvent(context(), IBV_EVENT_DEVICE_FATAL);
  DeviceEventType type{};
  ASSERT_TRUE(device().nextEvent(&type));
  EXPECT_EQ(type, DeviceEventType::kFatal);
  Sge sge{reinterpret_cast<uint64_t>(src.data()), 4096, ms->lkey()};
  SendWr wr{1,          WrOpcode::kRdmaWrite,
            true,       1,
            &sge,       reinterpret_cast<uint64_t>(dst.data()),
            md->rkey(), nullptr};
  const SendWr* bad = nullptr;
  EXPECT_EQ(qp->postSend(&wr, &bad), 0);  // the doorbell rings; nothing happens
  WorkCompletion wc[4];
  for (int i = 0; i < 100; ++i) EXPECT_EQ(cq->poll(wc, 4), 0) << "a completion after a fatal error";
  EXPECT_EQ(dst[0], 0) << "a dead device moved bytes";
  qp.reset();
  md.reset();
  ms.reset();
  cq.reset();
}

}  // namespace
}  // namespace tent::fabric
