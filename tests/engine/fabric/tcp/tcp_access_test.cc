// tcp provider: the responder checks rkey, bounds and access against its own MR table
// at every WR (a bad access is kRemoteAccess and moves no byte); the requester checks
// its local SGEs as a NIC does. Same rules and statuses as soft (rc_rules.h).
#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

class TcpAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pa_ = makeProvider();
    pb_ = makeProvider();
    ASSERT_NE(pa_, nullptr);
    ASSERT_NE(pb_, nullptr);
    a_ = &pa_->device(0);
    b_ = &pb_->device(0);
  }
  // A fresh connected pair for each access (an error moves the QP to ERR).
  WorkCompletion once(WrOpcode op, GuardedBuffer& local, uint64_t remote_addr, uint32_t rkey,
                      size_t length) {
    auto p = QpPair::make(*a_, *b_);
    return transferOne(p, op, local, remote_addr, rkey, length);
  }
  std::unique_ptr<Provider> pa_, pb_;
  Device* a_ = nullptr;
  Device* b_ = nullptr;
};

TEST_F(TcpAccessTest, WritePastTheRegionEndIsARemoteAccessErrorAndWritesNothing) {
  GuardedBuffer src(*a_, 8192, kAllAccess), dst(*b_, 4096, kAllAccess);
  src.fill(1);
  dst.clear(0x5a);
  const WorkCompletion wc = once(WrOpcode::kRdmaWrite, src, dst.addr() + 1, dst.mr->rkey(), 4096);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess) << toString(wc.status);
  EXPECT_TRUE(dst.allEqual(0x5a)) << "a refused WRITE placed bytes inside the region";
  EXPECT_TRUE(dst.canariesIntact()) << "a refused WRITE placed bytes outside the region";
}

