// tcp provider: devices and addresses (IPv4, IPv6, wildcard + advertise), the config
// section and the factory, transfer memory, and strangers on the listening port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config.h"
#include "fabric/select/select_provider.h"
#include "fabric/tcp/tcp_wire.h"
#include "tcp_test_util.h"
#include "topology/topology.h"

namespace tent::fabric::tcp::testing {
namespace {

bool ipv6LoopbackUsable() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

// One WRITE of 64 KiB from `a` to `b` and back by READ, verified.
void roundTrip(Device& a, Device& b) {
  auto p = QpPair::make(a, b);
  GuardedBuffer src(a, 65536, kAllAccess), dst(b, 65536, kAllAccess), back(a, 65536, kAllAccess);
  src.fill(13);
  dst.clear();
  back.clear();
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 65536).status,
            WcStatus::kSuccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaRead, back, dst.addr(), dst.mr->rkey(), 65536).status,
            WcStatus::kSuccess);
  EXPECT_TRUE(dst.holds(13));
  EXPECT_TRUE(back.holds(13));
}

size_t threads() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

// A provider's service threads, listeners and epoll descriptors go with it.
TEST(TcpProvider, ClosingAProviderReturnsItsThreadsAndDescriptors) {
  {
    // A first provider lets a runtime start what it starts once (a sanitizer's thread).
    auto warm = makeProvider();
    ASSERT_NE(warm, nullptr);
  }
  const size_t fds = openFds();
  const size_t tasks = threads();
  for (int round = 0; round < 20; ++round) {
    config::TcpFabricConfig cfg = testConfig();
    cfg.devices = {tcpDevice("tcp0"), tcpDevice("tcp1")};
    auto p = makeProvider(cfg);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(threads(), tasks + 2);  // one service thread per device
    roundTrip(p->device(0), p->device(1));
  }
  EXPECT_EQ(threads(), tasks);
  EXPECT_EQ(openFds(), fds);
}

TEST(TcpProvider, TwoDevicesListenOnTheirOwnPorts) {
  config::TcpFabricConfig cfg = testConfig();
  cfg.devices = {tcpDevice("tcp0"), tcpDevice("tcp1")};
  auto p = makeProvider(cfg);
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->deviceCount(), 2u);
  EXPECT_EQ(p->device(1).info().name, "tcp1");
  EXPECT_EQ(p->device(1).info().index, 1u);
  EXPECT_NE(p->device(0).portIdentity(), p->device(1).portIdentity());
  roundTrip(p->device(0), p->device(1));  // two devices of one provider talk to each other
}

TEST(TcpProvider, Ipv6Works) {
  if (!ipv6LoopbackUsable()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  config::TcpFabricConfig cfg = testConfig();
  cfg.devices = {tcpDevice("v6", "[::1]:0")};
  auto a = makeProvider(cfg);
  auto b = makeProvider(cfg);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const PortIdentity id = a->device(0).portIdentity();
  std::array<uint8_t, 16> loopback{};
  loopback[15] = 1;
  EXPECT_EQ(id.gid, loopback);
  roundTrip(a->device(0), b->device(0));
}

TEST(TcpProvider, AWildcardListenerAdvertisesTheConfiguredAddress) {
  config::TcpFabricConfig cfg = testConfig();
  cfg.devices = {tcpDevice("any", "0.0.0.0:0")};
  auto refused = createTcpProvider(cfg);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("advertise"), std::string::npos)
      << refused.status().toString();
  cfg.devices[0].advertise = "127.0.0.1";
  auto a = makeProvider(cfg);
  auto b = makeProvider();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->device(0).portIdentity().gid[15], 1);
  roundTrip(a->device(0), b->device(0));
}

