// tcp provider: two-sided SEND / RECV (the notify channel's contract, docs/fabric.md):
// SEND_REQ / SEND_ACK on the QP's connection, receives taken by the service thread.
#include <cerrno>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

// A pair whose `b` has a receive queue of `recv_wr` on its own CQ `rcq`.
struct SendPair {
  std::unique_ptr<CompletionQueue> cq_a, cq_b, rcq;
  std::unique_ptr<QueuePair> a, b;

  static SendPair make(Device& da, Device& db, uint32_t recv_wr) {
    SendPair p;
    p.cq_a = std::move(da.createCq(64)).value();
    p.cq_b = std::move(db.createCq(64)).value();
    p.rcq = std::move(db.createCq(64)).value();
    QpInitAttr attr{p.cq_a.get(), 16, 1};
    p.a = std::move(da.createQp(attr)).value();
    QpInitAttr battr{p.cq_b.get(), 16, 1, p.rcq.get(), recv_wr};
    auto b = db.createQp(battr);
    EXPECT_TRUE(b.ok()) << b.status().toString();
    p.b = std::move(b).value();
    EXPECT_TRUE(connectQp(*p.b, remoteOf(*p.a, da)).ok());
    EXPECT_TRUE(connectQp(*p.a, remoteOf(*p.b, db)).ok());
    return p;
  }
};

int postRecv(QueuePair& qp, GuardedBuffer& buf, uint64_t id, uint32_t length) {
  Sge sge{buf.addr(), length, buf.mr->lkey()};
  RecvWr wr{id, 1, &sge, nullptr};
  const RecvWr* bad = nullptr;
  return qp.postRecv(&wr, &bad);
}

class TcpSendRecvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pa_ = makeProvider();
    pb_ = makeProvider();
    ASSERT_NE(pa_, nullptr);
    ASSERT_NE(pb_, nullptr);
    dev_ = &pa_->device(0);
    peer_ = &pb_->device(0);
  }
  std::unique_ptr<Provider> pa_, pb_;
  Device* dev_ = nullptr;
  Device* peer_ = nullptr;
};

TEST_F(TcpSendRecvTest, ASendLandsInTheOldestPostedReceiveInOrder) {
  auto p = SendPair::make(*dev_, *peer_, 8);
  GuardedBuffer r1(*peer_, 256, kAccessLocalWrite), r2(*peer_, 256, kAccessLocalWrite);
  GuardedBuffer s1(*dev_, 256, kAccessLocalWrite), s2(*dev_, 256, kAccessLocalWrite);
  s1.fill(3);
  s2.fill(9);
  ASSERT_EQ(postRecv(*p.b, r1, 101, 256), 0);
  ASSERT_EQ(postRecv(*p.b, r2, 102, 256), 0);
  Sge g1{s1.addr(), 100, s1.mr->lkey()}, g2{s2.addr(), 256, s2.mr->lkey()};
  SendWr w1 = makeWr(1, WrOpcode::kSend, &g1, 1, 0, 0);
  SendWr w2 = makeWr(2, WrOpcode::kSend, &g2, 1, 0, 0);
  post(*p.a, w1);
  post(*p.a, w2);
  auto sent = pollN(*p.cq_a, 2);
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].status, WcStatus::kSuccess);
  EXPECT_EQ(sent[0].opcode, WrOpcode::kSend);
  EXPECT_EQ(sent[1].status, WcStatus::kSuccess);
  auto got = pollN(*p.rcq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 101u);
  EXPECT_EQ(got[0].opcode, WrOpcode::kRecv);
  EXPECT_EQ(got[0].byte_len, 100u);
  EXPECT_EQ(got[0].qp_num, p.b->qpNum());
  EXPECT_EQ(got[1].wr_id, 102u);
  EXPECT_EQ(got[1].byte_len, 256u);
  EXPECT_TRUE(r1.holds(3, 0, 100));
  EXPECT_EQ(r1.data()[100], GuardedBuffer::kCanary);  // nothing past the message
  EXPECT_TRUE(r2.holds(9));
  EXPECT_TRUE(r1.canariesIntact());
  EXPECT_TRUE(r2.canariesIntact());
  WorkCompletion none;
  EXPECT_EQ(p.cq_b->poll(&none, 1), 0);  // receives complete on the receive CQ only
}

