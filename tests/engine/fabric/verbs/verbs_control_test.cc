// The verbs provider's control path against a fake libibverbs: device listing,
// GID selection, QP state transitions with their attributes and masks, errors.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "fabric/verbs/verbs_provider.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;

std::array<uint8_t, 16> gidOf(const std::string& text) {
  std::array<uint8_t, 16> gid{};
  inet_pton(AF_INET6, text.c_str(), gid.data());
  return gid;
}

class VerbsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.addDevice("mlx5_0");
    fake_.setGid(0, IBV_GID_TYPE_ROCE_V1, "fe80::1");
    fake_.setGid(1, IBV_GID_TYPE_ROCE_V2, "fe80::1");
    fake_.setGid(2, IBV_GID_TYPE_ROCE_V1, "::ffff:10.0.0.7");
    fake_.setGid(3, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
  }

  std::unique_ptr<Provider> open() {
    auto provider = createVerbsProvider(config_, fakeOps());
    EXPECT_TRUE(provider.ok()) << provider.status().toString();
    return provider.ok() ? std::move(provider).value() : nullptr;
  }

  // A QP on its own CQ, in RESET.
  struct QpOnCq {
    std::unique_ptr<CompletionQueue> cq;
    std::unique_ptr<QueuePair> qp;
  };
  QpOnCq makeQp(Device& device, uint32_t max_send_wr = 16) {
    QpOnCq out;
    out.cq = std::move(device.createCq(256)).value();
    out.qp = std::move(device.createQp({out.cq.get(), max_send_wr, 2})).value();
    return out;
  }

  // RESET -> INIT -> RTR -> RTS (fabric::connectQp lives in the other provider's file).
  bool connectQpForTest(QpOnCq& q) {
    return q.qp->modifyToInit().ok() && q.qp->modifyToRtr(remote()).ok() &&
           q.qp->modifyToRts().ok();
  }

  QpRemote remote() {
    QpRemote r;
    r.qp_num = 0x77;
    r.port.gid = gidOf("::ffff:10.0.0.9");
    r.port.lid = 0;
    r.psn = 5;
    return r;
  }

  FakeVerbs fake_;
  config::VerbsFabricConfig config_;
};

// ---- device listing -------------------------------------------------------------

TEST_F(VerbsControlTest, NoDeviceIsNotFoundWithAClearMessage) {
  fake_.devices.clear();
  EXPECT_EQ(verbsDeviceCount(fakeOps()), 0u);
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kNotFound);
  EXPECT_NE(provider.status().message().find("no RDMA device"), std::string::npos);
  EXPECT_EQ(fake_.opened, 0);
}

TEST_F(VerbsControlTest, NullDeviceListIsNotFound) {
  fake_.list_returns_null = true;
  EXPECT_EQ(verbsDeviceCount(fakeOps()), 0u);
  EXPECT_EQ(createVerbsProvider(config_, fakeOps()).status().code(), StatusCode::kNotFound);
}

TEST_F(VerbsControlTest, OpensEveryDeviceWhenNoneIsNamed) {
  fake_.addDevice("mlx5_1");
  EXPECT_EQ(verbsDeviceCount(fakeOps()), 2u);
  auto provider = open();
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->name(), "verbs");
  ASSERT_EQ(provider->deviceCount(), 2u);
  EXPECT_EQ(provider->device(0).info().name, "mlx5_0");
  EXPECT_EQ(provider->device(1).info().name, "mlx5_1");
  EXPECT_EQ(provider->device(1).info().index, 1u);
  EXPECT_EQ(provider->device(0).info().numa_node, -1);  // no sysfs entry
  EXPECT_DOUBLE_EQ(provider->device(0).info().link_gbps, 100.0);
  EXPECT_NE(provider->linkModel().find("mlx5_1 port 1 RoCE 100 Gb/s"), std::string::npos)
      << provider->linkModel();
}

TEST_F(VerbsControlTest, OpensNamedDevicesInConfigOrder) {
  fake_.addDevice("mlx5_1");
  config_.devices = {"mlx5_1"};
  auto provider = open();
  ASSERT_NE(provider, nullptr);
  ASSERT_EQ(provider->deviceCount(), 1u);
  EXPECT_EQ(provider->device(0).info().name, "mlx5_1");
  EXPECT_EQ(provider->device(0).info().index, 0u);
}

