// Soft provider: a port serves its traffic classes by strict priority, checked on an
// injected clock (8 Gb/s: one byte per nanosecond, so every instant is exact). What is
// asserted is which completions exist at an instant, never how long anything took.
#include "fabric/soft/soft_internal.h"
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint8_t kBulk = 0;              // DSCP 0
constexpr uint8_t kForeground = 46 << 2;  // DSCP 46: class 5

class SoftPriorityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    provider_ = makeProvider({softDevice("soft0", 8, 0)}, clock_.clock());
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
    src_ = std::make_unique<GuardedBuffer>(*dev_, 512 * kKiB, kAllAccess);
    dst_ = std::make_unique<GuardedBuffer>(*dev_, 512 * kKiB, kAllAccess);
    src_->fill(33);
  }

  // A connected QP pair whose initiator side marks its packets with `traffic_class`.
  QpPair pairOfClass(uint8_t traffic_class) {
    QpPair p = QpPair::make(*dev_, *dev_, 16, 4, 1024, /*connect=*/false);
    QpRemote to_b = remoteOf(*p.b, *dev_);
    to_b.traffic.traffic_class = traffic_class;
    QpRemote to_a = remoteOf(*p.a, *dev_);
    to_a.traffic.traffic_class = traffic_class;  // the responder uses the initiator's
    EXPECT_TRUE(connectQp(*p.a, to_b).ok());
    EXPECT_TRUE(connectQp(*p.b, to_a).ok());
    return p;
  }

  void postWrites(QpPair& p, uint64_t first_id, int n, uint64_t length, uint64_t offset) {
    for (int i = 0; i < n; ++i) {
      const uint64_t at = offset + static_cast<uint64_t>(i) * length;
      Sge sge{src_->addr() + at, static_cast<uint32_t>(length), src_->mr->lkey()};
      post(*p.a, makeWr(first_id + i, WrOpcode::kRdmaWrite, &sge, 1, dst_->addr() + at,
                        dst_->mr->rkey()));
    }
  }

  ManualClock clock_{1'000'000};
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  std::unique_ptr<GuardedBuffer> src_, dst_;
};

TEST_F(SoftPriorityTest, AHigherClassIsServedFirst) {
  auto bulk = pairOfClass(kBulk);
  auto fg = pairOfClass(kForeground);
  const uint64_t t0 = clock_.now();
  postWrites(bulk, 1, 4, 64 * kKiB, 0);  // posted first
  postWrites(fg, 11, 4, 64 * kKiB, 256 * kKiB);
  // The foreground class has the whole port until its 4 WRs are through.
  clock_.set(t0 + 4 * 64 * kKiB);
  EXPECT_EQ(pollNow(*fg.cq_a).size(), 4u);
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 0u);
  // Then bulk gets it all: no bulk byte moved before.
  clock_.set(t0 + 5 * 64 * kKiB - 1);
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 0u);
  clock_.set(t0 + 8 * 64 * kKiB);
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 4u);
  EXPECT_TRUE(dst_->holds(33));
  EXPECT_EQ(dev_->counters().busy_ns, 8 * 64 * kKiB);  // the port never idled
}

TEST_F(SoftPriorityTest, ALaterHighClassWrPreemptsBulkInFlight) {
  auto bulk = pairOfClass(kBulk);
  auto fg = pairOfClass(kForeground);
  const uint64_t t0 = clock_.now();
  postWrites(bulk, 1, 1, 448 * kKiB, 0);
  clock_.set(t0 + 112 * kKiB);  // a quarter of the bulk WR has crossed
  postWrites(fg, 11, 1, 64 * kKiB, 448 * kKiB);
  clock_.set(t0 + 176 * kKiB);
  EXPECT_EQ(pollNow(*fg.cq_a).size(), 1u);  // served alone, at the full rate
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 0u);
  clock_.set(t0 + 512 * kKiB - 1);  // bulk lost exactly the foreground's 64 KiB
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 0u);
  clock_.set(t0 + 512 * kKiB);
  EXPECT_EQ(pollNow(*bulk.cq_a).size(), 1u);
  EXPECT_TRUE(dst_->holds(33));
}

TEST_F(SoftPriorityTest, OneClassStillSharesFairly) {
  auto a = pairOfClass(kForeground);
  auto b = pairOfClass(kForeground);
  const uint64_t t0 = clock_.now();
  postWrites(a, 1, 1, 64 * kKiB, 0);
  postWrites(b, 2, 1, 64 * kKiB, 64 * kKiB);
  clock_.set(t0 + 128 * kKiB - 1);
  EXPECT_EQ(pollNow(*a.cq_a).size() + pollNow(*b.cq_a).size(), 0u);
  clock_.set(t0 + 128 * kKiB);
  EXPECT_EQ(pollNow(*a.cq_a).size() + pollNow(*b.cq_a).size(), 2u);
}

TEST_F(SoftPriorityTest, ClassSelectorsOfDscp) {
  EXPECT_EQ(serviceClassOf(0), 0);
  EXPECT_EQ(serviceClassOf(26 << 2), 3);  // DSCP 26 (AF31): the usual RoCE class
  EXPECT_EQ(serviceClassOf(46 << 2), 5);  // DSCP 46 (EF)
  EXPECT_EQ(serviceClassOf(63 << 2), 7);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
