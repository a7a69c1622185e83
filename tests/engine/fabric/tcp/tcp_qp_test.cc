// tcp provider: the QP state machine, post errors, send-queue and CQ limits, flushes,
// connection failures, threads, and churn back to the baseline of descriptors.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <set>
#include <thread>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

class TcpQpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pa_ = makeProvider();
    pb_ = makeProvider();
    ASSERT_NE(pa_, nullptr);
    ASSERT_NE(pb_, nullptr);
    a_ = &pa_->device(0);
    b_ = &pb_->device(0);
  }
  std::unique_ptr<Provider> pa_, pb_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
};

TEST_F(TcpQpTest, StateMachineFollowsVerbs) {
  auto cq = std::move(a_->createCq(16)).value();
  auto qp = std::move(a_->createQp({cq.get(), 4, 1})).value();
  EXPECT_NE(qp->qpNum(), 0u);
  EXPECT_LT(qp->qpNum(), 1u << 24);
  EXPECT_EQ(qp->state(), QpState::kReset);
  const QpRemote remote = QpRemote::toQp(12345, b_->portIdentity());
  EXPECT_EQ(qp->modifyToRtr(remote).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(qp->modifyToRts().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(qp->modifyToInit().ok());
  EXPECT_TRUE(qp->modifyToInit().ok());  // INIT -> INIT is legal
  EXPECT_EQ(qp->modifyToRts().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(qp->modifyToRtr(remote).ok());
  EXPECT_EQ(qp->state(), QpState::kRtr);
  ASSERT_TRUE(qp->modifyToRts().ok());
  EXPECT_EQ(qp->state(), QpState::kRts);
  ASSERT_TRUE(qp->modifyToError().ok());
  EXPECT_EQ(qp->state(), QpState::kError);
}

TEST_F(TcpQpTest, RtrRefusesWhatIsNotATcpPeer) {
  auto cq = std::move(a_->createCq(16)).value();
  auto qp = std::move(a_->createQp({cq.get(), 4, 1})).value();
  ASSERT_TRUE(qp->modifyToInit().ok());
  EXPECT_EQ(qp->modifyToRtr(QpRemote::toQp(0, b_->portIdentity())).code(),
            StatusCode::kInvalidArgument);
  PortIdentity zero;  // :: port 0
  EXPECT_EQ(qp->modifyToRtr(QpRemote::toQp(5, zero)).code(), StatusCode::kInvalidArgument);
  PortIdentity no_port = b_->portIdentity();
  no_port.lid = 0;
  EXPECT_EQ(qp->modifyToRtr(QpRemote::toQp(5, no_port)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qp->modifyToRtr(QpRemote::toQp(qp->qpNum(), a_->portIdentity())).code(),
            StatusCode::kInvalidArgument);  // itself
  EXPECT_EQ(qp->state(), QpState::kInit);
}

TEST_F(TcpQpTest, PostOutsideRtsFailsWithEinval) {
  auto p = QpPair::make(*a_, *b_, 4, 1, 64, /*connect=*/false);
  GuardedBuffer src(*a_, 64, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &s, 1, 0, 0);
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  ASSERT_TRUE(p.a->modifyToInit().ok());
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  ASSERT_TRUE(p.a->modifyToRtr(remoteOf(*p.b, *b_)).ok());
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(TcpQpTest, CreateRejectsBadAttributes) {
  auto cq = std::move(a_->createCq(1 << 17)).value();
  EXPECT_FALSE(a_->createQp({cq.get(), 0, 1}).ok());
  EXPECT_FALSE(a_->createQp({cq.get(), 32769, 1}).ok());
  EXPECT_FALSE(a_->createQp({cq.get(), 4, 0}).ok());
  EXPECT_FALSE(a_->createQp({cq.get(), 4, 33}).ok());
  EXPECT_FALSE(a_->createQp({nullptr, 4, 1}).ok());
  auto other_cq = std::move(b_->createCq(16)).value();
  EXPECT_EQ(a_->createQp({other_cq.get(), 4, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(a_->createCq(0).ok());
  EXPECT_FALSE(a_->createCq((1u << 22) + 1).ok());
}

TEST_F(TcpQpTest, SendQueueFullReturnsEnomemWithBadWr) {
  auto p = QpPair::make(*a_, *b_, 4, 1, 64, /*connect=*/false);
  ASSERT_TRUE(connectQp(*p.a, remoteOf(*p.b, *b_)).ok());  // the peer never comes: WRs wait
  GuardedBuffer src(*a_, 64, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  std::vector<SendWr> wrs(6);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i] = makeWr(i, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1);
    if (i > 0) wrs[i - 1].next = &wrs[i];
  }
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wrs[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &wrs[4]);
  EXPECT_EQ(p.a->outstanding(), 4u);
}

TEST_F(TcpQpTest, TooManySgesReturnsEinval) {
  auto p = QpPair::make(*a_, *b_, 4, 2);
  GuardedBuffer src(*a_, 64, kAllAccess);
  Sge s[3] = {{src.addr(), 8, src.mr->lkey()},
              {src.addr(), 8, src.mr->lkey()},
              {src.addr(), 8, src.mr->lkey()}};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, s, 3, 0, 0);
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  SendWr no_list = makeWr(1, WrOpcode::kRdmaWrite, nullptr, 1, 0, 0);
  EXPECT_EQ(p.a->postSend(&no_list, &bad), EINVAL);
  SendWr bad_op = makeWr(1, static_cast<WrOpcode>(9), s, 1, 0, 0);
  EXPECT_EQ(p.a->postSend(&bad_op, &bad), EINVAL);
  EXPECT_EQ(p.a->state(), QpState::kRts);
}

// A CQ that could overflow is refused at createQp, as on verbs.
TEST_F(TcpQpTest, AQpThatCouldOverflowItsCqIsRefused) {
  auto cq = std::move(a_->createCq(10)).value();
  auto q1 = a_->createQp({cq.get(), 6, 1});
  ASSERT_TRUE(q1.ok());
  auto q2 = a_->createQp({cq.get(), 5, 1});
  ASSERT_FALSE(q2.ok());
  EXPECT_EQ(q2.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(q2.status().message().find("could overflow"), std::string::npos);
  q1->reset();  // its entries come back
  EXPECT_TRUE(a_->createQp({cq.get(), 10, 1}).ok());
}

// With admission a CQ cannot overflow: every WR of every QP on it, flushed at once,
// fits, and poll never reports -1.
TEST_F(TcpQpTest, AFullyAdmittedCqHoldsEveryCompletion) {
  auto cq = std::move(a_->createCq(8)).value();
  auto cq_b = std::move(b_->createCq(8)).value();
  auto q1 = std::move(a_->createQp({cq.get(), 4, 1})).value();
  auto q2 = std::move(a_->createQp({cq.get(), 4, 1})).value();
  auto r1 = std::move(b_->createQp({cq_b.get(), 4, 1})).value();
  auto r2 = std::move(b_->createQp({cq_b.get(), 4, 1})).value();
  // Never connected on the other side: the WRs wait, then ERR flushes all 8.
  ASSERT_TRUE(connectQp(*q1, remoteOf(*r1, *b_)).ok());
  ASSERT_TRUE(connectQp(*q2, remoteOf(*r2, *b_)).ok());
  GuardedBuffer src(*a_, 64, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  for (uint64_t i = 0; i < 4; ++i) {
    post(*q1, makeWr(i, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1, false));
    post(*q2, makeWr(10 + i, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1, false));
  }
  ASSERT_TRUE(q1->modifyToError().ok());
  ASSERT_TRUE(q2->modifyToError().ok());
  auto wcs = pollN(*cq, 8);
  ASSERT_EQ(wcs.size(), 8u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kFlushed);
  WorkCompletion wc[4];
  EXPECT_EQ(cq->poll(wc, 4), 0);
}

TEST_F(TcpQpTest, UnsignaledWrsHoldTheirSlotUntilALaterSignaledOneIsPolled) {
  auto p = QpPair::make(*a_, *b_, 4, 1);
  GuardedBuffer src(*a_, 64, kAllAccess), dst(*b_, 64, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  for (uint64_t i = 0; i < 3; ++i) {
    post(*p.a, makeWr(i, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey(), false));
  }
  EXPECT_EQ(p.a->outstanding(), 3u);
  post(*p.a, makeWr(3, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey(), true));
  EXPECT_EQ(p.a->outstanding(), 4u);
  const SendWr* bad = nullptr;
  SendWr more = makeWr(4, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
  EXPECT_EQ(p.a->postSend(&more, &bad), ENOMEM);
  auto wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 3u);
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(TcpQpTest, ModifyToErrorFlushesOutstandingWrsInOrder) {
  auto p = QpPair::make(*a_, *b_, 64, 1, 256, /*connect=*/false);
  ASSERT_TRUE(connectQp(*p.a, remoteOf(*p.b, *b_)).ok());  // the peer never reaches RTR
  GuardedBuffer src(*a_, 4096, kAllAccess);
  Sge s{src.addr(), 4096, src.mr->lkey()};
  for (uint64_t i = 0; i < 64; ++i) {
    post(*p.a, makeWr(i, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1, i % 2 == 0));
  }
  ASSERT_TRUE(p.a->modifyToError().ok());
  const SendWr* bad = nullptr;
  SendWr late = makeWr(99, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1);
  EXPECT_EQ(p.a->postSend(&late, &bad), EINVAL);
  auto wcs = pollN(*p.cq_a, 64);
  ASSERT_EQ(wcs.size(), 64u);  // every flushed WR completes, signaled or not
  for (uint64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].status, WcStatus::kFlushed);
  }
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(TcpQpTest, ErrorFlushesWrsInFlightOnAnOpenConnection) {
  auto p = QpPair::make(*a_, *b_, 32, 1, 128);
  GuardedBuffer src(*a_, 8 << 20, kAllAccess), dst(*b_, 8 << 20, kAllAccess);
  Sge s{src.addr(), 8 << 20, src.mr->lkey()};
  for (uint64_t i = 0; i < 32; ++i) {
    post(*p.a, makeWr(i, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey()));
  }
  ASSERT_TRUE(p.a->modifyToError().ok());
  auto wcs = pollN(*p.cq_a, 32);
  ASSERT_EQ(wcs.size(), 32u);
  size_t flushed = 0;
  for (uint64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    if (wcs[i].status == WcStatus::kFlushed) {
      ++flushed;
    } else {
      EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
      EXPECT_EQ(flushed, 0u) << "a success after a flush";
    }
  }
  // How many completed before the flush depends on the machine; that every WR completes
  // once, in order, successes before flushes, does not.
}

TEST_F(TcpQpTest, APeerQpDestroyedGivesRetryExceeded) {
  auto p = QpPair::make(*a_, *b_, 8, 1);
  GuardedBuffer src(*a_, 64, kAllAccess), dst(*b_, 64, kAllAccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64).status,
            WcStatus::kSuccess);
  p.b.reset();  // its connection closes
  Sge s{src.addr(), 64, src.mr->lkey()};
  // The loss may be seen before or after this post: before, the idle QP is in ERR already
  // and refuses it; after, the WR fails as to a dead peer. Never a success.
  const SendWr wr = makeWr(7, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
  const SendWr* bad = nullptr;
  const int rc = p.a->postSend(&wr, &bad);
  if (rc == 0) {
    auto wcs = pollN(*p.cq_a, 1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded) << toString(wcs[0].status);
  } else {
    EXPECT_EQ(rc, EINVAL);
  }
  EXPECT_TRUE(waitFor([&] { return p.a->state() == QpState::kError; }));
}

// A connection lost while nothing is outstanding moves the QP to ERR at once (a TCP
// connection, unlike a NIC's RC context across a link flap, never comes back): its
// owner sees it (state, EINVAL on post) before it posts a request there.
TEST_F(TcpQpTest, AnIdleQpWhoseConnectionIsLostGoesToError) {
  auto p = QpPair::make(*a_, *b_, 8, 1);
  GuardedBuffer src(*a_, 64, kAllAccess), dst(*b_, 64, kAllAccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64).status,
            WcStatus::kSuccess);
  p.b.reset();  // its connection closes; nothing of a's is outstanding
  EXPECT_TRUE(waitFor([&] { return p.a->state() == QpState::kError; }));
  Sge s{src.addr(), 64, src.mr->lkey()};
  const SendWr wr = makeWr(8, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  WorkCompletion wc;
  EXPECT_EQ(p.cq_a->poll(&wc, 1), 0);  // no completion: nothing was outstanding
}

// Nobody answers at the peer's address. Whichever side a QP takes, its WRs end in
// retry-exceeded: the one that connects is refused at once, the one that waits to be
// connected to hears nothing for the retry budget.
TEST(TcpPeerGone, NothingListeningGivesRetryExceeded) {
  PortIdentity gone;
  {
    auto dead = makeProvider();
    ASSERT_NE(dead, nullptr);
    gone = dead->device(0).portIdentity();  // closed with its provider
  }
  auto quick = makeProvider(testConfig(200));
  ASSERT_NE(quick, nullptr);
  Device& dev = quick->device(0);
  auto cq = std::move(dev.createCq(16)).value();
  GuardedBuffer src(dev, 64, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  std::vector<std::unique_ptr<QueuePair>> qps;
  // The lower (address, port, QP) connects: a peer at 127.0.0.2 is connected to (and
  // refuses: nothing listens there), one at 127.0.0.0 would connect to us (it never does).
  for (uint8_t last_octet : {2, 0}) {
    PortIdentity peer = gone;
    peer.gid[15] = last_octet;
    qps.push_back(std::move(dev.createQp({cq.get(), 4, 1})).value());
    ASSERT_TRUE(connectQp(*qps.back(), QpRemote::toQp(77, peer)).ok());
    // One chain: posted one at a time, the refusal could fail the first WR (and move the
    // QP to ERR) before the second is posted, which a NIC refuses too (EINVAL).
    SendWr first = makeWr(last_octet, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1);
    SendWr second = makeWr(last_octet + 1, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1);
    first.next = &second;
    post(*qps.back(), first);
  }
  auto wcs = pollN(*cq, 4);
  ASSERT_EQ(wcs.size(), 4u);
  std::multiset<WcStatus> statuses;
  for (const auto& wc : wcs) statuses.insert(wc.status);
  EXPECT_EQ(statuses.count(WcStatus::kRetryExceeded), 2u);
  EXPECT_EQ(statuses.count(WcStatus::kFlushed), 2u);
  for (auto& q : qps) EXPECT_EQ(q->state(), QpState::kError);
}

TEST_F(TcpQpTest, TwoPollersOfOneCqSeeEachCompletionExactlyOnce) {
  constexpr int kQps = 4;
  constexpr uint64_t kPerQp = 2000;
  auto cq = std::move(a_->createCq(kQps * 32)).value();
  auto cq_b = std::move(b_->createCq(kQps * 32)).value();
  std::vector<std::unique_ptr<QueuePair>> qa, qb;
  for (int i = 0; i < kQps; ++i) {
    qa.push_back(std::move(a_->createQp({cq.get(), 32, 1})).value());
    qb.push_back(std::move(b_->createQp({cq_b.get(), 32, 1})).value());
    ASSERT_TRUE(connectQp(*qb[i], remoteOf(*qa[i], *a_)).ok());
    ASSERT_TRUE(connectQp(*qa[i], remoteOf(*qb[i], *b_)).ok());
  }
  GuardedBuffer src(*a_, 256, kAllAccess), dst(*b_, 256, kAllAccess);
  std::atomic<uint64_t> seen{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> overflowed{false};
  std::vector<std::vector<uint64_t>> got(2);
  auto poller = [&](int k) {
    WorkCompletion wc[8];
    while (!stop.load()) {
      const int n = cq->poll(wc, 8);
      // -1: the CQ overflowed, which admission rules out; it would strand the posters.
      if (n < 0) {
        ADD_FAILURE() << "poll returned " << n << " (CQ overflow)";
        overflowed = true;
        return;
      }
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(wc[i].status, WcStatus::kSuccess);
        got[k].push_back(wc[i].wr_id);
      }
      seen.fetch_add(static_cast<uint64_t>(n));
      if (n == 0) std::this_thread::yield();
    }
  };
  std::thread t0(poller, 0), t1(poller, 1);
  // One poster thread per QP (one poster per QP at a time).
  std::vector<std::thread> posters;
  for (int q = 0; q < kQps; ++q) {
    posters.emplace_back([&, q] {
      Sge s{src.addr(), 256, src.mr->lkey()};
      for (uint64_t i = 0; i < kPerQp; ++i) {
        SendWr wr =
            makeWr(uint64_t(q) << 32 | i, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
        const SendWr* bad = nullptr;
        while (qa[q]->postSend(&wr, &bad) == ENOMEM) {
          if (overflowed) return;
          std::this_thread::yield();
        }
      }
    });
  }
  for (auto& t : posters) t.join();
  EXPECT_TRUE(waitFor([&] { return overflowed || seen.load() >= kQps * kPerQp; }));
  stop = true;
  t0.join();
  t1.join();
  std::set<uint64_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), kQps * kPerQp);
  EXPECT_EQ(got[0].size() + got[1].size(), kQps * kPerQp);
}

// QPs and their connections come and go; descriptors, MRs and CQ entries come back.
TEST_F(TcpQpTest, ChurnReturnsDescriptorsAndEntriesToBaseline) {
  auto cq_a = std::move(a_->createCq(64)).value();
  auto cq_b = std::move(b_->createCq(64)).value();
  GuardedBuffer src(*a_, 4096, kAllAccess);
  src.fill(3);
  const size_t fds = openFds();
  for (int round = 0; round < 150; ++round) {
    std::vector<uint8_t> target(4096, 0);
    auto mr = std::move(b_->registerMemory(target.data(), target.size(), kAllAccess)).value();
    auto qa = std::move(a_->createQp({cq_a.get(), 32, 1})).value();
    auto qb = std::move(b_->createQp({cq_b.get(), 32, 1})).value();
    if (round % 2) {
      ASSERT_TRUE(connectQp(*qb, remoteOf(*qa, *a_)).ok());
      ASSERT_TRUE(connectQp(*qa, remoteOf(*qb, *b_)).ok());
    } else {
      ASSERT_TRUE(connectQp(*qa, remoteOf(*qb, *b_)).ok());
      ASSERT_TRUE(connectQp(*qb, remoteOf(*qa, *a_)).ok());
    }
    Sge s{src.addr(), 4096, src.mr->lkey()};
    post(*qa, makeWr(uint64_t(round), WrOpcode::kRdmaWrite, &s, 1,
                     reinterpret_cast<uint64_t>(target.data()), mr->rkey()));
    if (round % 3 == 0) continue;  // destroyed with its WR in flight or its completion unpolled
    auto wcs = pollN(*cq_a, 1);
    ASSERT_EQ(wcs.size(), 1u);
    ASSERT_EQ(wcs[0].status, WcStatus::kSuccess);
    ASSERT_EQ(wcs[0].wr_id, uint64_t(round));
    ASSERT_TRUE(src.holds(3) && std::equal(target.begin(), target.end(), src.data()));
  }
  // Stale completions of destroyed QPs are dropped by poll and give their entries back.
  WorkCompletion wc[64];
  while (cq_a->poll(wc, 64) > 0) {
  }
  EXPECT_TRUE(waitFor([&] { return openFds() == fds; })) << openFds() << " vs " << fds;
  // Every entry of both CQs is free again: a QP asking for all of them is admitted.
  EXPECT_TRUE(a_->createQp({cq_a.get(), 64, 1}).ok());
  EXPECT_TRUE(b_->createQp({cq_b.get(), 64, 1}).ok());
  // Every memory region of b came back: all max_mrs of them can be registered again.
  std::vector<uint8_t> one(64);
  std::vector<std::unique_ptr<MemoryRegion>> all;
  for (;;) {
    auto mr = b_->registerMemory(one.data(), one.size(), kAllAccess);
    if (!mr.ok()) break;
    all.push_back(std::move(mr).value());
  }
  EXPECT_EQ(all.size(), testConfig().max_mrs);
}

TEST_F(TcpQpTest, PosterAndPollerOnDifferentThreads) {
  auto p = QpPair::make(*a_, *b_, 16, 1, 64);
  GuardedBuffer src(*a_, 1 << 16, kAllAccess), dst(*b_, 1 << 16, kAllAccess);
  src.fill(4);
  constexpr uint64_t kWrs = 5000;
  std::atomic<uint64_t> completed{0};
  std::thread poller([&] {
    uint64_t next = 0;
    WorkCompletion wc[16];
    while (next < kWrs) {
      const int n = p.cq_a->poll(wc, 16);
      ASSERT_GE(n, 0);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(wc[i].wr_id, next++);
        ASSERT_EQ(wc[i].status, WcStatus::kSuccess);
      }
      completed.store(next);
      if (n == 0) std::this_thread::yield();
    }
  });
  for (uint64_t i = 0; i < kWrs; ++i) {
    const uint32_t len = 1 + static_cast<uint32_t>(i % 4096);
    Sge s{src.addr(), len, src.mr->lkey()};
    SendWr wr = makeWr(i, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
    const SendWr* bad = nullptr;
    int rc;
    while ((rc = p.a->postSend(&wr, &bad)) == ENOMEM) std::this_thread::yield();
    ASSERT_EQ(rc, 0);
  }
  poller.join();
  EXPECT_EQ(completed.load(), kWrs);
  EXPECT_TRUE(dst.holds(4, 0, 4096));
}

// Closing the provider closes its connections; a QP that outlives it is flushed and
// its peer sees the connection go.
TEST_F(TcpQpTest, ClosingTheProviderFlushesItsQpsAndFailsThePeers) {
  auto p = QpPair::make(*a_, *b_, 8, 1);
  GuardedBuffer src(*a_, 64, kAllAccess);
  {
    GuardedBuffer dst(*b_, 64, kAllAccess);  // the connection is up
    ASSERT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64).status,
              WcStatus::kSuccess);
  }
  auto qb = std::move(p.b);
  auto cqb = std::move(p.cq_b);
  pb_.reset();  // b's provider closes with qb alive
  Sge s{src.addr(), 64, src.mr->lkey()};
  // Posted before a sees the loss: retry-exceeded; after: a is in ERR already (EINVAL).
  const SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &s, 1, 0x1000, 1);
  const SendWr* bad_a = nullptr;
  const int rc = p.a->postSend(&wr, &bad_a);
  if (rc == 0) {
    auto wcs = pollN(*p.cq_a, 1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded) << toString(wcs[0].status);
  } else {
    EXPECT_EQ(rc, EINVAL);
  }
  EXPECT_TRUE(waitFor([&] { return p.a->state() == QpState::kError; }));
  // The QP that outlived its provider is in ERR: it takes no posts that could never end.
  EXPECT_TRUE(waitFor([&] { return qb->state() == QpState::kError; }));
  Sge sb{src.addr(), 64, 0};  // its device is gone with the provider; the state decides
  const SendWr late = makeWr(2, WrOpcode::kRdmaWrite, &sb, 1, 0x1000, 1);
  const SendWr* bad = nullptr;
  EXPECT_EQ(qb->postSend(&late, &bad), EINVAL);
  qb.reset();
  cqb.reset();
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
