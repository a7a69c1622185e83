// The loopback fake device's thread rules, as on a NIC: several threads may poll
// one CQ (each CQE goes to exactly one of them) and post on different QPs; two
// threads inside post_send on the same QP break the provider's contract and are
// reported (abort by default, or counted).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "loopback_test_util.h"

namespace tent::fabric::testing {
namespace {

TEST(LoopbackThreads, EachCqeGoesToExactlyOnePoller) {
  RawVerbs v(RawVerbs::twoDevices());
  constexpr uint64_t kWrs = 5000;
  ibv_cq* cq = v.cq(0, 64);
  ibv_qp* a = v.qp(0, cq, 64);
  ibv_qp* b = v.qp(1, v.cq(1));
  v.connect(a, 0, b, 1);
  std::vector<uint8_t> src(8), dst(8);
  ibv_mr* ls = v.mr(0, src.data(), src.size());
  ibv_mr* rd = v.mr(1, dst.data(), dst.size());
  std::atomic<uint64_t> polled{0};
  std::mutex mu;
  std::multiset<uint64_t> seen;
  auto poller = [&] {
    std::vector<uint64_t> mine;
    while (polled.load() < kWrs) {
      for (const ibv_wc& wc : v.poll(cq)) {
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        mine.push_back(wc.wr_id);
        polled.fetch_add(1);
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(mine.begin(), mine.end());
  };
  std::thread p1(poller), p2(poller), p3(poller);
  // One poster; ENOMEM (send queue full) just means the pollers are behind.
  for (uint64_t i = 0; i < kWrs;) {
    int rc = v.post(a, IBV_WR_RDMA_WRITE, src.data(), 8, ls->lkey, dst.data(), rd->rkey, i);
    ASSERT_TRUE(rc == 0 || rc == ENOMEM) << rc;
    if (rc == 0) ++i;
  }
  p1.join();
  p2.join();
  p3.join();
  ASSERT_EQ(seen.size(), kWrs);
  uint64_t expect = 0;
  for (uint64_t id : seen) ASSERT_EQ(id, expect++);  // each exactly once
  EXPECT_EQ(v.fabric.stats().cq_overflows, 0u);
}

TEST(LoopbackThreads, PostersOnDifferentQpsMoveTheirOwnBytes) {
  RawVerbs v(RawVerbs::twoDevices());
  constexpr int kThreads = 4, kRounds = 500;
  constexpr uint32_t kLen = 4096;
  ibv_cq* cq = v.cq(0, 1024);
  std::vector<uint8_t> src(kThreads * kLen), dst(kThreads * kLen);
  ibv_mr* ls = v.mr(0, src.data(), src.size());
  ibv_mr* rd = v.mr(1, dst.data(), dst.size());
  std::vector<ibv_qp*> qps;
  for (int t = 0; t < kThreads; ++t) {
    qps.push_back(v.qp(0, cq, 16));
    v.connect(qps.back(), 0, v.qp(1, v.cq(1)), 1);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint8_t* s = src.data() + t * kLen;
      uint8_t* d = dst.data() + t * kLen;
      for (int r = 0; r < kRounds; ++r) {
        std::memset(s, t * 16 + r % 16, kLen);
        // Unsignaled, then a signaled READ back of the same range: in order per QP.
        auto post = [&](ibv_wr_opcode op, bool signaled) {
          int rc;
          while ((rc = v.post(qps[t], op, s, kLen, ls->lkey, d, rd->rkey, t, signaled)) == ENOMEM) {
          }
          if (rc != 0) ++bad;
        };
        post(IBV_WR_RDMA_WRITE, false);
        post(IBV_WR_RDMA_READ, true);
      }
    });
  }
  uint64_t done = 0;
  while (done < kThreads * kRounds) {
    for (const ibv_wc& wc : v.poll(cq)) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      ++done;
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  for (int t = 0; t < kThreads; ++t)
    for (uint32_t i = 0; i < kLen; ++i) ASSERT_EQ(dst[t * kLen + i], t * 16 + (kRounds - 1) % 16);
  EXPECT_EQ(v.fabric.stats().concurrent_posts, 0u);
}

// Holds the first poster inside post_send until the second one has been seen.
struct Overlap {
  std::mutex mu;
  std::condition_variable cv;
  bool first_in = false;
  bool second_seen = false;
  std::atomic<int> calls{0};
  void onPost(uint32_t) {
    if (calls.fetch_add(1) != 0) return;
    std::unique_lock<std::mutex> lock(mu);
    first_in = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return second_seen; });
  }
  void waitFirstIn() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(20), [&] { return first_in; });
  }
  void releaseFirst() {
    std::lock_guard<std::mutex> lock(mu);
    second_seen = true;
    cv.notify_all();
  }
};

LoopbackOptions overlapOptions(Overlap* o, OnContractBreak policy) {
  LoopbackOptions opts = RawVerbs::twoDevices(policy);
  opts.on_post = [o](uint32_t qpn) { o->onPost(qpn); };
  return opts;
}

// Two threads post on one QP; the first is held inside post_send meanwhile.
void postTwiceAtOnce(RawVerbs& v, Overlap& overlap, std::vector<uint8_t>& buf) {
  ibv_cq* cq = v.cq(0);
  ibv_qp* a = v.qp(0, cq);
  v.connect(a, 0, v.qp(1, v.cq(1)), 1);
  ibv_mr* l = v.mr(0, buf.data(), buf.size());
  ibv_mr* r = v.mr(1, buf.data(), buf.size());
  std::thread first(
      [&] { v.post(a, IBV_WR_RDMA_WRITE, buf.data(), 8, l->lkey, buf.data() + 8, r->rkey, 1); });
  overlap.waitFirstIn();
  v.post(a, IBV_WR_RDMA_WRITE, buf.data(), 8, l->lkey, buf.data() + 16, r->rkey, 2);
  overlap.releaseFirst();
  first.join();
}

TEST(LoopbackThreads, TwoPostersOnOneQpAreCounted) {
  Overlap overlap;
  RawVerbs v(overlapOptions(&overlap, OnContractBreak::kCount));
  std::vector<uint8_t> buf(64);
  postTwiceAtOnce(v, overlap, buf);
  LoopbackStats s = v.fabric.stats();
  EXPECT_EQ(s.concurrent_posts, 1u);
  EXPECT_EQ(s.contractBreaks(), 1u);
  EXPECT_EQ(s.wrs_executed, 2u);  // serialised, as mlx5's own SQ lock would
}

TEST(LoopbackThreads, TwoPostersOnOneQpAbortByDefault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Overlap overlap;
        RawVerbs v(overlapOptions(&overlap, OnContractBreak::kAbort));
        std::vector<uint8_t> buf(64);
        postTwiceAtOnce(v, overlap, buf);
      },
      "CONTRACT BREAK: two threads inside post_send on QP [0-9]+ of lb0 at the same time");
}

}  // namespace
}  // namespace tent::fabric::testing
