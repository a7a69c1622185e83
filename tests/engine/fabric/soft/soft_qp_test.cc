// Soft provider: the QP state machine, hardware-like limits, ordering, flushes.
#include <cerrno>
#include <thread>

#include "fabric/soft/soft_layout.h"
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

class SoftQpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    provider_ = makeProvider({softDevice("soft0")});
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
  }
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
};

TEST_F(SoftQpTest, StateMachineFollowsVerbs) {
  auto cq = std::move(dev_->createCq(16)).value();
  auto qp = std::move(dev_->createQp({cq.get(), 4, 1})).value();
  auto peer = std::move(dev_->createQp({cq.get(), 4, 1})).value();
  EXPECT_NE(qp->qpNum(), 0u);
  EXPECT_NE(qp->qpNum(), peer->qpNum());
  EXPECT_EQ(qp->state(), QpState::kReset);
  const QpRemote remote = remoteOf(*peer, *dev_);

  EXPECT_EQ(qp->modifyToRtr(remote).code(), StatusCode::kFailedPrecondition);  // RESET -> RTR
  EXPECT_EQ(qp->modifyToRts().code(), StatusCode::kFailedPrecondition);        // RESET -> RTS
  ASSERT_TRUE(qp->modifyToInit().ok());
  EXPECT_TRUE(qp->modifyToInit().ok());  // INIT -> INIT is legal
  EXPECT_EQ(qp->state(), QpState::kInit);
  EXPECT_EQ(qp->modifyToRts().code(), StatusCode::kFailedPrecondition);  // INIT -> RTS
  ASSERT_TRUE(qp->modifyToRtr(remote).ok());
  EXPECT_EQ(qp->state(), QpState::kRtr);
  EXPECT_EQ(qp->modifyToRtr(remote).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(qp->modifyToRts().ok());
  EXPECT_EQ(qp->state(), QpState::kRts);
  ASSERT_TRUE(qp->modifyToError().ok());
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_EQ(qp->modifyToInit().code(), StatusCode::kFailedPrecondition);  // ERR is final here
}

TEST_F(SoftQpTest, RtrRejectsARemoteThatIsNotASoftPort) {
  auto cq = std::move(dev_->createCq(16)).value();
  auto qp = std::move(dev_->createQp({cq.get(), 4, 1})).value();
  ASSERT_TRUE(qp->modifyToInit().ok());
  QpRemote remote;
  remote.qp_num = 77;
  remote.port.gid[0] = 0xfe;  // a link-local IB GID
  EXPECT_EQ(qp->modifyToRtr(remote).code(), StatusCode::kInvalidArgument);
  remote = remoteOf(*qp, *dev_);
  remote.qp_num = 0;
  EXPECT_EQ(qp->modifyToRtr(remote).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qp->state(), QpState::kInit);
}

TEST_F(SoftQpTest, PostOutsideRtsFailsWithEinval) {
  auto p = QpPair::make(*dev_, *dev_, 4, 1, 16, /*connect=*/false);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);  // RESET
  EXPECT_EQ(bad, &wr);
  ASSERT_TRUE(p.a->modifyToInit().ok());
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);  // INIT
  ASSERT_TRUE(p.b->modifyToInit().ok());
  ASSERT_TRUE(p.a->modifyToRtr(remoteOf(*p.b, *dev_)).ok());
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);  // RTR
  ASSERT_TRUE(p.a->modifyToError().ok());
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);  // ERR
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(SoftQpTest, CreateRejectsBadAttributes) {
  auto cq = std::move(dev_->createCq(16)).value();
  EXPECT_EQ(dev_->createQp({nullptr, 4, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->createQp({cq.get(), 0, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->createQp({cq.get(), 1u << 20, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->createQp({cq.get(), 4, 1000}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->createCq(0).status().code(), StatusCode::kInvalidArgument);
}

// One poster per QP at a time (docs/fabric.md, the contract): a second thread that
// posts while another is inside postSend() on the same QP is caught, never quietly
// serialised. Thread A is held inside its post by a kHoldPost fault until released,
// so the overlap does not depend on scheduling. Debug and test builds abort naming
// the QP; release builds refuse the second post with EBUSY and count it.
struct HeldPoster {
  explicit HeldPoster(Provider& provider, Device& dev) : faults(faultInjector(provider)) {
    pair = QpPair::make(dev, dev);
    src = std::make_unique<GuardedBuffer>(dev, 64, kAllAccess);
    dst = std::make_unique<GuardedBuffer>(dev, 64, kAllAccess);
    sge = Sge{src->addr(), 64, src->mr->lkey()};
    FaultRule hold;
    hold.qp_num = pair.a->qpNum();
    hold.every_nth = 1;
    hold.max_hits = 1;
    hold.action = FaultAction::kHoldPost;
    hold.delay_ns = 600'000'000'000;  // until released
    rule = faults->addRule(hold).value();
    first = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst->addr(), dst->mr->rkey());
    second = makeWr(2, WrOpcode::kRdmaWrite, &sge, 1, dst->addr(), dst->mr->rkey());
    holder = std::thread([this] { first_rc = pair.a->postSend(&first, &bad_first); });
    while (faults->hits(rule) == 0) std::this_thread::yield();  // A is inside postSend
  }
  ~HeldPoster() { release(); }
  // Lets A's post run and waits for it.
  void release() {
    if (!holder.joinable()) return;
    faults->releaseHeldPosts();
    holder.join();
  }
  FaultInjector* faults;
  QpPair pair;
  std::unique_ptr<GuardedBuffer> src, dst;
  Sge sge{};
  uint32_t rule = 0;
  SendWr first{}, second{};
  const SendWr* bad_first = nullptr;
  int first_rc = -1;
  std::thread holder;
};

#ifndef NDEBUG
TEST_F(SoftQpTest, TwoThreadsPostingOnOneQpAtOnceAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        HeldPoster held(*provider_, *dev_);
        const SendWr* bad = nullptr;
        (void)held.pair.a->postSend(&held.second, &bad);  // while A is inside: abort
      },
      "two threads posted on QP [0-9]+ at the same time");
}
#else
TEST_F(SoftQpTest, TwoThreadsPostingOnOneQpAtOnceAreRefused) {
  HeldPoster held(*provider_, *dev_);
  const SendWr* bad = nullptr;
  EXPECT_EQ(held.pair.a->postSend(&held.second, &bad), EBUSY);
  EXPECT_EQ(bad, &held.second);
  held.release();
  EXPECT_EQ(held.first_rc, 0);
  EXPECT_EQ(pollN(*held.pair.cq_a, 1).size(), 1u);
}
#endif

// The same two posts one after the other are fine, and the held one runs normally.
TEST_F(SoftQpTest, APostHeldInsidePostSendRunsWhenReleased) {
  HeldPoster held(*provider_, *dev_);
  std::memset(held.dst->data(), 0, 64);
  std::memset(held.src->data(), 0x5A, 64);
  held.release();
  EXPECT_EQ(held.first_rc, 0);
  const SendWr* bad = nullptr;
  EXPECT_EQ(held.pair.a->postSend(&held.second, &bad), 0);
  auto wcs = pollN(*held.pair.cq_a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(std::memcmp(held.dst->data(), held.src->data(), 64), 0);
}

TEST_F(SoftQpTest, SendQueueFullReturnsEnomemWithBadWr) {
  auto p = QpPair::make(*dev_, *dev_, /*max_send_wr=*/4);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  std::vector<SendWr> wrs(5);
  for (size_t i = 0; i < wrs.size(); ++i) {
    wrs[i] = makeWr(i, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
    if (i > 0) wrs[i - 1].next = &wrs[i];
  }
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wrs[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &wrs[4]);
  EXPECT_EQ(p.a->outstanding(), 4u);
  auto wcs = pollN(*p.cq_a, 4);
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(p.a->outstanding(), 0u);
  EXPECT_EQ(p.a->postSend(&wrs[4], &bad), 0);  // room again
  EXPECT_EQ(pollN(*p.cq_a, 1).size(), 1u);
}

TEST_F(SoftQpTest, TooManySgesReturnsEinval) {
  auto p = QpPair::make(*dev_, *dev_, 4, /*max_sge=*/2);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sges[3] = {{src.addr(), 8, src.mr->lkey()},
                 {src.addr() + 8, 8, src.mr->lkey()},
                 {src.addr() + 16, 8, src.mr->lkey()}};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, sges, 3, dst.addr(), dst.mr->rkey());
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  wr.num_sge = 2;
  EXPECT_EQ(p.a->postSend(&wr, &bad), 0);
  EXPECT_EQ(pollN(*p.cq_a, 1).size(), 1u);
}

// CQ admission, as in our verbs provider: a QP is refused when the send queues of
// every QP on its CQ could overflow it (an overflowing CQ is fatal on a NIC).
TEST_F(SoftQpTest, AQpThatCouldOverflowItsCqIsRefused) {
  auto cq = std::move(dev_->createCq(16)).value();
  auto a = dev_->createQp({cq.get(), 8, 1});
  ASSERT_TRUE(a.ok());
  auto b = dev_->createQp({cq.get(), 8, 1});
  ASSERT_TRUE(b.ok());  // 16 of 16 reserved
  auto c = dev_->createQp({cq.get(), 1, 1});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("could overflow"), std::string::npos);
  a->reset();  // destroying a QP returns its reservation
  EXPECT_TRUE(dev_->createQp({cq.get(), 8, 1}).ok());
}

// With admission a CQ cannot overflow: every WR of every QP on it, completed at once
// and never polled, still fits.
TEST_F(SoftQpTest, AFullyAdmittedCqHoldsEveryCompletion) {
  auto p = QpPair::make(*dev_, *dev_, 4, 1, /*cq_depth=*/4);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
  for (int i = 0; i < 4; ++i) post(*p.a, wr);
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&wr, &bad), ENOMEM);  // the send queue is full first
  EXPECT_EQ(pollN(*p.cq_a, 4).size(), 4u);
}

TEST_F(SoftQpTest, UnsignaledWrsHoldTheirSlotUntilALaterSignaledOneIsPolled) {
  auto p = QpPair::make(*dev_, *dev_, /*max_send_wr=*/4);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  SendWr quiet = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey(), false);
  SendWr loud = makeWr(2, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey(), true);
  for (int i = 0; i < 3; ++i) post(*p.a, quiet);
  WorkCompletion wc[4];
  EXPECT_EQ(p.cq_a->poll(wc, 4), 0);
  EXPECT_EQ(p.a->outstanding(), 3u);  // completed, but their slots are not known to be free
  post(*p.a, loud);
  auto wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 2u);
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(SoftQpTest, CompletionsOfOneQpArriveInPostOrder) {
  auto p = QpPair::make(*dev_, *dev_, 64);
  GuardedBuffer src(*dev_, 1 << 16, kAllAccess), dst(*dev_, 1 << 16, kAllAccess);
  src.fill(3);
  std::vector<Sge> sges(32);
  std::vector<SendWr> wrs(32);
  for (uint32_t i = 0; i < 32; ++i) {
    const uint32_t len = (i % 2) ? 2048 : 64;  // mixed sizes
    sges[i] = {src.addr() + i * 2048, len, src.mr->lkey()};
    wrs[i] =
        makeWr(100 + i, WrOpcode::kRdmaWrite, &sges[i], 1, dst.addr() + i * 2048, dst.mr->rkey());
    if (i > 0) wrs[i - 1].next = &wrs[i];
  }
  const SendWr* bad = nullptr;
  ASSERT_EQ(p.a->postSend(&wrs[0], &bad), 0);
  auto wcs = pollN(*p.cq_a, 32);
  ASSERT_EQ(wcs.size(), 32u);
  for (uint32_t i = 0; i < 32; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 100 + i);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
    EXPECT_EQ(wcs[i].qp_num, p.a->qpNum());
    EXPECT_EQ(wcs[i].byte_len, sges[i].length);
    EXPECT_EQ(std::memcmp(dst.data() + i * 2048, src.data() + i * 2048, sges[i].length), 0);
  }
}

