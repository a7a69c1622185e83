// tcp provider: a QP's traffic class (QpRemote::traffic, from RTR) marks its own
// connection's socket (IP_TOS; IPV6_TCLASS on IPv6), read back with getsockopt from the
// sockets this process holds. Both ends of a pair are in this process, so each side's
// socket is found by its ports: the side that connects has the peer's listening port as
// its peer port; the side that accepts has its own listening port as its local port.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

struct SocketInfo {
  int fd = -1;
  int family = AF_UNSPEC;
  uint16_t local_port = 0;
  uint16_t peer_port = 0;
};

uint16_t portOfStorage(const sockaddr_storage& s) {
  if (s.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(s).sin_port);
  if (s.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(s).sin6_port);
  return 0;
}

// Connected TCP sockets of this process.
std::vector<SocketInfo> connectedSockets() {
  std::vector<SocketInfo> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(d)) continue;
    sockaddr_storage self{}, peer{};
    socklen_t sl = sizeof(self), pl = sizeof(peer);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &sl) != 0) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (self.ss_family != AF_INET && self.ss_family != AF_INET6) continue;
    out.push_back(SocketInfo{fd, self.ss_family, portOfStorage(self), portOfStorage(peer)});
  }
  closedir(d);
  return out;
}

int trafficClassOf(const SocketInfo& s) {
  int value = -1;
  socklen_t len = sizeof(value);
  const int level = s.family == AF_INET6 ? IPPROTO_IPV6 : IPPROTO_IP;
  const int name = s.family == AF_INET6 ? IPV6_TCLASS : IP_TOS;
  if (getsockopt(s.fd, level, name, &value, &len) != 0) return -1;
  return value;
}

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

class TcpTrafficClassTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (GetParam()[0] == '[' && !ipv6LoopbackUsable()) GTEST_SKIP() << "no IPv6 loopback";
    auto cfg = testConfig();
    cfg.devices = {tcpDevice("tcp0", GetParam())};
    pa_ = makeProvider(cfg);
    pb_ = makeProvider(cfg);
    ASSERT_NE(pa_, nullptr);
    ASSERT_NE(pb_, nullptr);
    a_ = &pa_->device(0);
    b_ = &pb_->device(0);
  }
  std::unique_ptr<Provider> pa_, pb_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
};

TEST_P(TcpTrafficClassTest, EachSideMarksItsConnectionWithItsQpsTrafficClass) {
  // DSCP 46 (EF) on one side, DSCP 26 (AF31) on the other: the two ends of one connection
  // may mark differently, as two NIC QPs' address vectors may.
  constexpr uint8_t kClassA = 46 << 2, kClassB = 26 << 2;
  auto cq_a = std::move(a_->createCq(64)).value();
  auto cq_b = std::move(b_->createCq(64)).value();
  auto qa = std::move(a_->createQp({cq_a.get(), 8, 1})).value();
  auto qb = std::move(b_->createQp({cq_b.get(), 8, 1})).value();
  QpRemote to_b = remoteOf(*qb, *b_);
  to_b.traffic.traffic_class = kClassA;
  QpRemote to_a = remoteOf(*qa, *a_);
  to_a.traffic.traffic_class = kClassB;
  ASSERT_TRUE(connectQp(*qb, to_a).ok());
  ASSERT_TRUE(connectQp(*qa, to_b).ok());
  // One WRITE each way: both sockets exist and carried bytes.
  GuardedBuffer src_a(*a_, 4096, kAllAccess), dst_b(*b_, 4096, kAllAccess);
  GuardedBuffer src_b(*b_, 4096, kAllAccess), dst_a(*a_, 4096, kAllAccess);
  src_a.fill(5);
  src_b.fill(6);
  dst_a.clear();
  dst_b.clear();
  Sge sa{src_a.addr(), 4096, src_a.mr->lkey()};
  Sge sb{src_b.addr(), 4096, src_b.mr->lkey()};
  post(*qa, makeWr(1, WrOpcode::kRdmaWrite, &sa, 1, dst_b.addr(), dst_b.mr->rkey()));
  post(*qb, makeWr(2, WrOpcode::kRdmaWrite, &sb, 1, dst_a.addr(), dst_a.mr->rkey()));
  auto wa = pollN(*cq_a, 1);
  auto wb = pollN(*cq_b, 1);
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess) << toString(wa[0].status);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess) << toString(wb[0].status);
  EXPECT_TRUE(dst_b.holds(5));
  EXPECT_TRUE(dst_a.holds(6));

  const uint16_t port_a = a_->portIdentity().lid, port_b = b_->portIdentity().lid;
  std::map<char, int> found;  // side -> traffic class of its socket
  for (const SocketInfo& s : connectedSockets()) {
    // A's socket: it connected to B's listener, or B connected to A's listener.
    if (s.peer_port == port_b || s.local_port == port_a) found['a'] = trafficClassOf(s);
    if (s.peer_port == port_a || s.local_port == port_b) found['b'] = trafficClassOf(s);
  }
  ASSERT_EQ(found.size(), 2u) << "both ends of the QP pair's connection are this process's";
  EXPECT_EQ(found['a'], kClassA);
  EXPECT_EQ(found['b'], kClassB);
}

INSTANTIATE_TEST_SUITE_P(Families, TcpTrafficClassTest, ::testing::Values("127.0.0.1:0", "[::1]:0"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "IPv4" : "IPv6");
                         });

}  // namespace
}  // namespace tent::fabric::tcp::testing
