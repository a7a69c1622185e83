// Soft provider: devices, configuration, identities, shared memory, the factory.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "fabric/select/select_provider.h"
#include "fabric/soft/soft_layout.h"
#include "soft_test_util.h"
#include "topology/topology.h"

namespace tent::fabric::soft::testing {
namespace {

TEST(SoftDevices, ConfigListWins) {
  config::SoftFabricConfig cfg;
  cfg.devices = {softDevice("a", 100, 2000), softDevice("b")};
  std::vector<topology::PciDevice> nics = {{"mlx5_0", "0000:3b:00.0", 1, {}}};
  auto d = resolveDevices(cfg, nics);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "a");
  EXPECT_EQ(d[0].link_gbps, 100);
  EXPECT_EQ(d[1].name, "b");
}

TEST(SoftDevices, OnePerTopologyNicWithTheDefaultLink) {
  config::SoftFabricConfig cfg;
  cfg.default_link_gbps = 200;
  cfg.default_latency_ns = 1500;
  std::vector<topology::PciDevice> nics = {{"mlx5_0", "0000:3b:00.0", 0, {}},
                                           {"mlx5_1", "0000:d8:00.0", 1, {}}};
  auto d = resolveDevices(cfg, nics);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].name, "mlx5_1");
  EXPECT_EQ(d[1].pci, "0000:d8:00.0");
  EXPECT_EQ(d[1].numa_node, 1);
  EXPECT_EQ(d[1].link_gbps, 200);
  EXPECT_EQ(d[1].latency_ns, 1500u);
}

TEST(SoftDevices, Soft0WhenTheTopologyHasNoNic) {
  auto d = resolveDevices(config::SoftFabricConfig{}, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "soft0");
  EXPECT_EQ(d[0].numa_node, 0);
}

// A topology XML that lists NICs yields soft devices with their names and places.
TEST(SoftDevices, FromATopologyXml) {
  auto topo = topology::Topology::loadXml(TENT_SOFT_TEST_TOPOLOGY);
  ASSERT_TRUE(topo.ok()) << topo.status().toString();
  const auto& nics = topo->rdmaDevices();
  ASSERT_FALSE(nics.empty());
  config::SoftFabricConfig cfg = testConfig();
  cfg.default_link_gbps = 400;
  auto provider = createSoftProvider(cfg, *topo);
  ASSERT_TRUE(provider.ok()) << provider.status().toString();
  ASSERT_EQ((*provider)->deviceCount(), nics.size());
  for (size_t i = 0; i < nics.size(); ++i) {
    const DeviceInfo& info = (*provider)->device(i).info();
    EXPECT_EQ(info.name, nics[i].name);
    EXPECT_EQ(info.pci, nics[i].pci);
    EXPECT_EQ(info.numa_node, nics[i].numa_node);
    EXPECT_EQ(info.link_gbps, 400);
  }
}

TEST(SoftProvider, FactoryBuildsSoftDevicesWithInfo) {
  config::FabricConfig cfg;
  cfg.provider = config::FabricProvider::kSoft;
  cfg.soft.devices = {softDevice("soft0", 100, 2000), softDevice("soft1")};
  cfg.soft.devices[1].numa_node = 1;
  cfg.soft.devices[1].pci = "0000:5e:00.0";
  auto r = createProvider(cfg, topology::Topology{});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  Provider& p = **r;
  EXPECT_EQ(p.name(), "soft");
  ASSERT_EQ(p.deviceCount(), 2u);
  EXPECT_EQ(p.device(0).info().name, "soft0");
  EXPECT_EQ(p.device(0).info().link_gbps, 100);
  EXPECT_EQ(p.device(0).info().latency_ns, 2000u);
  EXPECT_EQ(p.device(1).info().index, 1u);
  EXPECT_EQ(p.device(1).info().numa_node, 1);
  EXPECT_EQ(p.device(1).info().pci, "0000:5e:00.0");
  EXPECT_EQ(p.linkModel(),
            "soft: soft0 link_gbps=100 latency_ns=2000; soft1 link_gbps=unlimited latency_ns=0; "
            "payload copy non-temporal from 65536 B");
  EXPECT_NE(p.device(0).portIdentity(), p.device(1).portIdentity());
}