TEST_F(SoftQpTest, ModifyToErrorFlushesOutstandingWrs) {
  // A slow modeled link on an injected clock keeps WRs in flight.
  ManualClock clock;
  auto provider = makeProvider({softDevice("slow", 8, 1000)}, clock.clock());
  Device& dev = provider->device(0);
  auto p = QpPair::make(dev, dev, 16);
  GuardedBuffer src(dev, 4096, kAllAccess), dst(dev, 4096, kAllAccess);
  Sge sge{src.addr(), 4096, src.mr->lkey()};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
  post(*p.a, wr);  // visible at +4096 (bytes at 1 B/ns) + 1000
  clock.advance(5096);
  wr.wr_id = 2;
  post(*p.a, wr);
  wr.wr_id = 3;
  post(*p.a, wr);
  ASSERT_TRUE(p.a->modifyToError().ok());
  EXPECT_EQ(p.a->outstanding(), 3u);
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);  // its CQE was already in the CQ
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kFlushed);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  EXPECT_EQ(wcs[2].status, WcStatus::kFlushed);
  EXPECT_EQ(p.a->outstanding(), 0u);
}

TEST_F(SoftQpTest, AFailedWrMovesTheQpToErrorAndFlushesTheRestOfItsChain) {
  auto p = QpPair::make(*dev_, *dev_, 16);
  GuardedBuffer src(*dev_, 256, kAllAccess), dst(*dev_, 256, kAllAccess);
  src.fill(9);
  std::memset(dst.data(), 0, dst.length());
  Sge sges[3] = {{src.addr(), 64, src.mr->lkey()},
                 {src.addr() + 64, 64, src.mr->lkey()},
                 {src.addr() + 128, 64, src.mr->lkey()}};
  SendWr wrs[3] = {makeWr(1, WrOpcode::kRdmaWrite, &sges[0], 1, dst.addr(), dst.mr->rkey()),
                   makeWr(2, WrOpcode::kRdmaWrite, &sges[1], 1, dst.addr() + 64, 0xdead),
                   makeWr(3, WrOpcode::kRdmaWrite, &sges[2], 1, dst.addr() + 128, dst.mr->rkey())};
  wrs[0].next = &wrs[1];
  wrs[1].next = &wrs[2];
  const SendWr* bad = nullptr;
  ASSERT_EQ(p.a->postSend(&wrs[0], &bad), 0);
  auto wcs = pollN(*p.cq_a, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccess);
  EXPECT_EQ(wcs[2].status, WcStatus::kFlushed);
  EXPECT_EQ(p.a->state(), QpState::kError);
  EXPECT_TRUE(dst.holds(9, 0, 64));
  for (size_t i = 64; i < 256; ++i) ASSERT_EQ(dst.data()[i], 0) << i;  // WR 3 never ran
  EXPECT_EQ(p.a->postSend(&wrs[2], &bad), EINVAL);
}

