// Soft provider: RC failure timing when the responder goes away, on an injected
// clock. The responder is a second provider in this process; shutting it down is
// what a peer's death looks like (its liveness word and its closed flag). On an
// 8 Gb/s port a byte takes one nanosecond, so every instant below is exact.
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

constexpr uint64_t kBudgetNs = 50'000'000;  // testConfig(): retry_budget_ms 50

class SoftRcFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    local_ = makeProvider({softDevice("local0", 8, 0)}, clock_.clock());
    remote_ = makeProvider({softDevice("remote0")}, clock_.clock());
    ASSERT_TRUE(local_ && remote_);
    Device& a = local_->device(0);
    Device& b = remote_->device(0);
    pair_ = QpPair::make(a, b, 16, 1, 64);
    src_ = std::make_unique<GuardedBuffer>(a, 4096, kAllAccess);
    dst_ = std::make_unique<GuardedBuffer>(b, 4096, kAllAccess);
    src_->fill(5);
    t0_ = clock_.now();
  }
  void postWrite(uint64_t id, uint32_t length) {
    sge_ = Sge{src_->addr(), length, src_->mr->lkey()};
    post(*pair_.a, makeWr(id, WrOpcode::kRdmaWrite, &sge_, 1, dst_->addr(), dst_->mr->rkey()));
  }
  // The responder's provider shuts down; its QP object stays (as on a host that died).
  void responderGone() {
    remote_qp_ = std::move(pair_.b);
    remote_.reset();
  }
  std::vector<WorkCompletion> pollAt(uint64_t t) {
    clock_.set(t);
    return pollNow(*pair_.cq_a);
  }

  ManualClock clock_{1'000'000};
  std::unique_ptr<Provider> local_, remote_;
  QpPair pair_;
  std::unique_ptr<QueuePair> remote_qp_;
  std::unique_ptr<GuardedBuffer> src_, dst_;
  Sge sge_{};
  uint64_t t0_ = 0;
};

TEST_F(SoftRcFailureTest, AcknowledgedBeforeTheDeathStaysSuccessTheRestFailAfterTheBudget) {
  postWrite(1, 1024);  // completes at t0 + 1024
  postWrite(2, 1024);  // t0 + 2048
  postWrite(3, 1024);  // t0 + 3072
  auto first = pollAt(t0_ + 1024);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].status, WcStatus::kSuccess);
  responderGone();
  // WR 2 would have completed at t0 + 2048: its retransmissions run out one budget later.
  EXPECT_TRUE(pollAt(t0_ + 3072).empty());
  EXPECT_EQ(pair_.a->state(), QpState::kError);
  EXPECT_TRUE(pollAt(t0_ + 2048 + kBudgetNs - 1).empty());
  auto rest = pollAt(t0_ + 2048 + kBudgetNs);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].wr_id, 2u);
  EXPECT_EQ(rest[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(rest[1].wr_id, 3u);
  EXPECT_EQ(rest[1].status, WcStatus::kFlushed);
  EXPECT_EQ(pair_.a->outstanding(), 0u);
}

TEST_F(SoftRcFailureTest, DueButNotPolledBeforeTheDeathIsNotReportedDelivered) {
  postWrite(1, 1024);
  clock_.set(t0_ + 5000);  // due, but nobody polled while the responder was up
  responderGone();
  auto wcs = pollAt(t0_ + 1024 + kBudgetNs);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
}

TEST_F(SoftRcFailureTest, UntransmittedWrsAreFlushedBehindTheFailedOne) {
  postWrite(1, 4096);  // t0 + 4096
  postWrite(2, 4096);  // t0 + 8192, not yet on the wire at t0 + 100
  clock_.set(t0_ + 100);
  responderGone();
  // WR 1's missing acknowledgement is noticed when it falls due: from then on the
  // port carries none of the QP's bytes (WR 2 never crosses).
  EXPECT_TRUE(pollAt(t0_ + 4096).empty());
  clock_.set(t0_ + 8192);
  EXPECT_EQ(local_->device(0).counters().bytes, 4096u);
  auto wcs = pollAt(t0_ + 4096 + kBudgetNs);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(wcs[1].status, WcStatus::kFlushed);
}

TEST_F(SoftRcFailureTest, PostToAGoneResponderFailsAfterTheBudget) {
  responderGone();
  postWrite(1, 64);
  EXPECT_TRUE(pollAt(t0_ + kBudgetNs - 1).empty());
  auto wcs = pollAt(t0_ + kBudgetNs);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(pair_.a->state(), QpState::kError);
}

TEST_F(SoftRcFailureTest, ResponderQpLeavingRtsFailsTheUnacknowledgedWr) {
  postWrite(1, 1024);
  ASSERT_TRUE(pair_.b->modifyToError().ok());  // the peer reset its end of the connection
  auto wcs = pollAt(t0_ + 1024 + kBudgetNs);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
