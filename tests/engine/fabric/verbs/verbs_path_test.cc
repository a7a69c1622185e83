// What a verbs QP puts on the wire besides the addresses, against the fake
// libibverbs: the path MTU both ports take, the traffic class and SL of the address
// vector, the initial PSNs, and the host-wide traffic class that overrides them.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_provider.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;

class VerbsPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.addDevice("mlx5_0");
    fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
    auto provider = createVerbsProvider(config_, fakeOps());
    ASSERT_TRUE(provider.ok()) << provider.status().toString();
    provider_ = std::move(provider).value();
  }

  std::unique_ptr<QueuePair> makeQp() {
    if (!cq_) cq_ = std::move(provider_->device(0).createCq(256)).value();
    QpInitAttr attr;
    attr.send_cq = cq_.get();
    attr.max_send_wr = 16;
    auto qp = provider_->device(0).createQp(attr);
    EXPECT_TRUE(qp.ok()) << qp.status().toString();
    return qp.ok() ? std::move(qp).value() : nullptr;
  }

  static QpRemote remote() {
    QpRemote r;
    r.qp_num = 0x77;
    inet_pton(AF_INET6, "::ffff:10.0.0.9", r.port.gid.data());
    return r;
  }

  const FakeVerbs::ModifyCall* lastModifyTo(ibv_qp_state state) const {
    for (auto it = fake_.modifies.rbegin(); it != fake_.modifies.rend(); ++it) {
      if (it->attr.qp_state == state) return &*it;
    }
    return nullptr;
  }

  FakeVerbs fake_;
  config::VerbsFabricConfig config_;
  std::unique_ptr<Provider> provider_;
  std::unique_ptr<CompletionQueue> cq_;
};

TEST_F(VerbsPathTest, ThePortLinkSaysLayerGidTypeAndMtu) {
  const PortLink link = provider_->device(0).portLink();
  EXPECT_EQ(link.link_layer, LinkLayer::kEthernet);
  EXPECT_EQ(link.gid_type, GidType::kRoceV2);
  EXPECT_EQ(link.mtu_bytes, 4096u);
}

TEST_F(VerbsPathTest, BothSidesTakeTheSmallerMtu) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.mtu_bytes = 1024;  // the peer's port (a netdev MTU of 1500)
  ASSERT_TRUE(connectQp(*qp, r).ok());
  ASSERT_NE(lastModifyTo(IBV_QPS_RTR), nullptr);
  EXPECT_EQ(lastModifyTo(IBV_QPS_RTR)->attr.path_mtu, IBV_MTU_1024);
}

TEST_F(VerbsPathTest, ALargerPeerMtuKeepsOurs) {
  fake_.port_attr.active_mtu = IBV_MTU_2048;
  provider_.reset();
  cq_.reset();
  provider_ = std::move(createVerbsProvider(config_, fakeOps())).value();
  EXPECT_EQ(provider_->device(0).portLink().mtu_bytes, 2048u);
  auto qp = makeQp();
  QpRemote r = remote();
  r.mtu_bytes = 4096;
  ASSERT_TRUE(connectQp(*qp, r).ok());
  EXPECT_EQ(lastModifyTo(IBV_QPS_RTR)->attr.path_mtu, IBV_MTU_2048);
}

TEST_F(VerbsPathTest, AnUnknownPeerMtuIsRefused) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.mtu_bytes = 1500;  // not an IB MTU
  Status s = connectQp(*qp, r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("MTU"), std::string::npos) << s.toString();
}

TEST_F(VerbsPathTest, TrafficClassAndServiceLevelReachTheAddressVector) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.traffic.traffic_class = 46 << 2;  // DSCP 46 (expedited forwarding)
  r.traffic.service_level = 5;
  ASSERT_TRUE(connectQp(*qp, r).ok());
  const auto* m = lastModifyTo(IBV_QPS_RTR);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->attr.ah_attr.grh.traffic_class, 46 << 2);
  EXPECT_EQ(m->attr.ah_attr.sl, 5);
  EXPECT_NE(m->mask & IBV_QP_AV, 0);
}

TEST_F(VerbsPathTest, AServiceLevelAbove15IsRefused) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.traffic.service_level = 16;
  EXPECT_EQ(connectQp(*qp, r).code(), StatusCode::kInvalidArgument);
}

TEST_F(VerbsPathTest, InitialPsnsAreWiredBothWays) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.psn = 0xabcdef;        // the peer's: what it sends with
  r.local_psn = 0x123456;  // ours, as the peer was told
  ASSERT_TRUE(connectQp(*qp, r).ok());
  EXPECT_EQ(lastModifyTo(IBV_QPS_RTR)->attr.rq_psn, 0xabcdefu);
  EXPECT_EQ(lastModifyTo(IBV_QPS_RTS)->attr.sq_psn, 0x123456u);
  EXPECT_NE(lastModifyTo(IBV_QPS_RTS)->mask & IBV_QP_SQ_PSN, 0);
}

TEST_F(VerbsPathTest, PsnsWiderThan24BitsAreRefused) {
  auto qp = makeQp();
  QpRemote r = remote();
  r.psn = kMaxPsn + 1;
  EXPECT_EQ(connectQp(*qp, r).code(), StatusCode::kInvalidArgument);
  auto other = makeQp();
  r.psn = 0;
  r.local_psn = kMaxPsn + 1;
  EXPECT_EQ(connectQp(*other, r).code(), StatusCode::kInvalidArgument);
}

TEST_F(VerbsPathTest, AHostWideTrafficClassIsReported) {
  char dir_template[] = "/tmp/tent-verbs-tc-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string root = dir_template;
  ASSERT_EQ(mkdir((root + "/tc").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/tc/1").c_str(), 0755), 0);
  std::ofstream(root + "/tc/1/traffic_class") << "Global tclass=106\n";
  std::snprintf(fake_.devices[0]->ibdev_path, sizeof(fake_.devices[0]->ibdev_path), "%s",
                root.c_str());
  provider_.reset();
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_TRUE(provider.ok());
  EXPECT_NE((*provider)->linkModel().find("sysfs traffic_class 106 overrides qos"),
            std::string::npos)
      << (*provider)->linkModel();
  std::remove((root + "/tc/1/traffic_class").c_str());
  rmdir((root + "/tc/1").c_str());
  rmdir((root + "/tc").c_str());
  rmdir(root.c_str());
}

}  // namespace
}  // namespace tent::fabric
