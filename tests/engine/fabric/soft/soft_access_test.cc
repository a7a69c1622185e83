// Soft provider: memory protection. Every violation completes with the verbs status
// a NIC gives and touches no byte outside the region (canaries on both sides).
#include <sys/mman.h>

#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

class SoftAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    provider_ = makeProvider({softDevice("soft0")});
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
    pair_ = QpPair::make(*dev_, *dev_, 16, 4);
  }
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  QpPair pair_;
};

TEST_F(SoftAccessTest, WriteAndReadWithSeveralSges) {
  GuardedBuffer local(*dev_, 4096, kAllAccess), remote(*dev_, 4096, kAllAccess);
  local.fill(11);
  Sge sges[3] = {{local.addr(), 1000, local.mr->lkey()},
                 {local.addr() + 1000, 24, local.mr->lkey()},
                 {local.addr() + 1024, 3072, local.mr->lkey()}};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, sges, 3, remote.addr(), remote.mr->rkey());
  post(*pair_.a, wr);
  auto wcs = pollN(*pair_.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 4096u);
  EXPECT_TRUE(remote.holds(11));
  remote.fill(77);
  wr.opcode = WrOpcode::kRdmaRead;
  post(*pair_.a, wr);
  wcs = pollN(*pair_.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WrOpcode::kRdmaRead);
  EXPECT_TRUE(local.holds(77));
  EXPECT_TRUE(local.canariesIntact());
  EXPECT_TRUE(remote.canariesIntact());
}

TEST_F(SoftAccessTest, ZeroLengthWriteSucceeds) {
  GuardedBuffer remote(*dev_, 64, kAllAccess);
  SendWr wr = makeWr(5, WrOpcode::kRdmaWrite, nullptr, 0, remote.addr(), remote.mr->rkey());
  post(*pair_.a, wr);
  auto wcs = pollN(*pair_.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].byte_len, 0u);
}

