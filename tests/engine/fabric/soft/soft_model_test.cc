// Soft provider: the link timing model, checked on an injected clock. On an 8 Gb/s
// port one byte takes exactly one nanosecond, so every expected instant is exact.
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class SoftModelTest : public ::testing::Test {
 protected:
  void make(double link_gbps, uint64_t latency_ns) {
    provider_ = makeProvider({softDevice("soft0", link_gbps, latency_ns)}, clock_.clock());
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
    src_ = std::make_unique<GuardedBuffer>(*dev_, 2 * kMiB, kAllAccess);
    dst_ = std::make_unique<GuardedBuffer>(*dev_, 2 * kMiB, kAllAccess);
    src_->fill(21);
  }
  void postWrite(QpPair& p, uint64_t id, uint64_t length, uint64_t offset = 0) {
    Sge sge{src_->addr() + offset, static_cast<uint32_t>(length), src_->mr->lkey()};
    post(*p.a, makeWr(id, WrOpcode::kRdmaWrite, &sge, 1, dst_->addr() + offset, dst_->mr->rkey()));
  }
  // No completion strictly before `at`; all `n` exactly at `at`.
  void expectVisibleAt(CompletionQueue& cq, uint64_t at, size_t n) {
    clock_.set(at - 1);
    EXPECT_TRUE(pollNow(cq).empty()) << "completion before t=" << at;
    clock_.set(at);
    EXPECT_EQ(pollNow(cq).size(), n) << "at t=" << at;
  }

  ManualClock clock_{1'000'000};
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  std::unique_ptr<GuardedBuffer> src_, dst_;
};

TEST_F(SoftModelTest, TwoQpsShareThePortFairly) {
  make(8, 0);
  auto p1 = QpPair::make(*dev_, *dev_);
  auto p2 = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p1, 1, kMiB);
  postWrite(p2, 2, kMiB, kMiB);
  EXPECT_TRUE(dst_->holds(21));  // the copy happened at post time
  // Each QP gets half of 1 B/ns: both finish after 2 MiB worth of time.
  clock_.set(t0 + 2 * kMiB - 1);
  EXPECT_TRUE(pollNow(*p1.cq_a).empty());
  EXPECT_TRUE(pollNow(*p2.cq_a).empty());
  clock_.set(t0 + 2 * kMiB);
  EXPECT_EQ(pollNow(*p1.cq_a).size(), 1u);
  EXPECT_EQ(pollNow(*p2.cq_a).size(), 1u);
  const PortCounters c = dev_->counters();
  EXPECT_EQ(c.bytes, 2 * kMiB);
  EXPECT_EQ(c.busy_ns, 2 * kMiB);
  EXPECT_EQ(c.wrs, 2u);
}

TEST_F(SoftModelTest, LatencyIsAddedToEveryCompletion) {
  make(8, 5000);
  auto p = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p, 1, 4096);
  expectVisibleAt(*p.cq_a, t0 + 4096 + 5000, 1);
}

TEST_F(SoftModelTest, UnlimitedLinkCompletesAfterTheLatencyOnly) {
  make(0, 700);
  auto p = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p, 1, kMiB);
  expectVisibleAt(*p.cq_a, t0 + 700, 1);
  EXPECT_EQ(dev_->counters().busy_ns, 0u);  // nothing is ever in flight
  EXPECT_EQ(dev_->counters().bytes, kMiB);
}

TEST_F(SoftModelTest, ALateArrivalSharesTheRemainingTransfer) {
  make(8, 0);
  auto p1 = QpPair::make(*dev_, *dev_);
  auto p2 = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p1, 1, kMiB);
  clock_.set(t0 + kMiB / 2);  // QP 1 has sent half alone
  postWrite(p2, 2, kMiB, kMiB);
  // QP 1's last 512 KiB at half rate: 1 MiB of time. QP 2 then has 512 KiB left, alone.
  expectVisibleAt(*p1.cq_a, t0 + kMiB / 2 + kMiB, 1);
  expectVisibleAt(*p2.cq_a, t0 + 2 * kMiB, 1);
}

