#include <gtest/gtest.h>

#include "model/rdma_context.h"
#include "model/rdma_endpoint.h"
#include "model/rdma_task.h"
#include "tests/support/fake_fabric.h"

namespace tent::rdma {
namespace {

using testing::FakeDevice;
using testing::FakeQp;

struct EndpointTest : ::testing::Test {
  void SetUp() override {
    RdmaContext::CqPlan plan;
    plan.data_cq_depth = {64, 64};  // poller 0: background, poller 1: rail
    plan.direct_cq_depth = 64;
    plan.passive_cq_depth = 64;
    plan.lane_depth = 1;
    ASSERT_TRUE(ctx.init(plan).ok());
  }
  static EndpointQpShape shape(uint32_t data_qps, uint32_t direct) {
    EndpointQpShape s;
    s.owner_poller = 0;
    s.rail_poller = 1;
    s.data_qps = data_qps;
    s.qp_depth = 16;
    s.direct_depth = direct;
    return s;
  }
  metadata::BootstrapMessage peerFor(const RdmaEndPoint& ep, uint32_t direct) {
    metadata::BootstrapMessage m;
    ep.fillBootstrap(&m);
    for (auto& q : m.data_qp_nums) q += 1000;
    m.direct_qp_num = direct;
    // Our own link terms would not match the QPs changed above (kPsn counts them): a peer
    // that sends none (link terms: endpoint_link_test.cc, link_terms_test.cc).
    m.extensions.clear();
    return m;
  }
  FakeDevice dev;
  RdmaContext ctx{0, dev};
};

TEST_F(EndpointTest, HandshakingReadyDestroying) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps(shape(2, 1)).ok());
  EXPECT_EQ(ep.qpCount(), 4u);  // 2 data + 1 rail + 1 direct
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
  EXPECT_FALSE(ep.markReady());
}

TEST_F(EndpointTest, EachPollerSeesOnlyItsOwnQps) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps(shape(3, 0)).ok());
  EXPECT_EQ(ep.qpsFor(0).size(), 3u);  // the owner: the data QPs
  EXPECT_EQ(ep.qpsFor(1).size(), 1u);  // the rail poller: the rail QP
  EXPECT_TRUE(ep.qpsFor(2).empty());   // anyone else: nothing
  for (auto* qp : ep.qpsFor(0)) EXPECT_NE(qp, ep.qpsFor(1)[0]);
  metadata::BootstrapMessage mine;
  ep.fillBootstrap(&mine);
  EXPECT_EQ(mine.data_qp_nums.size(), 4u);  // the rail QP travels as one more data QP
}

TEST_F(EndpointTest, DirectQpWiredOnlyWhenBothAdvertise) {
  RdmaEndPoint with(ctx, 1, 0, 1);
  ASSERT_TRUE(with.createActiveQps(shape(1, 1)).ok());
  ASSERT_TRUE(with.connect(peerFor(with, 0)).ok());  // the peer has none
  EXPECT_EQ(with.directQp(), nullptr);
  EXPECT_EQ(with.qpCount(), 2u);  // ours was dropped
  RdmaEndPoint without(ctx, 1, 0, 2);
  ASSERT_TRUE(without.createActiveQps(shape(1, 0)).ok());
  metadata::BootstrapMessage mine;
  without.fillBootstrap(&mine);
  EXPECT_EQ(mine.direct_qp_num, 0u);
  ASSERT_TRUE(without.connect(peerFor(without, 55)).ok());
  EXPECT_EQ(without.directQp(), nullptr);
}

TEST_F(EndpointTest, ConnectRejectsQpCountMismatch) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps(shape(2, 0)).ok());
  auto peer = peerFor(ep, 0);
  peer.data_qp_nums.pop_back();
  EXPECT_FALSE(ep.connect(peer).ok());
}

TEST_F(EndpointTest, QuiesceMovesEveryQpToErrorAndDrainedTracksOutstandingWrs) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  ASSERT_TRUE(ep.createActiveQps(shape(1, 1)).ok());
  ASSERT_TRUE(ep.connect(peerFor(ep, 9)).ok());
  ASSERT_TRUE(ep.markReady());
  auto* direct = static_cast<FakeQp*>(ep.directQp());
  auto* data = static_cast<FakeQp*>(ep.qpsFor(0)[0]);
  auto* rail = static_cast<FakeQp*>(ep.qpsFor(1)[0]);
  data->outstanding_ = 2;
  ASSERT_TRUE(ep.tryTakeDirectQuota());
  EXPECT_FALSE(ep.tryTakeDirectQuota());  // depth 1
  EXPECT_FALSE(ep.drained());
  ep.quiesce();
  EXPECT_EQ(ep.state(), EndpointState::kDestroying);
  for (auto* q : {direct, data, rail}) EXPECT_EQ(q->state(), fabric::QpState::kError);
  EXPECT_FALSE(ep.drained());
  data->outstanding_ = 0;  // the flushed completions were polled
  EXPECT_FALSE(ep.drained());
  ep.returnDirectQuota();
  EXPECT_TRUE(ep.drained());
}

TEST_F(EndpointTest, PassiveQpsReserveOneSendWrEach) {
  RdmaEndPoint ep(ctx, 0, 0, 7);
  ASSERT_TRUE(ep.createPassiveQps(3, true).ok());
  EXPECT_EQ(dev.last_qp->maxSendWr(), 1u);
  EXPECT_EQ(ep.qpCount(), 4u);
  EXPECT_TRUE(ep.drained());
}

TEST_F(EndpointTest, DirectPosterTokenHasOneHolder) {
  RdmaEndPoint ep(ctx, 1, 0, 1);
  EXPECT_TRUE(ep.tryTakeDirectPoster());
  EXPECT_FALSE(ep.tryTakeDirectPoster());
  ep.releaseDirectPoster();
  EXPECT_TRUE(ep.tryTakeDirectPoster());
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