TEST(SoftProvider, InvalidConfigsAreRejected) {
  auto code = [](config::SoftFabricConfig cfg, std::vector<config::SoftDevice> devs) {
    return createSoftProvider(cfg, std::move(devs)).status().code();
  };
  config::SoftFabricConfig cfg;
  EXPECT_EQ(code(cfg, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cfg, {softDevice("x"), softDevice("x")}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cfg, {softDevice("")}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(cfg, {softDevice("x", -1)}), StatusCode::kInvalidArgument);
  cfg.max_mrs = 0;
  EXPECT_EQ(code(cfg, {softDevice("x")}), StatusCode::kInvalidArgument);
  cfg.max_mrs = kMaxMrs + 1;
  EXPECT_EQ(code(cfg, {softDevice("x")}), StatusCode::kInvalidArgument);
  cfg = {};
  cfg.shm_dir = "/nonexistent/tent";
  EXPECT_EQ(code(cfg, {softDevice("x")}), StatusCode::kInvalidArgument);
  cfg = {};
  cfg.retry_budget_ms = 0;
  EXPECT_EQ(code(cfg, {softDevice("x")}), StatusCode::kInvalidArgument);
}

TEST(SoftProvider, IdentityRoundTripsAndRejectsForeignGids) {
  SoftAddress a{4242, 0x0123456789abcdefull, 7, 0x1234};
  SoftAddress b;
  ASSERT_TRUE(decodeIdentity(encodeIdentity(a), &b));
  EXPECT_EQ(b.pid, a.pid);
  EXPECT_EQ(b.nonce, a.nonce);
  EXPECT_EQ(b.device_index, a.device_index);
  EXPECT_EQ(b.boot, a.boot);
  PortIdentity ib;
  ib.gid[0] = 0xfe;
  ib.gid[1] = 0x80;
  EXPECT_FALSE(decodeIdentity(ib, &b));
}

TEST(SoftProvider, ControlFilesLiveAsLongAsTheProvider) {
  auto provider = makeProvider({softDevice("soft0")});
  ASSERT_NE(provider, nullptr);
  SoftAddress a;
  ASSERT_TRUE(decodeIdentity(provider->device(0).portIdentity(), &a));
  EXPECT_EQ(a.pid, static_cast<uint32_t>(getpid()));
  const std::string path = "/dev/shm/" + controlFileName(a.pid, a.nonce, a.device_index);
  struct stat st {};
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  provider.reset();
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

TEST(SoftProvider, AllocateMemoryIsSharedMemoryAndFreeChecksItsArgument) {
  auto provider = makeProvider({softDevice("soft0")});
  ASSERT_NE(provider, nullptr);
  auto mem = provider->allocateMemory(10000, 0);
  ASSERT_TRUE(mem.ok()) << mem.status().toString();
  auto* bytes = static_cast<uint8_t*>(*mem);
  std::memset(bytes, 0xAB, 10000);  // usable
  EXPECT_EQ(provider->allocateMemory(0, 0).status().code(), StatusCode::kInvalidArgument);
  int on_stack = 0;
  EXPECT_EQ(provider->freeMemory(&on_stack, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(provider->freeMemory(bytes, 1 << 20).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(provider->freeMemory(bytes, 10000).ok());
  EXPECT_EQ(provider->freeMemory(bytes, 10000).code(), StatusCode::kInvalidArgument);
}

// Two providers in one process reach each other through their control files, like
// two processes would (their copies are plain memcpy: same address space).
TEST(SoftProvider, TwoProvidersTalkThroughTheirControlFiles) {
  auto p1 = makeProvider({softDevice("left")});
  auto p2 = makeProvider({softDevice("right")});
  ASSERT_TRUE(p1 && p2);
  Device& d1 = p1->device(0);
  Device& d2 = p2->device(0);
  auto mem = std::move(p2->allocateMemory(8192, -1)).value();
  auto remote_mr = std::move(d2.registerMemory(mem, 8192, kAllAccess)).value();
  auto p = QpPair::make(d1, d2);
  GuardedBuffer local(d1, 8192, kAllAccess);
  local.fill(99);
  auto wc = transferOne(p, WrOpcode::kRdmaWrite, local, reinterpret_cast<uint64_t>(mem),
                        remote_mr->rkey(), 8192);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(mem, local.data(), 8192), 0);
  // The keys of one device mean nothing on another.
  GuardedBuffer other(d1, 64, kAllAccess);
  auto q = QpPair::make(d1, d2);
  wc = transferOne(q, WrOpcode::kRdmaWrite, local, other.addr(), other.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  // A peer provider that shut down looks like a dead peer.
  remote_mr.reset();
  p2.reset();
  EXPECT_EQ(p.a->state(), QpState::kRts);
  wc = transferOne(p, WrOpcode::kRdmaWrite, local, reinterpret_cast<uint64_t>(local.data()),
                   local.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRetryExceeded);
}

TEST(SoftProvider, QpAndCqMustBelongToTheSameDevice) {
  auto provider = makeProvider({softDevice("a"), softDevice("b")});
  ASSERT_NE(provider, nullptr);
  auto cq = std::move(provider->device(0).createCq(8)).value();
  EXPECT_EQ(provider->device(1).createQp({cq.get(), 4, 1}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SoftProvider, ObjectsMayOutliveTheirProvider) {
  auto provider = makeProvider({softDevice("soft0")});
  ASSERT_NE(provider, nullptr);
  Device& dev = provider->device(0);
  auto p = QpPair::make(dev, dev);
  GuardedBuffer buf(dev, 64, kAllAccess);
  provider.reset();
  // Still safe to use and destroy; the peer (itself) has shut down.
  auto wc = transferOne(p, WrOpcode::kRdmaWrite, buf, buf.addr(), buf.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRetryExceeded);
}

TEST(FabricHelpers, ConnectQpNamesTheFailingStep) {
  auto provider = makeProvider({softDevice("soft0")});
  ASSERT_NE(provider, nullptr);
  Device& dev = provider->device(0);
  auto cq = std::move(dev.createCq(8)).value();
  auto qp = std::move(dev.createQp({cq.get(), 4, 1})).value();
  QpRemote foreign;
  foreign.qp_num = 5;
  const Status st = connectQp(*qp, foreign);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("RTR"), std::string::npos) << st.toString();
  EXPECT_EQ(qp->state(), QpState::kInit);  // INIT went through, RTR did not
  auto peer = std::move(dev.createQp({cq.get(), 4, 1})).value();
  EXPECT_TRUE(connectQp(*qp, remoteOf(*peer, dev)).ok());  // resumes from INIT
  EXPECT_EQ(qp->state(), QpState::kRts);
}

TEST(FabricStrings, StatusAndStateNames) {
  EXPECT_EQ(toString(WcStatus::kRetryExceeded), "transport retry counter exceeded");
  EXPECT_EQ(toString(WcStatus::kFlushed), "work request flushed");
  EXPECT_EQ(toString(QpState::kRts), "RTS");
  EXPECT_EQ(toString(QpState::kError), "ERR");
}

}  // namespace
}  // namespace tent::fabric::soft::testing