TEST_F(VerbsControlTest, UnknownNamedDeviceListsWhatExists) {
  config_.devices = {"mlx5_9"};
  auto provider = createVerbsProvider(config_, fakeOps());
  ASSERT_FALSE(provider.ok());
  EXPECT_EQ(provider.status().code(), StatusCode::kNotFound);
  EXPECT_NE(provider.status().message().find("mlx5_9"), std::string::npos);
  EXPECT_NE(provider.status().message().find("mlx5_0"), std::string::npos);
}

TEST_F(VerbsControlTest, OpenFailuresReleaseWhatWasOpened) {
  fake_.fail_open = true;
  EXPECT_EQ(createVerbsProvider(config_, fakeOps()).status().code(), StatusCode::kUnavailable);
  fake_.fail_open = false;
  config_.port = 2;  // the device has one port
  auto provider = createVerbsProvider(config_, fakeOps());
  EXPECT_EQ(provider.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_.closed, fake_.opened);
  config_.port = 1;
  config_.mtu = 1500;
  provider = createVerbsProvider(config_, fakeOps());
  EXPECT_EQ(provider.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(provider.status().message().find("mtu 1500"), std::string::npos);
  EXPECT_EQ(fake_.closed, fake_.opened);
  EXPECT_EQ(fake_.pds, 0);
}

// ---- GID selection ---------------------------------------------------------------

TEST_F(VerbsControlTest, AutoGidPrefersRoceV2Ipv4Mapped) {
  auto provider = open();
  PortIdentity id = provider->device(0).portIdentity();
  EXPECT_EQ(id.gid, gidOf("::ffff:10.0.0.7"));
  EXPECT_NE(provider->linkModel().find("gid_index 3"), std::string::npos);
}

// More GID choices: verbs_gid_test.cc.

TEST_F(VerbsControlTest, ConfiguredGidIndexIsUsedAndChecked) {
  config_.gid_index = 2;
  auto provider = open();
  EXPECT_NE(provider->linkModel().find("gid_index 2"), std::string::npos);
  config_.gid_index = 8;  // gid_tbl_len is 8
  auto bad = createVerbsProvider(config_, fakeOps());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("gid_index 8"), std::string::npos);
}

TEST_F(VerbsControlTest, PortIdentityCarriesTheLid) {
  fake_.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  fake_.port_attr.lid = 0x2a;
  auto provider = open();
  EXPECT_EQ(provider->device(0).portIdentity().lid, 0x2a);
}

// ---- QP state transitions ------------------------------------------------------

TEST_F(VerbsControlTest, CreateQpAsksForAnRcQpWithTheCaps) {
  auto provider = open();
  auto q = makeQp(provider->device(0), 64);
  ASSERT_EQ(fake_.qp_inits.size(), 1u);
  const ibv_qp_init_attr& init = fake_.qp_inits[0];
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
  EXPECT_EQ(init.sq_sig_all, 0);
  EXPECT_EQ(init.cap.max_send_wr, 64u);
  EXPECT_EQ(init.cap.max_send_sge, 2u);
  EXPECT_NE(init.send_cq, nullptr);
  EXPECT_EQ(init.send_cq, init.recv_cq);
  EXPECT_EQ(q.qp->state(), QpState::kReset);
  EXPECT_EQ(q.qp->qpNum(), 100u);
  EXPECT_EQ(q.qp->maxSendWr(), 64u);
}