TEST(TcpProvider, BadAddressesAreRefusedAtCreation) {
  config::TcpFabricConfig cfg = testConfig();
  cfg.devices = {tcpDevice("x", "192.0.2.1:0")};  // TEST-NET-1: not an address of this host
  auto r = createTcpProvider(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("192.0.2.1:0"), std::string::npos) << r.status().toString();
  cfg.devices = {tcpDevice("x", "[fe80::1]:0")};
  r = createTcpProvider(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("link-local"), std::string::npos) << r.status().toString();
  cfg.devices = {tcpDevice("x", "localhost:0")};
  EXPECT_FALSE(createTcpProvider(cfg).ok());
  cfg.devices = {tcpDevice("x"), tcpDevice("x")};
  r = createTcpProvider(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate"), std::string::npos);
  // A port in use by another listener.
  auto first = makeProvider();
  ASSERT_NE(first, nullptr);
  cfg.devices = {
      tcpDevice("x", "127.0.0.1:" + std::to_string(first->device(0).portIdentity().lid))};
  EXPECT_FALSE(createTcpProvider(cfg).ok());
}

TEST(TcpProvider, TheFactoryBuildsItFromTheConfig) {
  auto c = config::loadString(R"(
fabric:
  provider: tcp
  tcp:
    devices:
      - {name: tcp0, listen: "127.0.0.1:0", numa_node: 0}
    retry_budget_ms: 1500
    max_mrs: 16
)");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ((*c)->fabric.tcp.retry_budget_ms, 1500u);
  auto topo = topology::Topology::loadXml(TENT_TCP_TEST_TOPOLOGY);
  ASSERT_TRUE(topo.ok()) << topo.status().toString();
  auto p = createProvider((*c)->fabric, *topo);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ((*p)->name(), "tcp");
  EXPECT_NE((*p)->linkModel().find("retry_budget_ms=1500"), std::string::npos);
}

TEST(TcpProvider, ConfigErrorsNameTheKey) {
  auto bad = config::loadString("fabric: {tcp: {devices: [{name: a, listen: 'localhost:1'}]}}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fabric.tcp.devices[0].listen"), std::string::npos)
      << bad.status().toString();
  bad = config::loadString("fabric: {tcp: {devices: [{name: a, listen: '0.0.0.0:0'}]}}");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("advertise"), std::string::npos) << bad.status().toString();
  bad = config::loadString("fabric: {tcp: {retry_budget_ms: 1}}");
  EXPECT_FALSE(bad.ok());
  auto ok = config::loadString(
      "fabric: {provider: tcp, tcp: {devices: [{name: a, listen: '[::]:7000', advertise: "
      "'[fd00::5]'}]}}");
  EXPECT_TRUE(ok.ok()) << ok.status().toString();
}

TEST(TcpProvider, AllocatedMemoryIsUsableAndFreedOnce) {
  auto p = makeProvider();
  ASSERT_NE(p, nullptr);
  auto mem = p->allocateMemory(3 << 20, 0);
  ASSERT_TRUE(mem.ok());
  std::memset(*mem, 0xab, 3 << 20);
  auto mr = p->device(0).registerMemory(*mem, 3 << 20, kAllAccess);
  EXPECT_TRUE(mr.ok());
  mr->reset();
  EXPECT_TRUE(p->freeMemory(*mem, 3 << 20).ok());
  EXPECT_FALSE(p->freeMemory(*mem, 3 << 20).ok());
  EXPECT_FALSE(p->allocateMemory(0, 0).ok());
}

// Whoever reaches the listening port is not served until it names a QP correctly.
TEST(TcpProvider, StrangersOnTheListeningPortAreRefused) {
  auto p = makeProvider(testConfig(300));
  ASSERT_NE(p, nullptr);
  const size_t fds = openFds();
  const PortIdentity id = p->device(0).portIdentity();
  auto dial = [&] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(id.lid);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  };
  // Garbage: closed without an answer.
  int fd = dial();
  const char junk[64] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(write(fd, junk, sizeof(junk)), 64);
  char buf[64];
  EXPECT_EQ(read(fd, buf, sizeof(buf)), 0);
  close(fd);
  // A well-formed hello for a QP that does not exist: refused with the reason.
  fd = dial();
  Hello h;
  h.src_qp = 5;
  h.dst_qp = 6;
  h.src = id;
  h.src.lid = 1;
  h.dst = id;
  h.max_send_wr = 4;
  uint8_t out[kHelloBytes];
  encodeHello(h, out);
  ASSERT_EQ(write(fd, out, sizeof(out)), static_cast<ssize_t>(sizeof(out)));
  uint8_t in[kHelloBytes];
  ASSERT_EQ(read(fd, in, sizeof(in)), static_cast<ssize_t>(sizeof(in)));
  Hello reply;
  ASSERT_EQ(parseHello(in, &reply), ParseResult::kOk);
  EXPECT_EQ(reply.kind, HelloKind::kReject);
  EXPECT_EQ(reply.reason, RejectReason::kNoSuchQp);
  EXPECT_EQ(read(fd, in, sizeof(in)), 0);
  close(fd);
  // Silence: closed once the retry budget ran out.
  fd = dial();
  EXPECT_EQ(read(fd, buf, sizeof(buf)), 0);
  close(fd);
  EXPECT_TRUE(waitFor([&] { return openFds() == fds; }));
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
