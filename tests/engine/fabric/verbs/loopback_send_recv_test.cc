// The verbs provider's SEND / RECV (the notify channel's contract, docs/fabric.md)
// over the loopback fake: receives in order with their bytes, receiver-not-ready,
// a receive too short, flush on ERR, and credits over many rounds.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "config/config.h"
#include "fabric/verbs/verbs_ops.h"
#include "loopback_test_util.h"

namespace tent::fabric {
namespace {

using testing::LoopbackOptions;
using testing::LoopbackVerbs;

struct SendRecvOnFake : ::testing::Test {
  void SetUp() override {
    LoopbackOptions o;
    o.devices = {{"lb0", true, 0}, {"lb1", true, 0}};
    fake = std::make_unique<LoopbackVerbs>(o);
    config::VerbsFabricConfig c;
    c.timeout = 1;
    auto p = createVerbsProvider(c, fake->ops());
    ASSERT_TRUE(p.ok()) << p.status().toString();
    provider = std::move(p).value();
    Device& d0 = provider->device(0);
    Device& d1 = provider->device(1);
    scq = std::move(d0.createCq(64)).value();
    bcq = std::move(d1.createCq(64)).value();
    rcq = std::move(d1.createCq(64)).value();
    a = std::move(d0.createQp({scq.get(), 16, 1})).value();
    auto qb = d1.createQp({bcq.get(), 16, 1, rcq.get(), 4});
    ASSERT_TRUE(qb.ok()) << qb.status().toString();
    b = std::move(qb).value();
    ASSERT_TRUE(connectQp(*a, QpRemote::toQp(b->qpNum(), d1.portIdentity())).ok());
    ASSERT_TRUE(connectQp(*b, QpRemote::toQp(a->qpNum(), d0.portIdentity())).ok());
    src.assign(4096, 0);
    dst.assign(4096, 0xEE);
    ms = std::move(d0.registerMemory(src.data(), src.size(), kAccessLocalWrite)).value();
    md = std::move(d1.registerMemory(dst.data(), dst.size(), kAccessLocalWrite)).value();
  }
  void TearDown() override {
    a.reset();
    b.reset();
    scq.reset();
    bcq.reset();
    rcq.reset();
    ms.reset();
    md.reset();
    provider.reset();
    fake.reset();
  }
  int recv(uint64_t id, uint32_t offset, uint32_t len) {
    Sge sge{reinterpret_cast<uint64_t>(dst.data()) + offset, len, md->lkey()};
    RecvWr wr{id, 1, &sge, nullptr};
    const RecvWr* bad = nullptr;
    return b->postRecv(&wr, &bad);
  }
  WorkCompletion send(uint64_t id, uint32_t len) {
    Sge sge{reinterpret_cast<uint64_t>(src.data()), len, ms->lkey()};
    SendWr wr{id, WrOpcode::kSend, true, 1, &sge, 0, 0, nullptr};
    const SendWr* bad = nullptr;
    EXPECT_EQ(a->postSend(&wr, &bad), 0);
    return pollOne(*scq);
  }
  static WorkCompletion pollOne(CompletionQueue& cq) {
    WorkCompletion wc{};
    wc.status = WcStatus::kGeneral;
    for (int i = 0; i < 1000000 && cq.poll(&wc, 1) == 0; ++i) {
    }
    return wc;
  }
  std::unique_ptr<LoopbackVerbs> fake;
  std::unique_ptr<Provider> provider;
  std::unique_ptr<CompletionQueue> scq, bcq, rcq;
  std::unique_ptr<QueuePair> a, b;
  std::vector<uint8_t> src, dst;
  std::unique_ptr<MemoryRegion> ms, md;
};

TEST_F(SendRecvOnFake, SendsLandInPostedReceivesInOrder) {
  ASSERT_EQ(recv(11, 0, 256), 0);
  ASSERT_EQ(recv(12, 256, 256), 0);
  for (uint32_t i = 0; i < 256; ++i) src[i] = static_cast<uint8_t>(i * 3 + 1);
  WorkCompletion s1 = send(1, 100);
  EXPECT_EQ(s1.status, WcStatus::kSuccess);
  EXPECT_EQ(s1.opcode, WrOpcode::kSend);
  for (uint32_t i = 0; i < 256; ++i) src[i] = static_cast<uint8_t>(i * 5 + 2);
  EXPECT_EQ(send(2, 256).status, WcStatus::kSuccess);
  WorkCompletion r1 = pollOne(*rcq), r2 = pollOne(*rcq);
  EXPECT_EQ(r1.wr_id, 11u);
  EXPECT_EQ(r1.opcode, WrOpcode::kRecv);
  EXPECT_EQ(r1.status, WcStatus::kSuccess);
  EXPECT_EQ(r1.byte_len, 100u);
  EXPECT_EQ(r1.qp_num, b->qpNum());
  EXPECT_EQ(r2.wr_id, 12u);
  EXPECT_EQ(r2.byte_len, 256u);
  for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(dst[i], static_cast<uint8_t>(i * 3 + 1));
  EXPECT_EQ(dst[100], 0xEE);
  for (uint32_t i = 0; i < 256; ++i) ASSERT_EQ(dst[256 + i], static_cast<uint8_t>(i * 5 + 2));
  WorkCompletion none{};
  EXPECT_EQ(bcq->poll(&none, 1), 0);  // receives complete on the receive CQ only
}

TEST_F(SendRecvOnFake, ASendWithoutAPostedReceiveFailsAsRnr) {
  WorkCompletion s = send(1, 64);
  EXPECT_EQ(s.status, WcStatus::kRnrRetryExceeded);
  EXPECT_EQ(a->state(), QpState::kError);
}

TEST_F(SendRecvOnFake, ASendLongerThanTheReceiveFailsOnBothSides) {
  ASSERT_EQ(recv(5, 0, 32), 0);
  EXPECT_EQ(send(1, 64).status, WcStatus::kRemoteOperation);
  WorkCompletion r = pollOne(*rcq);
  EXPECT_EQ(r.wr_id, 5u);
  EXPECT_EQ(r.status, WcStatus::kLocalLength);
  EXPECT_EQ(dst[0], 0xEE);
}

TEST_F(SendRecvOnFake, TheReceiveQueueIsBoundedAndFlushedOnError) {
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(recv(i, 0, 64), 0);
  EXPECT_EQ(recv(9, 0, 64), ENOMEM);
  ASSERT_TRUE(b->modifyToError().ok());
  for (uint64_t i = 0; i < 4; ++i) {
    WorkCompletion r = pollOne(*rcq);
    EXPECT_EQ(r.wr_id, i);
    EXPECT_EQ(r.status, WcStatus::kFlushed);
  }
}

TEST_F(SendRecvOnFake, CreditsKeepTheReceiverReadyOverManyRounds) {
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(recv(i, i * 64, 64), 0);
  for (uint32_t round = 0; round < 200; ++round) {
    std::memset(src.data(), static_cast<int>(round & 0xff), 64);
    ASSERT_EQ(send(round, 64).status, WcStatus::kSuccess);
    WorkCompletion r = pollOne(*rcq);
    ASSERT_EQ(r.status, WcStatus::kSuccess);
    ASSERT_EQ(r.wr_id, round % 4);
    ASSERT_EQ(dst[r.wr_id * 64 + 63], static_cast<uint8_t>(round & 0xff));
    ASSERT_EQ(recv(r.wr_id, static_cast<uint32_t>(r.wr_id * 64), 64), 0);
  }
}

}  // namespace
}  // namespace tent::fabric