TEST_F(VerbsControlTest, InitSetsPkeyPortAndAccess) {
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  ASSERT_EQ(fake_.modifies.size(), 1u);
  const auto& m = fake_.modifies[0];
  EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(m.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(m.attr.pkey_index, 0);
  EXPECT_EQ(m.attr.port_num, 1);
  EXPECT_EQ(m.attr.qp_access_flags,
            unsigned{IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ});
  EXPECT_EQ(q.qp->state(), QpState::kInit);
}

TEST_F(VerbsControlTest, RtrOnRoceRoutesByGid) {
  fake_.port_attr.active_mtu = IBV_MTU_1024;  // below the configured 4096
  fake_.device_attr.max_qp_rd_atom = 8;       // below the configured 16
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  ASSERT_TRUE(q.qp->modifyToRtr(remote()).ok());
  const auto& m = fake_.modifies.back();
  EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  EXPECT_EQ(m.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(m.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(m.attr.dest_qp_num, 0x77u);
  EXPECT_EQ(m.attr.rq_psn, 5u);
  EXPECT_EQ(m.attr.max_dest_rd_atomic, 8);
  EXPECT_EQ(m.attr.min_rnr_timer, 12);
  EXPECT_EQ(m.attr.ah_attr.is_global, 1);
  EXPECT_EQ(m.attr.ah_attr.port_num, 1);
  EXPECT_EQ(m.attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(m.attr.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(std::memcmp(m.attr.ah_attr.grh.dgid.raw, remote().port.gid.data(), 16), 0);
  EXPECT_EQ(q.qp->state(), QpState::kRtr);
}

TEST_F(VerbsControlTest, RtrOnInfinibandRoutesByLid) {
  fake_.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  config_.mtu = 2048;
  auto provider = open();
  auto q = makeQp(provider->device(0));
  QpRemote r = remote();
  r.port.lid = 0x31;
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  ASSERT_TRUE(q.qp->modifyToRtr(r).ok());
  const auto& m = fake_.modifies.back();
  EXPECT_EQ(m.attr.ah_attr.is_global, 0);
  EXPECT_EQ(m.attr.ah_attr.dlid, 0x31);
  EXPECT_EQ(m.attr.path_mtu, IBV_MTU_2048);
}

TEST_F(VerbsControlTest, RtrOnInfinibandWithoutRemoteLidUsesTheGrh) {
  fake_.port_attr.link_layer = IBV_LINK_LAYER_INFINIBAND;
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  ASSERT_TRUE(q.qp->modifyToRtr(remote()).ok());
  EXPECT_EQ(fake_.modifies.back().attr.ah_attr.is_global, 1);
}

TEST_F(VerbsControlTest, RtrOnRoceRejectsAZeroGid) {
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  QpRemote r = remote();
  r.port.gid = {};
  Status s = q.qp->modifyToRtr(r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake_.modifies.size(), 1u);  // never reached the NIC
  EXPECT_EQ(q.qp->state(), QpState::kInit);
}

TEST_F(VerbsControlTest, RtsSetsTimeoutsRetriesPsnAndReadDepth) {
  config_.timeout = 18;
  config_.retry_cnt = 6;
  config_.rnr_retry = 5;
  fake_.device_attr.max_qp_init_rd_atom = 4;
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(connectQpForTest(q));
  const auto& m = fake_.modifies.back();
  EXPECT_EQ(m.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(m.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(m.attr.timeout, 18);
  EXPECT_EQ(m.attr.retry_cnt, 6);
  EXPECT_EQ(m.attr.rnr_retry, 5);
  EXPECT_EQ(m.attr.sq_psn, 0u);  // QpRemote::local_psn (0 in remote())
  EXPECT_EQ(m.attr.max_rd_atomic, 4);
  EXPECT_EQ(q.qp->state(), QpState::kRts);
}

TEST_F(VerbsControlTest, ErrorOnlySetsTheState) {
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(connectQpForTest(q));
  ASSERT_TRUE(q.qp->modifyToError().ok());
  EXPECT_EQ(fake_.modifies.back().mask, IBV_QP_STATE);
  EXPECT_EQ(fake_.modifies.back().attr.qp_state, IBV_QPS_ERR);
  EXPECT_EQ(q.qp->state(), QpState::kError);
}

TEST_F(VerbsControlTest, TransitionsOutOfOrderAreRefusedBeforeTheNic) {
  auto provider = open();
  auto q = makeQp(provider->device(0));
  EXPECT_EQ(q.qp->modifyToRtr(remote()).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.qp->modifyToRts().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fake_.modifies.empty());
}

TEST_F(VerbsControlTest, FailingModifyNamesTheStep) {
  fake_.modify_rc[IBV_QPS_RTR] = EINVAL;
  auto provider = open();
  auto q = makeQp(provider->device(0));
  ASSERT_TRUE(q.qp->modifyToInit().ok());
  Status s = q.qp->modifyToRtr(remote());
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_NE(s.message().find("modify to RTR failed"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("qp 100"), std::string::npos);
  EXPECT_NE(s.message().find("errno 22"), std::string::npos);
  EXPECT_EQ(q.qp->state(), QpState::kInit);
}

// ---- resources -----------------------------------------------------------------

TEST_F(VerbsControlTest, CqAdmissionPreventsOverflow) {
  auto provider = open();
  Device& dev = provider->device(0);
  auto cq = std::move(dev.createCq(8)).value();
  auto first = dev.createQp({cq.get(), 6, 1});
  ASSERT_TRUE(first.ok());
  auto second = dev.createQp({cq.get(), 4, 1});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fake_.qps, 1);  // the refused QP was destroyed again
  first.value().reset();
  EXPECT_TRUE(dev.createQp({cq.get(), 8, 1}).ok());
}

TEST_F(VerbsControlTest, QpAttributesAreChecked) {
  fake_.addDevice("mlx5_1");
  auto provider = open();
  auto cq = std::move(provider->device(0).createCq(64)).value();
  EXPECT_EQ(provider->device(0).createQp({cq.get(), 4, 31}).status().code(),
            StatusCode::kInvalidArgument);  // device max_sge is 30
  EXPECT_EQ(provider->device(0).createQp({cq.get(), 0, 1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(provider->device(1).createQp({cq.get(), 4, 1}).status().code(),
            StatusCode::kInvalidArgument);  // CQ of another device
  EXPECT_EQ(provider->device(0).createCq(0).status().code(), StatusCode::kInvalidArgument);
  fake_.fail_create_qp = true;
  EXPECT_EQ(provider->device(0).createQp({cq.get(), 4, 1}).status().code(), StatusCode::kIoError);
}

TEST_F(VerbsControlTest, RegisterMemoryMapsAccessAndKeys) {
  auto provider = open();
  char buf[64];
  auto mr = provider->device(0).registerMemory(buf, sizeof(buf), kAccessRemoteWrite);
  ASSERT_TRUE(mr.ok());
  EXPECT_EQ(fake_.reg_access.back(),
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  EXPECT_EQ((*mr)->addr(), buf);
  EXPECT_EQ((*mr)->length(), sizeof(buf));
  EXPECT_EQ((*mr)->lkey(), 0x1000u);
  EXPECT_EQ((*mr)->rkey(), 0x1001u);
  EXPECT_EQ((*mr)->access(), kAccessRemoteWrite);
  (void)provider->device(0).registerMemory(buf, 8, kAccessRemoteRead);
  EXPECT_EQ(fake_.reg_access.back(), IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING);
  fake_.fail_reg_mr = true;
  EXPECT_EQ(provider->device(0).registerMemory(buf, 8, 0).status().code(), StatusCode::kIoError);
  mr.value().reset();
  EXPECT_EQ(fake_.mrs, 0);  // the unnamed kAccessRemoteRead one was dropped at once
}

TEST_F(VerbsControlTest, EverythingIsReleased) {
  {
    auto provider = open();
    auto q = makeQp(provider->device(0));
    char buf[16];
    auto mr = provider->device(0).registerMemory(buf, sizeof(buf), kAccessLocalWrite);
  }
  EXPECT_EQ(fake_.qps, 0);
  EXPECT_EQ(fake_.cqs, 0);
  EXPECT_EQ(fake_.mrs, 0);
  EXPECT_EQ(fake_.pds, 0);
  EXPECT_EQ(fake_.closed, fake_.opened);
}

// ---- helpers and memory ----------------------------------------------------------

TEST(VerbsHelpers, LinkSpeedMtuAndGidShape) {
  EXPECT_DOUBLE_EQ(verbs::linkGbps(64, 2), 200.0);   // HDR 4x
  EXPECT_DOUBLE_EQ(verbs::linkGbps(128, 2), 400.0);  // NDR 4x
  EXPECT_DOUBLE_EQ(verbs::linkGbps(3, 2), 0.0);
  EXPECT_EQ(*verbs::mtuFromBytes(512), IBV_MTU_512);
  EXPECT_FALSE(verbs::mtuFromBytes(9000).ok());
  ibv_gid gid{};
  inet_pton(AF_INET6, "::ffff:192.168.1.1", gid.raw);
  EXPECT_TRUE(verbs::isIpv4MappedGid(gid));
  inet_pton(AF_INET6, "fe80::ffff:c0a8:101", gid.raw);
  EXPECT_FALSE(verbs::isIpv4MappedGid(gid));
}

TEST_F(VerbsControlTest, AllocateMemoryIsAlignedAndTracked) {
  auto provider = open();
  size_t big = 3u << 20;
  auto mem = provider->allocateMemory(big, 0);
  ASSERT_TRUE(mem.ok()) << mem.status().toString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*mem) % (2u << 20), 0u);
  std::memset(*mem, 0x5a, big);
  EXPECT_EQ(static_cast<unsigned char*>(*mem)[big - 1], 0x5a);
  auto small = provider->allocateMemory(100, -1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*small) % 4096, 0u);
  EXPECT_EQ(provider->freeMemory(*mem, big - 1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(provider->freeMemory(*mem, big).ok());
  EXPECT_EQ(provider->freeMemory(*mem, big).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(provider->allocateMemory(0, 0).status().code(), StatusCode::kInvalidArgument);
  // `small` is released by the provider's destructor.
}

}  // namespace
}  // namespace tent::fabric