TEST_F(SoftAccessTest, WritePastTheRegionEndIsARemoteAccessError) {
  GuardedBuffer local(*dev_, 4096, kAllAccess), remote(*dev_, 4096, kAllAccess);
  local.fill(1);
  remote.fill(2);
  // 20 bytes starting 10 bytes before the end of the remote region.
  Sge sge{local.addr(), 20, local.mr->lkey()};
  SendWr wr = makeWr(1, WrOpcode::kRdmaWrite, &sge, 1, remote.addr() + 4086, remote.mr->rkey());
  post(*pair_.a, wr);
  auto wcs = pollN(*pair_.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(remote.holds(2));  // not even the in-range part was written
  EXPECT_TRUE(remote.canariesIntact());
}

TEST_F(SoftAccessTest, AccessBelowTheRegionStartIsARemoteAccessError) {
  GuardedBuffer local(*dev_, 64, kAllAccess), remote(*dev_, 4096, kAllAccess);
  auto wc =
      transferOne(pair_, WrOpcode::kRdmaWrite, local, remote.addr() - 16, remote.mr->rkey(), 32);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(remote.canariesIntact());
}

TEST_F(SoftAccessTest, ReadPastTheRegionEndIsARemoteAccessErrorAndReadsNothing) {
  GuardedBuffer local(*dev_, 128, kAllAccess), remote(*dev_, 64, kAllAccess);
  local.fill(5);
  auto wc = transferOne(pair_, WrOpcode::kRdmaRead, local, remote.addr(), remote.mr->rkey(), 128);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(local.holds(5));
  EXPECT_TRUE(local.canariesIntact());
}

TEST_F(SoftAccessTest, AccessFlagsAreEnforced) {
  GuardedBuffer local(*dev_, 64, kAllAccess);
  GuardedBuffer read_only(*dev_, 64, kAccessLocalWrite | kAccessRemoteRead);
  GuardedBuffer write_only(*dev_, 64, kAccessLocalWrite | kAccessRemoteWrite);
  read_only.fill(3);
  local.fill(4);
  auto wc =
      transferOne(pair_, WrOpcode::kRdmaWrite, local, read_only.addr(), read_only.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(read_only.holds(3));

  auto fresh = QpPair::make(*dev_, *dev_, 16, 4);
  wc = transferOne(fresh, WrOpcode::kRdmaRead, local, write_only.addr(), write_only.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(local.holds(4));

  auto again = QpPair::make(*dev_, *dev_, 16, 4);
  wc = transferOne(again, WrOpcode::kRdmaRead, local, read_only.addr(), read_only.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_TRUE(local.holds(3));
}

TEST_F(SoftAccessTest, UnknownRkeyIsARemoteAccessError) {
  GuardedBuffer local(*dev_, 64, kAllAccess), remote(*dev_, 64, kAllAccess);
  remote.fill(8);
  auto wc = transferOne(pair_, WrOpcode::kRdmaWrite, local, remote.addr(),
                        remote.mr->rkey() ^ 0x10000, 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(remote.holds(8));
}

TEST_F(SoftAccessTest, DeregistrationTakesEffectAtOnceAndStaleKeysStayInvalid) {
  GuardedBuffer local(*dev_, 64, kAllAccess), remote(*dev_, 64, kAllAccess);
  remote.fill(6);
  const uint32_t old_rkey = remote.mr->rkey();
  remote.mr.reset();  // deregister
  auto wc = transferOne(pair_, WrOpcode::kRdmaWrite, local, remote.addr(), old_rkey, 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(remote.holds(6));

  // Re-registering reuses the slot with a new generation: the old key stays dead.
  auto again = std::move(dev_->registerMemory(remote.data(), 64, kAllAccess)).value();
  EXPECT_NE(again->rkey(), old_rkey);
  auto fresh = QpPair::make(*dev_, *dev_, 16, 4);
  wc = transferOne(fresh, WrOpcode::kRdmaWrite, local, remote.addr(), old_rkey, 64);
  EXPECT_EQ(wc.status, WcStatus::kRemoteAccess);
  EXPECT_TRUE(remote.holds(6));
  auto third = QpPair::make(*dev_, *dev_, 16, 4);
  local.fill(1);
  wc = transferOne(third, WrOpcode::kRdmaWrite, local, remote.addr(), again->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_TRUE(remote.holds(1));
}

TEST_F(SoftAccessTest, LocalKeyAndBoundsAreChecked) {
  GuardedBuffer local(*dev_, 64, kAllAccess), remote(*dev_, 64, kAllAccess);
  remote.fill(2);
  Sge bad_key{local.addr(), 64, local.mr->lkey() + 1};
  post(*pair_.a, makeWr(1, WrOpcode::kRdmaWrite, &bad_key, 1, remote.addr(), remote.mr->rkey()));
  auto wcs = pollN(*pair_.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalProtection);

  auto p2 = QpPair::make(*dev_, *dev_, 16, 4);
  Sge too_long{local.addr() + 8, 64, local.mr->lkey()};
  post(*p2.a, makeWr(2, WrOpcode::kRdmaWrite, &too_long, 1, remote.addr(), remote.mr->rkey()));
  wcs = pollN(*p2.cq_a, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kLocalProtection);
  EXPECT_TRUE(remote.holds(2));
}

TEST_F(SoftAccessTest, ReadIntoARegionWithoutLocalWriteIsALocalProtectionError) {
  GuardedBuffer local(*dev_, 64, kAccessRemoteRead), remote(*dev_, 64, kAllAccess);
  local.fill(3);
  remote.fill(4);
  auto wc = transferOne(pair_, WrOpcode::kRdmaRead, local, remote.addr(), remote.mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kLocalProtection);
  EXPECT_TRUE(local.holds(3));
}

TEST_F(SoftAccessTest, MessagesOverTwoGibAreALocalLengthError) {
  constexpr size_t kGib = size_t{1} << 30;
  // Address space only: the check fails before any byte would be touched.
  void* space =
      mmap(nullptr, 3 * kGib, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(space, MAP_FAILED);
  {
    auto mr = std::move(dev_->registerMemory(space, 3 * kGib, kAllAccess)).value();
    GuardedBuffer remote(*dev_, 64, kAllAccess);
    const uint64_t base = reinterpret_cast<uint64_t>(space);
    Sge sges[3] = {{base, uint32_t(kGib), mr->lkey()},
                   {base + kGib, uint32_t(kGib), mr->lkey()},
                   {base + 2 * kGib, 16, mr->lkey()}};
    post(*pair_.a, makeWr(1, WrOpcode::kRdmaWrite, sges, 3, remote.addr(), remote.mr->rkey()));
    auto wcs = pollN(*pair_.cq_a, 1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::kLocalLength);
  }
  munmap(space, 3 * kGib);
}

TEST_F(SoftAccessTest, RegistrationRejectsBadArguments) {
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(dev_->registerMemory(nullptr, 64, kAllAccess).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->registerMemory(buf.data(), 0, kAllAccess).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->registerMemory(buf.data(), 64, 1u << 10).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(dev_->registerMemory(buf.data(), 64, kAccessRemoteWrite).status().code(),
            StatusCode::kInvalidArgument);  // verbs needs LOCAL_WRITE with REMOTE_WRITE
}

TEST(SoftLimits, MaxMrsIsEnforcedAndSlotsAreReused) {
  auto cfg = testConfig();
  cfg.max_mrs = 2;
  auto provider = makeProvider({softDevice("soft0")}, {}, cfg);
  ASSERT_NE(provider, nullptr);
  Device& dev = provider->device(0);
  std::vector<uint8_t> buf(64);
  auto a = std::move(dev.registerMemory(buf.data(), 64, kAllAccess)).value();
  auto b = std::move(dev.registerMemory(buf.data(), 32, kAllAccess)).value();
  EXPECT_EQ(dev.registerMemory(buf.data(), 16, kAllAccess).status().code(),
            StatusCode::kResourceExhausted);
  a.reset();
  EXPECT_TRUE(dev.registerMemory(buf.data(), 16, kAllAccess).ok());
}

// fabric.soft.copy_payload: false (a benchmark option): WRs are checked and complete
// as before, no byte moves, and the link model says so.
TEST(SoftNoCopy, WrsCompleteWithEveryCheckButMoveNoBytes) {
  config::SoftFabricConfig cfg = testConfig();
  cfg.copy_payload = false;
  auto provider = makeProvider({softDevice("soft0")}, {}, cfg);
  ASSERT_NE(provider, nullptr);
  EXPECT_NE(provider->linkModel().find("payload=not-copied"), std::string::npos)
      << provider->linkModel();
  Device& dev = provider->device(0);
  auto pair = QpPair::make(dev, dev);
  GuardedBuffer local(dev, 4096, kAllAccess), remote(dev, 4096, kAllAccess);
  local.fill(1);
  remote.fill(2);
  auto ok = transferOne(pair, WrOpcode::kRdmaWrite, local, remote.addr(), remote.mr->rkey(), 4096);
  EXPECT_EQ(ok.status, WcStatus::kSuccess);
  EXPECT_EQ(ok.byte_len, 4096u);
  EXPECT_TRUE(remote.holds(2)) << "no byte moved";
  auto bad =
      transferOne(pair, WrOpcode::kRdmaWrite, local, remote.addr() + 4000, remote.mr->rkey(), 200);
  EXPECT_EQ(bad.status, WcStatus::kRemoteAccess) << "the bounds check still applies";
}

TEST(SoftNoCopy, CopyingIsTheDefault) {
  auto provider = makeProvider({softDevice("soft0")});
  ASSERT_NE(provider, nullptr);
  EXPECT_EQ(provider->linkModel().find("payload=not-copied"), std::string::npos);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
