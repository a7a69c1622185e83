#include <gtest/gtest.h>

#include <thread>

#include "config/config.h"
#include "engine/rdma/rdma_context.h"
#include "engine/rdma/rdma_endpoint.h"
#include "engine/rdma/rdma_task.h"
#include "fake_fabric.h"

namespace tent::rdma {
namespace {

using testing::FakeDevice;
using testing::FakeQp;

struct EndpointTest : ::testing::Test {
  void SetUp() override {
    cfg.direct.qp_depth = 1;
    ASSERT_TRUE(ctx.init(cfg, 2).ok());
  }
  metadata::BootstrapMessage peerFor(const RdmaEndPoint& ep, uint32_t direct) {
    metadata::BootstrapMessage m;
    ep.fillBootstrap(&m);
    for (auto& q : m.data_qp_nums) q += 1000;
    m.direct_qp_num = direct;
    return m;
  }
  config::Config cfg;
  FakeDevice dev;
  RdmaContext ctx{0, dev};
};

TEST_F(EndpointTest, HandshakingReadyDestroyingDestroyed) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps({2, 2, 16, 1}).ok());
  EXPECT_EQ(ep.state(), EndpointState::kHandshaking);
  EXPECT_FALSE(ep.ready());
  ASSERT_TRUE(ep.connect(peerFor(ep, 77)).ok());
  EXPECT_TRUE(ep.markReady());
  EXPECT_FALSE(ep.markReady());  // only from handshaking
  EXPECT_TRUE(ep.ready());
  EXPECT_NE(ep.directQp(), nullptr);
  EXPECT_TRUE(ep.beginReset());
  EXPECT_FALSE(ep.beginReset());  // a reset happens once
  EXPECT_EQ(ep.state(), EndpointState::kDestroying);
  EXPECT_TRUE(ep.destroy(100).ok());
  EXPECT_EQ(ep.state(), EndpointState::kDestroyed);
  EXPECT_FALSE(ep.markReady());
  EXPECT_FALSE(ep.beginReset());
}

TEST_F(EndpointTest, DirectQpWiredOnlyWhenBothAdvertise) {
  RdmaEndPoint with(ctx, 1, 0, 1);
  ASSERT_TRUE(with.createActiveQps({1, 1, 16, 1}).ok());
  ASSERT_TRUE(with.connect(peerFor(with, 0)).ok());  // the peer has none
  EXPECT_EQ(with.directQp(), nullptr);
  RdmaEndPoint without(ctx, 1, 0, 2);
  ASSERT_TRUE(without.createActiveQps({1, 1, 16, 0}).ok());
  metadata::BootstrapMessage mine;
  without.fillBootstrap(&mine);
  EXPECT_EQ(mine.direct_qp_num, 0u);
  ASSERT_TRUE(without.connect(peerFor(without, 55)).ok());
  EXPECT_EQ(without.directQp(), nullptr);
}

TEST_F(EndpointTest, ConnectRejectsQpCountMismatch) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps({2, 2, 16, 0}).ok());
  auto peer = peerFor(ep, 0);
  peer.data_qp_nums.pop_back();
  EXPECT_FALSE(ep.connect(peer).ok());
}

TEST_F(EndpointTest, DestroyMovesEveryQpToErrorAndWaitsForDrain) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps({1, 1, 16, 1}).ok());
  ASSERT_TRUE(ep.connect(peerFor(ep, 9)).ok());
  ASSERT_TRUE(ep.markReady());
  auto* direct = static_cast<FakeQp*>(ep.directQp());
  auto* data = static_cast<FakeQp*>(ep.dataQp(0, 0));
  data->outstanding_ = 2;
  ASSERT_TRUE(ep.tryTakeDirectQuota());
  EXPECT_FALSE(ep.tryTakeDirectQuota());  // depth 1
  std::thread drainer([&] {
    while (data->state() != fabric::QpState::kError) std::this_thread::yield();
    data->outstanding_ = 0;  // flushed completions polled
    ep.returnDirectQuota();
  });
  Status s = ep.destroy(5000);
  drainer.join();
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(direct->state(), fabric::QpState::kError);
  EXPECT_EQ(data->state(), fabric::QpState::kError);
  EXPECT_EQ(ep.state(), EndpointState::kDestroyed);
}

TEST_F(EndpointTest, DestroyGivesUpAfterTimeoutWithDirectWrOutstanding) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps({1, 1, 16, 1}).ok());
  ASSERT_TRUE(ep.connect(peerFor(ep, 9)).ok());
  ASSERT_TRUE(ep.markReady());
  ASSERT_TRUE(ep.tryTakeDirectQuota());
  Status s = ep.destroy(20);
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("direct"), std::string::npos);
  EXPECT_EQ(ep.state(), EndpointState::kDestroyed);
}

TEST_F(EndpointTest, DirectLaneHasOneOwner) {
  RdmaTask a, b;
  EXPECT_TRUE(ctx.tryAcquireDirectLane(&a));
  EXPECT_FALSE(ctx.tryAcquireDirectLane(&b));
  EXPECT_FALSE(ctx.releaseDirectLane(&b));  // not the owner
  EXPECT_TRUE(ctx.releaseDirectLane(&a));
  EXPECT_FALSE(ctx.releaseDirectLane(&a));  // released once
  EXPECT_TRUE(ctx.tryAcquireDirectLane(&b));
  EXPECT_EQ(ctx.lanesInUse(), 1u);
}

TEST_F(EndpointTest, DeviceIsPausedAfterErrorStreak) {
  ctx.recordSliceError(3, 1000, 10);
  ctx.recordSliceError(3, 1000, 10);
  EXPECT_FALSE(ctx.paused(11));
  ctx.recordSliceError(3, 1000, 10);
  EXPECT_TRUE(ctx.paused(11));
  EXPECT_FALSE(ctx.paused(2000));
  ctx.recordSliceSuccess();
  ctx.recordSliceError(3, 1000, 3000);
  EXPECT_FALSE(ctx.paused(3001));
}

}  // namespace
}  // namespace tent::rdma