TEST_F(SoftModelTest, WrsOfOneQpAreTransmittedOneAfterAnother) {
  make(8, 100);
  auto p1 = QpPair::make(*dev_, *dev_);
  auto p2 = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p1, 1, 4096);
  postWrite(p1, 2, 4096, 4096);
  postWrite(p2, 3, 8192, 8192);
  // QP 1's head and QP 2 share the link (2 x 4096 bytes); then QP 1's second WR and the
  // rest of QP 2's share it again (2 x 4096 bytes).
  expectVisibleAt(*p1.cq_a, t0 + 8192 + 100, 1);
  clock_.set(t0 + 16384 + 99);
  EXPECT_TRUE(pollNow(*p1.cq_a).empty());
  EXPECT_TRUE(pollNow(*p2.cq_a).empty());
  clock_.set(t0 + 16384 + 100);
  auto a = pollNow(*p1.cq_a);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].wr_id, 2u);
  EXPECT_EQ(pollNow(*p2.cq_a).size(), 1u);
}

TEST_F(SoftModelTest, ErrorsTakeNoLinkTimeButKeepTheQpOrder) {
  make(8, 0);
  auto p = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p, 1, 4096);
  Sge sge{src_->addr(), 64, src_->mr->lkey()};
  post(*p.a, makeWr(2, WrOpcode::kRdmaWrite, &sge, 1, dst_->addr(), 0xbad));  // fails at once...
  clock_.set(t0 + 4095);
  EXPECT_TRUE(pollNow(*p.cq_a).empty());  // ...but completes after the WR before it
  clock_.set(t0 + 4096);
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccess);
  EXPECT_EQ(dev_->counters().bytes, 4096u);
}

TEST_F(SoftModelTest, CompletionsOfSeveralQpsOnOneCqComeOutInTimeOrder) {
  make(8, 0);
  auto cq = std::move(dev_->createCq(64)).value();
  auto peer_cq = std::move(dev_->createCq(64)).value();
  std::vector<std::unique_ptr<QueuePair>> qps, peers;
  for (int i = 0; i < 3; ++i) {
    qps.push_back(std::move(dev_->createQp({cq.get(), 4, 1})).value());
    peers.push_back(std::move(dev_->createQp({peer_cq.get(), 4, 1})).value());
    ASSERT_TRUE(connectQp(*qps[i], remoteOf(*peers[i], *dev_)).ok());
    ASSERT_TRUE(connectQp(*peers[i], remoteOf(*qps[i], *dev_)).ok());
  }
  const uint64_t sizes[3] = {3000, 1000, 2000};
  for (int i = 0; i < 3; ++i) {
    Sge sge{src_->addr(), static_cast<uint32_t>(sizes[i]), src_->mr->lkey()};
    post(*qps[i], makeWr(i, WrOpcode::kRdmaWrite, &sge, 1, dst_->addr(), dst_->mr->rkey()));
  }
  clock_.advance(10000);
  auto wcs = pollNow(*cq);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 1u);  // smallest first
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[2].wr_id, 0u);
}

TEST_F(SoftModelTest, CountersAndOutstandingFollowTheModel) {
  make(8, 0);
  auto p = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  postWrite(p, 1, 1000);
  postWrite(p, 2, 1000, 1000);
  EXPECT_EQ(p.a->outstanding(), 2u);
  clock_.set(t0 + 500);
  PortCounters c = dev_->counters();
  EXPECT_EQ(c.busy_ns, 500u);
  EXPECT_EQ(c.bytes, 0u);  // nothing has fully crossed yet
  clock_.set(t0 + 1000);
  EXPECT_EQ(pollNow(*p.cq_a).size(), 1u);
  EXPECT_EQ(p.a->outstanding(), 1u);
  clock_.set(t0 + 5000);
  EXPECT_EQ(pollNow(*p.cq_a).size(), 1u);
  c = dev_->counters();
  EXPECT_EQ(c.bytes, 2000u);
  EXPECT_EQ(c.busy_ns, 2000u);  // idle after t0 + 2000
  EXPECT_EQ(c.wrs, 2u);
  EXPECT_EQ(p.a->outstanding(), 0u);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
