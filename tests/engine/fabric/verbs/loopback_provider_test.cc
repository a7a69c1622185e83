// The verbs provider's real code over the loopback fake device, through fabric.h:
// device info from the fake sysfs, connectQp, WRITE and READ with every byte
// verified, counters, retry-exceeded to a destroyed peer; and the test hook that
// makes fabric::createProvider() use the fake.
#include <gtest/gtest.h>

#include "config/config.h"
#include "fabric/select/select_provider.h"
#include "fabric/verbs/verbs_ops.h"
#include "loopback_test_util.h"
#include "topology/topology.h"

namespace tent::fabric {
namespace {

using testing::LoopbackOptions;
using testing::LoopbackVerbs;

LoopbackOptions twoDevices() {
  LoopbackOptions o;
  o.devices = {{"lb0", true, 0}, {"lb1", false, 0}};  // one RoCE, one IB port
  return o;
}

config::VerbsFabricConfig quickRetry() {
  config::VerbsFabricConfig c;
  c.timeout = 1;  // (7 + 1) x 4.096 us x 2: 65 us
  return c;
}

struct ProviderOnFake : ::testing::Test {
  void SetUp() override {
    auto p = createVerbsProvider(quickRetry(), fake.ops());
    ASSERT_TRUE(p.ok()) << p.status().toString();
    provider = std::move(p).value();
    ASSERT_EQ(provider->deviceCount(), 2u);
    for (size_t d = 0; d < 2; ++d) {
      cqs[d] = std::move(provider->device(d).createCq(256)).value();
      qps[d] = std::move(provider->device(d).createQp({cqs[d].get(), 16, 2})).value();
    }
    ASSERT_TRUE(connectQp(*qps[0], {qps[1]->qpNum(), provider->device(1).portIdentity(), 0}).ok());
    ASSERT_TRUE(connectQp(*qps[1], {qps[0]->qpNum(), provider->device(0).portIdentity(), 0}).ok());
    src.assign(1 << 20, 0);
    dst.assign(1 << 20, 0);
    ms = std::move(provider->device(0).registerMemory(src.data(), src.size(), kAccessRemoteRead))
             .value();
    md = std::move(provider->device(1).registerMemory(dst.data(), dst.size(),
                                                      kAccessRemoteRead | kAccessRemoteWrite))
             .value();
  }
  void TearDown() override {
    for (auto& q : qps) q.reset();
    for (auto& c : cqs) c.reset();
    ms.reset();
    md.reset();
    provider.reset();
  }
  WorkCompletion post(WrOpcode op, uint32_t lkey, uint32_t len) {
    Sge sge{reinterpret_cast<uint64_t>(src.data()), len, lkey};
    SendWr wr{77, op, true, 1, &sge, reinterpret_cast<uint64_t>(dst.data()), md->rkey(), nullptr};
    const SendWr* bad = nullptr;
    EXPECT_EQ(qps[0]->postSend(&wr, &bad), 0);
    WorkCompletion wc{};
    for (int i = 0; i < 1000000 && cqs[0]->poll(&wc, 1) == 0; ++i) {
    }
    return wc;
  }
  LoopbackVerbs fake{twoDevices()};
  std::unique_ptr<Provider> provider;
  std::unique_ptr<CompletionQueue> cqs[2];
  std::unique_ptr<QueuePair> qps[2];
  std::vector<uint8_t> src, dst;
  std::unique_ptr<MemoryRegion> ms, md;
};

TEST_F(ProviderOnFake, DeviceInfoComesFromTheFakeSysfs) {
  const DeviceInfo& info = provider->device(1).info();
  EXPECT_EQ(info.name, "lb1");
  EXPECT_EQ(info.numa_node, 0);
  EXPECT_EQ(info.pci, "0000:00:11.0");
  EXPECT_DOUBLE_EQ(info.link_gbps, 100);
  EXPECT_NE(provider->device(0).portIdentity(), provider->device(1).portIdentity());
  EXPECT_NE(provider->device(1).portIdentity().lid, 0);  // the IB port
  EXPECT_NE(provider->linkModel().find("lb0 port 1 RoCE"), std::string::npos);
}

TEST_F(ProviderOnFake, WriteAndReadBackEveryByteAndCountTraffic) {
  testing::fill(src, 9);
  WorkCompletion wc = post(WrOpcode::kRdmaWrite, ms->lkey(), 1 << 20);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.opcode, WrOpcode::kRdmaWrite);
  EXPECT_TRUE(testing::holds(dst.data(), dst.size(), 9));
  EXPECT_EQ(qps[0]->outstanding(), 0u);
  EXPECT_GE(provider->device(0).counters().bytes, 1u << 20);
  EXPECT_GE(provider->device(1).counters().bytes, 1u << 20);
  EXPECT_EQ(provider->device(0).counters().wrs, 1u);
  // READ needs LOCAL_WRITE on the local buffer: the provider's registration of
  // remote-read-only memory does not give it, and the fake checks it.
  wc = post(WrOpcode::kRdmaRead, ms->lkey(), 4096);
  EXPECT_EQ(wc.status, WcStatus::kLocalProtection);
  EXPECT_EQ(qps[0]->state(), QpState::kError);
}

TEST_F(ProviderOnFake, DestroyedPeerGivesRetryExceededAndError) {
  qps[1].reset();
  WorkCompletion wc = post(WrOpcode::kRdmaWrite, ms->lkey(), 4096);
  EXPECT_EQ(wc.status, WcStatus::kRetryExceeded);
  EXPECT_EQ(qps[0]->state(), QpState::kError);
  EXPECT_EQ(fake.stats().retry_exceeded, 1u);
}

TEST(VerbsOpsOverride, CreateProviderUsesTheFakeAndCountsItsDevices) {
  LoopbackVerbs fake(twoDevices());
  auto topo = topology::Topology::loadLive();
  ASSERT_TRUE(topo.ok()) << topo.status().toString();
  config::FabricConfig config;
  config.provider = config::FabricProvider::kVerbs;
  config.verbs.devices = {"lb1"};
  setVerbsOpsOverride(&fake.ops());
  {
    auto p = createProvider(config, *topo);
    ASSERT_TRUE(p.ok()) << p.status().toString();
    EXPECT_EQ((*p)->name(), "verbs");
    ASSERT_EQ((*p)->deviceCount(), 1u);
    EXPECT_EQ((*p)->device(0).info().name, "lb1");
    config.provider = config::FabricProvider::kAuto;  // auto counts the fake's devices
    auto a = chooseProvider(config, *topo);
    ASSERT_TRUE(a.ok()) << a.status().toString();
    EXPECT_EQ(a->provider->name(), "verbs");
    EXPECT_EQ(a->reason, "auto: rdma-core lists 2 RDMA device(s) and they open");
    config.verbs.devices = {"mlx5_0"};  // a named device the host lacks fails, under auto too
    auto missing = chooseProvider(config, *topo);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("RDMA device mlx5_0 not found"), std::string::npos)
        << missing.status().toString();
  }
  setVerbsOpsOverride(nullptr);
  EXPECT_EQ(&activeVerbsOps(), &realVerbsOps());
  EXPECT_EQ(fake.stats().open_contexts, 0);
}

}  // namespace
}  // namespace tent::fabric
