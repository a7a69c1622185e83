// tcp provider: WRITE and READ between two providers in one process over 127.0.0.1,
// every byte verified, the bytes around every region untouched.
#include <numeric>

#include "tcp_test_util.h"

namespace tent::fabric::tcp::testing {
namespace {

class TcpTransferTest : public ::testing::Test {
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

TEST_F(TcpTransferTest, TheDefaultDeviceListensOnLoopbackAndAdvertisesItsPort) {
  EXPECT_EQ(pa_->name(), "tcp");
  EXPECT_EQ(a_->info().name, "tcp0");
  const PortIdentity id = a_->portIdentity();
  const std::array<uint8_t, 16> v4mapped_loopback = {0, 0, 0,    0,    0,   0, 0, 0,
                                                     0, 0, 0xff, 0xff, 127, 0, 0, 1};
  EXPECT_EQ(id.gid, v4mapped_loopback);
  EXPECT_NE(id.lid, 0);
  EXPECT_NE(a_->portIdentity(), b_->portIdentity());  // two listeners, two ports
  EXPECT_NE(pa_->linkModel().find("tcp0 127.0.0.1:" + std::to_string(id.lid)), std::string::npos)
      << pa_->linkModel();
}

struct SizeCase {
  size_t bytes;
  uint32_t sges;
};

class TcpSizes : public TcpTransferTest, public ::testing::WithParamInterface<SizeCase> {};

TEST_P(TcpSizes, WriteThenReadBackEveryByte) {
  const SizeCase c = GetParam();
  auto p = QpPair::make(*a_, *b_, 16, 4);
  GuardedBuffer src(*a_, c.bytes, kAllAccess);
  GuardedBuffer dst(*b_, c.bytes, kAllAccess);
  GuardedBuffer back(*a_, c.bytes, kAllAccess);
  src.fill(11);
  dst.clear();
  back.clear();
  // WRITE src -> dst in `sges` pieces of one WR.
  std::vector<Sge> sges;
  const size_t piece = c.bytes / c.sges;
  for (uint32_t i = 0; i < c.sges; ++i) {
    const size_t len = i + 1 == c.sges ? c.bytes - piece * i : piece;
    sges.push_back(Sge{src.addr() + piece * i, static_cast<uint32_t>(len), src.mr->lkey()});
  }
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, sges.data(), c.sges, dst.addr(), dst.mr->rkey());
  post(*p.a, wr);
  auto wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].opcode, WrOpcode::kRdmaWrite);
  EXPECT_EQ(wcs[0].qp_num, p.a->qpNum());
  EXPECT_TRUE(dst.holds(11)) << "the WRITE completed before the bytes were placed";
  EXPECT_TRUE(dst.canariesIntact());
  // READ dst -> back, again in pieces.
  for (uint32_t i = 0; i < c.sges; ++i) {
    sges[i].addr = back.addr() + piece * i;
    sges[i].lkey = back.mr->lkey();
  }
  wr = makeWr(2, WrOpcode::kRdmaRead, sges.data(), c.sges, dst.addr(), dst.mr->rkey());
  post(*p.a, wr);
  wcs = pollN(*p.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess) << toString(wcs[0].status);
  EXPECT_EQ(wcs[0].opcode, WrOpcode::kRdmaRead);
  EXPECT_EQ(wcs[0].byte_len, c.bytes);
  EXPECT_TRUE(back.holds(11)) << "the READ completed before the bytes were in local memory";
  EXPECT_TRUE(back.canariesIntact());
  EXPECT_EQ(p.a->outstanding(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Sizes, TcpSizes,
                         ::testing::Values(SizeCase{8, 1}, SizeCase{4096, 1}, SizeCase{4096, 4},
                                           SizeCase{1 << 20, 3}, SizeCase{64u << 20, 1},
                                           SizeCase{64u << 20, 4}),
                         [](const auto& info) {
                           return std::to_string(info.param.bytes) + "B_" +
                                  std::to_string(info.param.sges) + "sge";
                         });

TEST_F(TcpTransferTest, ZeroLengthWritesAndReadsSucceedWithoutAnRkeyCheck) {
  auto p = QpPair::make(*a_, *b_);
  SendWr w = makeWr(1, WrOpcode::kRdmaWrite, nullptr, 0, 0, 0xdead);
  SendWr r = makeWr(2, WrOpcode::kRdmaRead, nullptr, 0, 0, 0xdead);
  w.next = &r;
  post(*p.a, w);
  auto wcs = pollN(*p.cq_a, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
}

TEST_F(TcpTransferTest, BothSidesOfOneQpPairPostAndServe) {
  auto p = QpPair::make(*a_, *b_);
  GuardedBuffer on_a(*a_, 8192, kAllAccess), on_b(*b_, 8192, kAllAccess);
  GuardedBuffer from_a(*a_, 8192, kAllAccess), from_b(*b_, 8192, kAllAccess);
  from_a.fill(3);
  from_b.fill(4);
  on_a.clear();
  on_b.clear();
  Sge sa{from_a.addr(), 8192, from_a.mr->lkey()};
  Sge sb{from_b.addr(), 8192, from_b.mr->lkey()};
  post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, &sa, 1, on_b.addr(), on_b.mr->rkey()));
  post(*p.b, makeWr(2, WrOpcode::kRdmaWrite, &sb, 1, on_a.addr(), on_a.mr->rkey()));
  auto wa = pollN(*p.cq_a, 1);
  auto wb = pollN(*p.cq_b, 1);
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  EXPECT_EQ(wa[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wb[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(on_b.holds(3));
  EXPECT_TRUE(on_a.holds(4));
}

// Posts before the peer's QP is RTR wait in the send queue; whichever side reaches RTR
// first, and whichever side connects (the two directions give the two roles), they
// complete once both are.
TEST_F(TcpTransferTest, PostsBeforeThePeerIsReadyWaitAndCompleteEitherOrder) {
  for (int peer_first = 0; peer_first < 2; ++peer_first) {
    for (int dir = 0; dir < 2; ++dir) {
      Device& from = dir ? *b_ : *a_;
      Device& to = dir ? *a_ : *b_;
      const auto seed = static_cast<uint8_t>(20 + 2 * peer_first + dir);
      auto p = QpPair::make(from, to, 16, 1, 64, /*connect=*/false);
      GuardedBuffer src(from, 4096, kAllAccess), dst(to, 4096, kAllAccess);
      src.fill(seed);
      dst.clear();
      if (peer_first) {
        ASSERT_TRUE(connectQp(*p.b, remoteOf(*p.a, from)).ok());
      }
      ASSERT_TRUE(connectQp(*p.a, remoteOf(*p.b, to)).ok());
      Sge s{src.addr(), 4096, src.mr->lkey()};
      for (uint64_t i = 0; i < 8; ++i) {
        post(*p.a, makeWr(i, WrOpcode::kRdmaWrite, &s, 1, dst.addr(), dst.mr->rkey()));
      }
      if (!peer_first) {
        // Nothing can complete before the peer QP is RTR.
        WorkCompletion wc[8];
        EXPECT_EQ(p.cq_a->poll(wc, 8), 0);
        ASSERT_TRUE(connectQp(*p.b, remoteOf(*p.a, from)).ok());
      }
      auto wcs = pollN(*p.cq_a, 8);
      ASSERT_EQ(wcs.size(), 8u) << "peer_first=" << peer_first << " dir=" << dir;
      for (uint64_t i = 0; i < 8; ++i) {
        EXPECT_EQ(wcs[i].wr_id, i);
        EXPECT_EQ(wcs[i].status, WcStatus::kSuccess) << toString(wcs[i].status);
      }
      EXPECT_TRUE(dst.holds(seed));
    }
  }
}

TEST_F(TcpTransferTest, CompletionsOfOneQpArriveInPostOrderUnderManyOutstandingWrs) {
  constexpr uint32_t kDepth = 128;
  constexpr uint64_t kWrs = 3000;
  auto p = QpPair::make(*a_, *b_, kDepth, 2, 4 * kDepth);
  GuardedBuffer src(*a_, 1 << 20, kAllAccess), dst(*b_, 1 << 20, kAllAccess);
  GuardedBuffer back(*a_, 1 << 20, kAllAccess);
  src.fill(9);
  dst.clear();
  uint64_t posted = 0, next = 0;
  while (next < kWrs) {
    while (posted < kWrs && p.a->outstanding() < kDepth) {
      // Sizes from 1 byte to 64 KiB, WRITEs and READs mixed, at varying offsets.
      const uint32_t len = 1 + static_cast<uint32_t>((posted * 7919) % 65536);
      const uint64_t off = (posted * 4093) % ((1 << 20) - 65536);
      const bool write = (posted % 3) != 2;
      Sge s{(write ? src.addr() : back.addr()) + off, len,
            write ? src.mr->lkey() : back.mr->lkey()};
      post(*p.a, makeWr(posted, write ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead, &s, 1,
                        dst.addr() + off, dst.mr->rkey(), posted % 5 != 1));
      ++posted;
    }
    WorkCompletion wc[32];
    const int n = p.cq_a->poll(wc, 32);
    ASSERT_GE(n, 0);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(wc[i].status, WcStatus::kSuccess) << toString(wc[i].status);
      ASSERT_GE(wc[i].wr_id, next) << "completions out of order";
      next = wc[i].wr_id + 1;
    }
    if (n == 0) std::this_thread::yield();
    if (posted == kWrs && next < kWrs && p.a->outstanding() == 0) break;
  }
  // The last WR may be unsignaled: then the count of outstanding WRs shows it finished.
  EXPECT_TRUE(waitFor([&] { return next >= kWrs - 1; }));
  EXPECT_TRUE(dst.canariesIntact());
  EXPECT_TRUE(back.canariesIntact());
}

TEST_F(TcpTransferTest, ManyQpsAtOnceEachWithItsOwnConnection) {
  constexpr int kQps = 48;
  auto cq_a = std::move(a_->createCq(kQps * 8)).value();
  auto cq_b = std::move(b_->createCq(kQps * 8)).value();
  std::vector<std::unique_ptr<QueuePair>> qa, qb;
  for (int i = 0; i < kQps; ++i) {
    qa.push_back(std::move(a_->createQp({cq_a.get(), 8, 1})).value());
    qb.push_back(std::move(b_->createQp({cq_b.get(), 8, 1})).value());
  }
  for (int i = 0; i < kQps; ++i) {
    ASSERT_TRUE(connectQp(*qa[i], remoteOf(*qb[i], *b_)).ok());
    ASSERT_TRUE(connectQp(*qb[i], remoteOf(*qa[i], *a_)).ok());
  }
  constexpr size_t kChunk = 64 << 10;
  GuardedBuffer src(*a_, kChunk * kQps, kAllAccess), dst(*b_, kChunk * kQps, kAllAccess);
  src.fill(77);
  dst.clear();
  std::vector<Sge> sges(kQps);
  for (int i = 0; i < kQps; ++i) {
    sges[i] = Sge{src.addr() + kChunk * i, static_cast<uint32_t>(kChunk), src.mr->lkey()};
    post(*qa[i], makeWr(static_cast<uint64_t>(i), WrOpcode::kRdmaWrite, &sges[i], 1,
                        dst.addr() + kChunk * i, dst.mr->rkey()));
  }
  auto wcs = pollN(*cq_a, kQps);
  ASSERT_EQ(wcs.size(), static_cast<size_t>(kQps));
  for (const auto& wc : wcs) EXPECT_EQ(wc.status, WcStatus::kSuccess) << toString(wc.status);
  EXPECT_TRUE(dst.holds(77));
}

}  // namespace
}  // namespace tent::fabric::tcp::testing