TEST_F(TcpAccessTest, AccessBelowTheRegionStartIsARemoteAccessError) {
  GuardedBuffer src(*a_, 4096, kAllAccess), dst(*b_, 4096, kAllAccess);
  dst.clear(0x5a);
  EXPECT_EQ(once(WrOpcode::kRdmaWrite, src, dst.addr() - 8, dst.mr->rkey(), 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_EQ(once(WrOpcode::kRdmaRead, src, dst.addr() - 8, dst.mr->rkey(), 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_TRUE(dst.allEqual(0x5a));
  EXPECT_TRUE(dst.canariesIntact());
}

TEST_F(TcpAccessTest, ReadPastTheRegionEndIsARemoteAccessErrorAndReadsNothing) {
  GuardedBuffer back(*a_, 8192, kAllAccess), src(*b_, 4096, kAllAccess);
  src.fill(2);
  back.clear(0x33);
  EXPECT_EQ(once(WrOpcode::kRdmaRead, back, src.addr() + 4000, src.mr->rkey(), 200).status,
            WcStatus::kRemoteAccess);
  EXPECT_TRUE(back.allEqual(0x33));
  EXPECT_TRUE(back.canariesIntact());
}

TEST_F(TcpAccessTest, UnknownRkeyIsARemoteAccessError) {
  GuardedBuffer src(*a_, 4096, kAllAccess), dst(*b_, 4096, kAllAccess);
  dst.clear(0x11);
  EXPECT_EQ(once(WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey() ^ 0x10000, 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_EQ(once(WrOpcode::kRdmaRead, src, dst.addr(), 0, 64).status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(dst.allEqual(0x11));
}

TEST_F(TcpAccessTest, AccessFlagsAreEnforcedByTheResponder) {
  GuardedBuffer local(*a_, 4096, kAllAccess);
  local.fill(5);
  GuardedBuffer read_only(*b_, 4096, kAccessRemoteRead);
  GuardedBuffer write_only(*b_, 4096, kAccessLocalWrite | kAccessRemoteWrite);
  GuardedBuffer local_only(*b_, 4096, kAccessLocalWrite);
  read_only.clear(0x44);
  EXPECT_EQ(once(WrOpcode::kRdmaWrite, local, read_only.addr(), read_only.mr->rkey(), 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_TRUE(read_only.allEqual(0x44));
  EXPECT_EQ(once(WrOpcode::kRdmaRead, local, write_only.addr(), write_only.mr->rkey(), 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_EQ(once(WrOpcode::kRdmaWrite, local, local_only.addr(), local_only.mr->rkey(), 64).status,
            WcStatus::kRemoteAccess);
  EXPECT_EQ(once(WrOpcode::kRdmaRead, local, read_only.addr(), read_only.mr->rkey(), 64).status,
            WcStatus::kSuccess);
  EXPECT_EQ(once(WrOpcode::kRdmaWrite, local, write_only.addr(), write_only.mr->rkey(), 64).status,
            WcStatus::kSuccess);
}

TEST_F(TcpAccessTest, DeregistrationTakesEffectAtOnceAndStaleKeysStayInvalid) {
  auto p = QpPair::make(*a_, *b_);
  GuardedBuffer src(*a_, 4096, kAllAccess);
  src.fill(6);
  std::vector<uint8_t> target(4096, 0x77);
  auto mr = std::move(b_->registerMemory(target.data(), target.size(), kAllAccess)).value();
  const uint32_t stale = mr->rkey();
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, reinterpret_cast<uint64_t>(target.data()),
                        stale, 4096)
                .status,
            WcStatus::kSuccess);
  mr.reset();  // from here on, no peer's access to it may succeed
  std::fill(target.begin(), target.end(), 0x77);
  auto p2 = QpPair::make(*a_, *b_);
  EXPECT_EQ(transferOne(p2, WrOpcode::kRdmaWrite, src, reinterpret_cast<uint64_t>(target.data()),
                        stale, 4096)
                .status,
            WcStatus::kRemoteAccess);
  // The same memory registered again gets a new key; the old one stays refused.
  auto again = std::move(b_->registerMemory(target.data(), target.size(), kAllAccess)).value();
  EXPECT_NE(again->rkey(), stale);
  auto p3 = QpPair::make(*a_, *b_);
  EXPECT_EQ(transferOne(p3, WrOpcode::kRdmaWrite, src, reinterpret_cast<uint64_t>(target.data()),
                        stale, 4096)
                .status,
            WcStatus::kRemoteAccess);
  EXPECT_TRUE(std::all_of(target.begin(), target.end(), [](uint8_t b) { return b == 0x77; }));
}

TEST_F(TcpAccessTest, ARemoteAccessErrorMovesTheQpToErrorAndFlushesWhatFollows) {
  auto p = QpPair::make(*a_, *b_);
  GuardedBuffer src(*a_, 4096, kAllAccess), dst(*b_, 4096, kAllAccess);
  Sge s{src.addr(), 64, src.mr->lkey()};
  SendWr ok = makeWr(1, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey());
  SendWr bad = makeWr(2, WrOpcode::kRdmaWrite, &s, 1, dst.addr() + 4090, dst.mr->rkey(), false);
  SendWr after = makeWr(3, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey(), false);
  ok.next = &bad;
  bad.next = &after;
  post(*p.a, ok);
  auto wcs = pollN(*p.cq_a, 3);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].wr_id, 2u);  // unsignaled, but errors always complete
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccess);
  EXPECT_EQ(wcs[1].opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(wcs[2].wr_id, 3u);
  EXPECT_EQ(wcs[2].status, WcStatus::kFlushed);
  EXPECT_EQ(p.a->state(), QpState::kError);
  const SendWr* bad_wr = nullptr;
  EXPECT_EQ(p.a->postSend(&ok, &bad_wr), EINVAL);
  EXPECT_EQ(bad_wr, &ok);
}

TEST_F(TcpAccessTest, LocalKeyAndBoundsAreChecked) {
  auto p = QpPair::make(*a_, *b_);
  GuardedBuffer src(*a_, 4096, kAllAccess), dst(*b_, 4096, kAllAccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 4097).status,
            WcStatus::kLocalProtection);
  auto p2 = QpPair::make(*a_, *b_);
  Sge s{src.addr(), 64, src.mr->lkey() ^ 0x10000};
  post(*p2.a, makeWr(7, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey()));
  auto wcs = pollN(*p2.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalProtection);
  EXPECT_EQ(p2.a->state(), QpState::kError);
}

TEST_F(TcpAccessTest, ReadIntoARegionWithoutLocalWriteIsALocalProtectionError) {
  auto p = QpPair::make(*a_, *b_);
  GuardedBuffer back(*a_, 4096, kAccessRemoteRead), src(*b_, 4096, kAllAccess);
  back.clear(0x21);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaRead, back, src.addr(), src.mr->rkey(), 64).status,
            WcStatus::kLocalProtection);
  EXPECT_TRUE(back.allEqual(0x21));
}

TEST_F(TcpAccessTest, MessagesLongerThanTheLimitAreALocalLengthError) {
  config::TcpFabricConfig cfg = testConfig();
  cfg.max_message_bytes = 4096;
  auto small = makeProvider(cfg);
  ASSERT_NE(small, nullptr);
  Device& s = small->device(0);
  EXPECT_EQ(s.info().max_message_bytes, 4096u);
  auto p = QpPair::make(s, *b_);
  GuardedBuffer src(s, 8192, kAllAccess), dst(*b_, 8192, kAllAccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 4096).status,
            WcStatus::kSuccess);
  EXPECT_EQ(transferOne(p, WrOpcode::kRdmaWrite, src, dst.addr(), dst.mr->rkey(), 4097).status,
            WcStatus::kLocalLength);
}

// A local error at post time: the WRs before it complete normally, it completes with its
// error, the rest of its chain is flushed, and the QP is in ERR at once - also when the
// chain is posted before the peer reached RTR, whichever side of the connection the
// posting QP takes (the two directions give the two roles).
TEST_F(TcpAccessTest, ALocalErrorLetsEarlierWrsFinishThenFlushesTheRest) {
  for (int posted_early = 0; posted_early < 2; ++posted_early) {
    for (int dir = 0; dir < 2; ++dir) {
      Device& from = dir ? *b_ : *a_;
      Device& to = dir ? *a_ : *b_;
      auto p = QpPair::make(from, to, 16, 1, 64, /*connect=*/false);
      if (!posted_early) {
        ASSERT_TRUE(connectQp(*p.b, remoteOf(*p.a, from)).ok());
      }
      ASSERT_TRUE(connectQp(*p.a, remoteOf(*p.b, to)).ok());
      GuardedBuffer src(from, 1 << 20, kAllAccess), dst(to, 1 << 20, kAllAccess);
      src.fill(8);
      dst.clear();
      Sge big{src.addr(), 1 << 20, src.mr->lkey()};
      Sge wrong{src.addr(), 64, 0};
      SendWr w1 = makeWr(1, WrOpcode::kRdmaWrite, &big, 1, dst.addr(), dst.mr->rkey());
      SendWr w2 = makeWr(2, WrOpcode::kRdmaWrite, &wrong, 1, dst.addr(), dst.mr->rkey());
      SendWr w3 = makeWr(3, WrOpcode::kRdmaWrite, &big, 1, dst.addr(), dst.mr->rkey());
      w1.next = &w2;
      w2.next = &w3;
      post(*p.a, w1);
      EXPECT_EQ(p.a->state(), QpState::kError);
      if (posted_early) {
        ASSERT_TRUE(connectQp(*p.b, remoteOf(*p.a, from)).ok());
      }
      auto wcs = pollN(*p.cq_a, 3);
      ASSERT_EQ(wcs.size(), 3u) << "posted_early=" << posted_early << " dir=" << dir;
      EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
      EXPECT_EQ(wcs[1].status, WcStatus::kLocalProtection);
      EXPECT_EQ(wcs[2].status, WcStatus::kFlushed);
      EXPECT_TRUE(dst.holds(8)) << "posted_early=" << posted_early << " dir=" << dir;
    }
  }
}

TEST_F(TcpAccessTest, RegistrationRejectsBadArguments) {
  std::vector<uint8_t> buf(64);
  EXPECT_FALSE(a_->registerMemory(nullptr, 64, kAllAccess).ok());
  EXPECT_FALSE(a_->registerMemory(buf.data(), 0, kAllAccess).ok());
  EXPECT_FALSE(a_->registerMemory(buf.data(), 64, 1u << 7).ok());
  EXPECT_FALSE(a_->registerMemory(buf.data(), 64, kAccessRemoteWrite).ok());
}

TEST(TcpLimits, MaxMrsIsEnforcedAndSlotsAreReused) {
  config::TcpFabricConfig cfg = testConfig();
  cfg.max_mrs = 3;
  auto p = makeProvider(cfg);
  ASSERT_NE(p, nullptr);
  std::vector<uint8_t> buf(64);
  std::vector<std::unique_ptr<MemoryRegion>> mrs;
  for (int i = 0; i < 3; ++i) {
    mrs.push_back(std::move(p->device(0).registerMemory(buf.data(), 64, kAllAccess)).value());
  }
  auto fourth = p->device(0).registerMemory(buf.data(), 64, kAllAccess);
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), StatusCode::kResourceExhausted);
  const uint32_t old = mrs[1]->rkey();
  mrs[1].reset();
  auto again = p->device(0).registerMemory(buf.data(), 64, kAllAccess);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->rkey(), old);
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
