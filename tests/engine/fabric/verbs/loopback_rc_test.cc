// The loopback fake device's RC failure behaviour: a responder that does not answer
// (not RTR/RTS, destroyed, or connected elsewhere) makes the requester wait for
// (retry_cnt + 1) x 4.096 us x 2^timeout, then RETRY_EXC_ERR, ERR and flushes; a
// modify to ERR flushes whatever waits; a full CQ overflows and fails poll_cq.
// Time comes from an injected clock, so every bound is checked to the nanosecond.
#include <gtest/gtest.h>

#include <atomic>

#include "loopback_test_util.h"

namespace tent::fabric::testing {
namespace {

struct Rc : ::testing::Test {
  static LoopbackOptions options(std::atomic<uint64_t>* clock,
                                 OnContractBreak policy = OnContractBreak::kAbort) {
    LoopbackOptions o = RawVerbs::twoDevices(policy);
    o.clock = [clock] { return clock->load(); };
    return o;
  }
  Rc() : v(options(&now)) {}
  void SetUp() override {
    cqa = v.cq(0);
    a = v.qp(0, cqa);
    b = v.qp(1, v.cq(1));
    la = v.mr(0, local.data(), local.size());
    rb = v.mr(1, remote.data(), remote.size());
  }
  int write(uint64_t id, bool signaled = true) {
    return v.post(a, IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, remote.data(), rb->rkey, id,
                  signaled);
  }
  std::atomic<uint64_t> now{1'000'000};
  RawVerbs v;
  std::vector<uint8_t> local = std::vector<uint8_t>(4096);
  std::vector<uint8_t> remote = std::vector<uint8_t>(4096);
  ibv_cq* cqa = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_mr* la = nullptr;
  ibv_mr* rb = nullptr;
};

TEST_F(Rc, DeadResponderEndsInRetryExceededAfterTheBudgetThenFlushes) {
  v.connect(a, 0, b, 1, /*timeout=*/10, /*retry=*/3);
  const uint64_t budget = 4 * 4096ull * (1u << 10);  // (3 + 1) x 4.096 us x 2^10
  v.destroy(b);
  fill(local, 4);
  const uint64_t posted_at = now.load();
  ASSERT_EQ(write(1), 0);
  ASSERT_EQ(write(2, /*signaled=*/false), 0);
  now = posted_at + budget - 1;
  EXPECT_TRUE(v.poll(cqa).empty());
  now = posted_at + budget;
  auto wc = v.poll(cqa);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].wr_id, 2u);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);  // unsignaled, flushed with a CQE
  EXPECT_FALSE(holds(remote.data(), 64, 4));     // nothing was delivered
  ASSERT_EQ(write(3), 0);                        // the QP is in ERR now
  wc = v.poll(cqa);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(v.fabric.stats().retry_exceeded, 1u);
}

TEST_F(Rc, ResponderNotYetReadyIsRetriedUntilItAnswers) {
  ASSERT_EQ(v.toInit(a), 0);
  ASSERT_EQ(v.toInit(b), 0);
  ASSERT_EQ(v.toRtr(a, 1, b->qp_num), 0);
  ASSERT_EQ(v.toRts(a, 10, 3), 0);
  fill(local, 5);
  ASSERT_EQ(write(1), 0);  // b is still in INIT: no answer yet
  EXPECT_TRUE(v.poll(cqa).empty());
  ASSERT_EQ(v.toRtr(b, 0, a->qp_num), 0);  // within the budget: the retry gets through
  auto wc = v.poll(cqa);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(holds(remote.data(), 64, 5));
}

TEST_F(Rc, TimeoutZeroWaitsForeverUntilTheQpGoesToError) {
  v.connect(a, 0, b, 1, /*timeout=*/0, /*retry=*/7);
  ASSERT_EQ(v.toError(b), 0);  // a responder in ERR does not answer
  ASSERT_EQ(write(1), 0);
  ASSERT_EQ(write(2, false), 0);
  now += 3600ull * 1'000'000'000;  // an hour
  EXPECT_TRUE(v.poll(cqa).empty());
  ASSERT_EQ(v.toError(a), 0);
  auto wc = v.poll(cqa);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(Rc, ResponderConnectedElsewhereOrWithAnotherPsnDoesNotAnswer) {
  ibv_qp* other = v.qp(0, cqa);
  ASSERT_EQ(v.toInit(a), 0);
  ASSERT_EQ(v.toInit(b), 0);
  ASSERT_EQ(v.toRtr(a, 1, b->qp_num), 0);
  ASSERT_EQ(v.toRtr(b, 0, other->qp_num), 0);  // b expects `other`, not a
  ASSERT_EQ(v.toRts(a, 1, 0), 0);
  ASSERT_EQ(write(1), 0);
  now += 2 * 4096 * 2;
  EXPECT_EQ(v.pollUntil(cqa, 1).at(0).status, IBV_WC_RETRY_EXC_ERR);

  ibv_qp* c = v.qp(0, cqa);
  ibv_qp* d = v.qp(1, v.cq(1));
  ASSERT_EQ(v.toInit(c), 0);
  ASSERT_EQ(v.toInit(d), 0);
  ASSERT_EQ(v.toRtr(c, 1, d->qp_num), 0);
  ASSERT_EQ(v.toRtr(d, 0, c->qp_num, /*rq_psn=*/5), 0);  // c starts at PSN 0
  ASSERT_EQ(v.toRts(c, 1, 0), 0);
  ASSERT_EQ(v.post(c, IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, remote.data(), rb->rkey), 0);
  now += 2 * 4096 * 2;
  EXPECT_EQ(v.pollUntil(cqa, 1).at(0).status, IBV_WC_RETRY_EXC_ERR);
}

// One connected QP of up to 8 WRs on a CQ of `depth` entries; `posts` signaled WRITEs.
ibv_cq* postOnSmallCq(RawVerbs& v, int depth, int posts, std::vector<uint8_t>& buf) {
  ibv_cq* small = v.cq(0, depth);
  ibv_qp* a = v.qp(0, small, 8);
  v.connect(a, 0, v.qp(1, v.cq(1)), 1);
  ibv_mr* la = v.mr(0, buf.data(), buf.size());
  ibv_mr* rb = v.mr(1, buf.data(), buf.size());
  for (int i = 0; i < posts; ++i)
    EXPECT_EQ(v.post(a, IBV_WR_RDMA_WRITE, buf.data(), 64, la->lkey, buf.data(), rb->rkey, i), 0);
  return small;
}

TEST(RcOverflow, MoreCqesThanTheDepthOverflowAndPollFails) {
  RawVerbs v(RawVerbs::twoDevices(OnContractBreak::kCount));
  std::vector<uint8_t> buf(64), buf2(64);
  postOnSmallCq(v, 2, 2, buf);
  EXPECT_EQ(v.fabric.stats().cq_overflows, 0u);  // exactly full is fine
  ibv_cq* small = postOnSmallCq(v, 2, 3, buf2);
  EXPECT_EQ(v.fabric.stats().cq_overflows, 1u);
  ibv_wc wc[4];
  EXPECT_LT(v.ops.poll_cq(small, 4, wc), 0);
  EXPECT_LT(v.ops.poll_cq(small, 4, wc), 0);  // the CQ stays in error
}

TEST(RcOverflow, OverflowAbortsByDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        RawVerbs v(RawVerbs::twoDevices());
        std::vector<uint8_t> buf(64);
        postOnSmallCq(v, 1, 2, buf);
      },
      "CONTRACT BREAK: CQ of lb0 with 1 entries overflowed");
}

}  // namespace
}  // namespace tent::fabric::testing