TEST_F(SoftQpTest, ResponderQpNotReadyGivesRetryExceeded) {
  auto p = QpPair::make(*dev_, *dev_, 4, 1, 16, /*connect=*/false);
  ASSERT_TRUE(p.b->modifyToInit().ok());  // the responder stays in INIT
  ASSERT_TRUE(connectQp(*p.a, remoteOf(*p.b, *dev_)).ok());
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  auto wc = transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRetryExceeded);
  EXPECT_EQ(p.a->state(), QpState::kError);
}

TEST_F(SoftQpTest, ResponderQpDestroyedGivesRetryExceeded) {
  auto p = QpPair::make(*dev_, *dev_, 4);
  p.b.reset();
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  auto wc = transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRetryExceeded);
}

TEST_F(SoftQpTest, PosterAndPollerOnDifferentThreads) {
  constexpr uint64_t kWrs = 20000;
  auto p = QpPair::make(*dev_, *dev_, 8);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  src.fill(1);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  std::atomic<bool> poll_failed{false};
  std::vector<uint64_t> seen;
  seen.reserve(kWrs);
  std::thread poller([&] {
    WorkCompletion wc[8];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (seen.size() < kWrs && std::chrono::steady_clock::now() < deadline) {
      const int n = p.cq_a->poll(wc, 8);
      if (n < 0) {
        poll_failed = true;
        return;
      }
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != WcStatus::kSuccess) poll_failed = true;
        seen.push_back(wc[i].wr_id);
      }
      if (n == 0) std::this_thread::yield();
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (uint64_t i = 0; i < kWrs && std::chrono::steady_clock::now() < deadline;) {
    SendWr wr = makeWr(i, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
    const SendWr* bad = nullptr;
    const int rc = p.a->postSend(&wr, &bad);
    if (rc == ENOMEM) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(rc, 0);
    ++i;
  }
  poller.join();
  EXPECT_FALSE(poll_failed);
  ASSERT_EQ(seen.size(), kWrs);
  for (uint64_t i = 0; i < kWrs; ++i) ASSERT_EQ(seen[i], i);
  EXPECT_TRUE(dst.holds(1));
  EXPECT_EQ(p.a->outstanding(), 0u);
}

// The engine's direct CQ: the caller and the rail lcore poll it at the same time.
// Every completion must reach exactly one of them.
TEST_F(SoftQpTest, TwoPollersOfOneCqSeeEachCompletionExactlyOnce) {
  constexpr uint64_t kWrs = 20000;
  auto p = QpPair::make(*dev_, *dev_, 16);
  GuardedBuffer src(*dev_, 64, kAllAccess), dst(*dev_, 64, kAllAccess);
  Sge sge{src.addr(), 64, src.mr->lkey()};
  std::atomic<uint64_t> total{0};
  std::atomic<bool> failed{false};
  std::vector<uint64_t> got[2];
  auto pollerMain = [&](int me) {
    WorkCompletion wc[4];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (total.load() < kWrs && std::chrono::steady_clock::now() < deadline) {
      const int n = p.cq_a->poll(wc, 4);
      if (n < 0) failed = true;
      for (int i = 0; i < n; ++i) got[me].push_back(wc[i].wr_id);
      if (n > 0) total += static_cast<uint64_t>(n);
      if (n <= 0) std::this_thread::yield();
    }
  };
  std::thread t0(pollerMain, 0), t1(pollerMain, 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (uint64_t i = 0; i < kWrs && std::chrono::steady_clock::now() < deadline;) {
    SendWr wr = makeWr(i, WrOpcode::kRdmaWrite, &sge, 1, dst.addr(), dst.mr->rkey());
    const SendWr* bad = nullptr;
    const int rc = p.a->postSend(&wr, &bad);
    if (rc == 0) ++i;
    if (rc == ENOMEM) std::this_thread::yield();
    ASSERT_TRUE(rc == 0 || rc == ENOMEM) << rc;
  }
  t0.join();
  t1.join();
  EXPECT_FALSE(failed);
  std::vector<int> seen(kWrs, 0);
  for (const auto& v : got) {
    for (size_t i = 1; i < v.size(); ++i) EXPECT_LT(v[i - 1], v[i]);  // each poller: in order
    for (uint64_t id : v) ++seen[id];
  }
  for (uint64_t i = 0; i < kWrs; ++i) ASSERT_EQ(seen[i], 1) << "wr " << i;
}

// A peer on another kernel (another host) cannot be reached through shared memory:
// RTR refuses it, naming tcp. The boot tag is faked in the identity a peer sends.
TEST_F(SoftQpTest, APeerOnAnotherKernelIsRefusedNamingTcp) {
  auto p = QpPair::make(*dev_, *dev_, 4, 1, 16, /*connect=*/false);
  ASSERT_TRUE(p.b->modifyToInit().ok());
  QpRemote remote = remoteOf(*p.b, *dev_);
  EXPECT_EQ(remote.port.lid, bootTag());
  remote.port.lid = static_cast<uint16_t>(bootTag() % 65535 + 1);  // another, never 0
  Status s = connectQp(*p.a, remote);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
  EXPECT_NE(s.message().find("runs on another kernel"), std::string::npos) << s.toString();
  EXPECT_NE(s.message().find("fabric.provider: tcp"), std::string::npos) << s.toString();
  EXPECT_NE(p.a->state(), QpState::kRts);
  remote.port.lid = bootTag();  // the same peer on this kernel connects
  ASSERT_TRUE(p.a->state() == QpState::kInit || p.a->modifyToInit().ok());
  EXPECT_TRUE(p.a->modifyToRtr(remote).ok());
}

TEST(SoftBootTag, FoldsTheBootIdAndIsNeverZero) {
  EXPECT_NE(bootTag(), 0);
  EXPECT_EQ(bootTagOf("0b7e6c38-5b3e-4b8b-9a3e-8f3c1d2e4f50\n"),
            bootTagOf("0b7e6c38-5b3e-4b8b-9a3e-8f3c1d2e4f50"));
  EXPECT_NE(bootTagOf("0b7e6c38-5b3e-4b8b-9a3e-8f3c1d2e4f50"),
            bootTagOf("1b7e6c38-5b3e-4b8b-9a3e-8f3c1d2e4f50"));
}

}  // namespace
}  // namespace tent::fabric::soft::testing