TEST_F(TcpSendRecvTest, ASendWithoutAPostedReceiveFailsAsRnrAndErrsTheQp) {
  auto p = SendPair::make(*dev_, *peer_, 4);
  GuardedBuffer s(*dev_, 64, kAccessLocalWrite), r(*peer_, 64, kAccessLocalWrite);
  Sge g{s.addr(), 64, s.mr->lkey()};
  SendWr w = makeWr(7, WrOpcode::kSend, &g, 1, 0, 0);
  post(*p.a, w);
  auto sent = pollN(*p.cq_a, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(p.a->state(), QpState::kError);
  // Nothing was placed.
  EXPECT_TRUE(r.canariesIntact());
}

TEST_F(TcpSendRecvTest, ASendToAQpWithoutAReceiveQueueFailsAsRnr) {
  auto cq = std::move(dev_->createCq(16)).value();
  auto bcq = std::move(peer_->createCq(16)).value();
  auto a = std::move(dev_->createQp({cq.get(), 4, 1})).value();
  auto b = std::move(peer_->createQp({bcq.get(), 4, 1})).value();
  ASSERT_TRUE(connectQp(*b, remoteOf(*a, *dev_)).ok());
  ASSERT_TRUE(connectQp(*a, remoteOf(*b, *peer_)).ok());
  GuardedBuffer s(*dev_, 64, kAccessLocalWrite);
  Sge g{s.addr(), 64, s.mr->lkey()};
  RecvWr rw{1, 1, &g, nullptr};
  const RecvWr* bad = nullptr;
  EXPECT_EQ(b->postRecv(&rw, &bad), EINVAL);  // no receive queue
  EXPECT_EQ(bad, &rw);
  post(*a, makeWr(7, WrOpcode::kSend, &g, 1, 0, 0));
  auto sent = pollN(*cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRnrRetryExceeded);
}

TEST_F(TcpSendRecvTest, ASendLongerThanTheReceiveFailsOnBothSides) {
  auto p = SendPair::make(*dev_, *peer_, 4);
  GuardedBuffer s(*dev_, 128, kAccessLocalWrite), r(*peer_, 64, kAccessLocalWrite);
  ASSERT_EQ(postRecv(*p.b, r, 5, 64), 0);
  Sge g{s.addr(), 128, s.mr->lkey()};
  post(*p.a, makeWr(7, WrOpcode::kSend, &g, 1, 0, 0));
  auto sent = pollN(*p.cq_a, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, WcStatus::kRemoteOperation);
  auto got = pollN(*p.rcq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, WcStatus::kLocalLength);
  EXPECT_TRUE(r.canariesIntact());
}

TEST_F(TcpSendRecvTest, TheReceiveQueueIsBoundedAndFlushedOnError) {
  auto p = SendPair::make(*dev_, *peer_, 2);
  GuardedBuffer r(*peer_, 64, kAccessLocalWrite);
  ASSERT_EQ(postRecv(*p.b, r, 1, 64), 0);
  ASSERT_EQ(postRecv(*p.b, r, 2, 64), 0);
  EXPECT_EQ(postRecv(*p.b, r, 3, 64), ENOMEM);
  ASSERT_TRUE(p.b->modifyToError().ok());
  auto got = pollN(*p.rcq, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[0].status, WcStatus::kFlushed);
  EXPECT_EQ(got[1].wr_id, 2u);
  EXPECT_EQ(got[1].status, WcStatus::kFlushed);
}

TEST_F(TcpSendRecvTest, CreditsKeepTheReceiverReadyOverManyRounds) {
  // The pattern the engine's notify channel uses: a sender never has more SENDs in
  // flight than receives it was granted, and the receiver reposts after each one.
  auto p = SendPair::make(*dev_, *peer_, 4);
  GuardedBuffer s(*dev_, 64, kAccessLocalWrite), r(*peer_, 4 * 64, kAccessLocalWrite);
  for (uint32_t i = 0; i < 4; ++i) {
    Sge g{r.addr() + i * 64, 64, r.mr->lkey()};
    RecvWr rw{i, 1, &g, nullptr};
    const RecvWr* bad = nullptr;
    ASSERT_EQ(p.b->postRecv(&rw, &bad), 0);
  }
  for (uint32_t round = 0; round < 200; ++round) {
    std::memset(s.data(), static_cast<int>(round & 0xff), 64);
    Sge g{s.addr(), 64, s.mr->lkey()};
    post(*p.a, makeWr(round, WrOpcode::kSend, &g, 1, 0, 0));
    auto sent = pollN(*p.cq_a, 1);
    ASSERT_EQ(sent.size(), 1u);
    ASSERT_EQ(sent[0].status, WcStatus::kSuccess);
    auto got = pollN(*p.rcq, 1);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].status, WcStatus::kSuccess);
    const uint64_t slot = got[0].wr_id;
    ASSERT_EQ(slot, round % 4);
    ASSERT_EQ(r.data()[slot * 64], static_cast<uint8_t>(round & 0xff));
    Sge rg{r.addr() + slot * 64, 64, r.mr->lkey()};
    RecvWr rw{slot, 1, &rg, nullptr};
    const RecvWr* bad = nullptr;
    ASSERT_EQ(p.b->postRecv(&rw, &bad), 0);
  }
}

TEST_F(TcpSendRecvTest, CreateRejectsBadReceiveAttributes) {
  auto cq = std::move(dev_->createCq(16)).value();
  QpInitAttr attr{cq.get(), 4, 1, cq.get(), 0};
  EXPECT_EQ(dev_->createQp(attr).status().code(), StatusCode::kInvalidArgument);
  attr.max_recv_wr = 32769;  // tcp: at most 32,768 receives
  EXPECT_EQ(dev_->createQp(attr).status().code(), StatusCode::kInvalidArgument);
  attr.max_recv_wr = 13;  // 4 + 13 > 16: the shared CQ could overflow
  EXPECT_EQ(dev_->createQp(attr).status().code(), StatusCode::kResourceExhausted);
  attr.max_recv_wr = 12;
  EXPECT_TRUE(dev_->createQp(attr).ok());
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
