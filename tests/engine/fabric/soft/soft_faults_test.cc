// Soft provider: fault injection (each action, each trigger, rule bookkeeping).
#include "soft_test_util.h"

namespace tent::fabric::soft::testing {
namespace {

class SoftFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override { make(0, 0); }
  void make(double link_gbps, uint64_t latency_ns) {
    provider_ = makeProvider({softDevice("soft0", link_gbps, latency_ns), softDevice("soft1")},
                             clock_.clock());
    ASSERT_NE(provider_, nullptr);
    dev_ = &provider_->device(0);
    faults_ = faultInjector(*provider_);
    ASSERT_NE(faults_, nullptr);
    src_ = std::make_unique<GuardedBuffer>(*dev_, 4096, kAllAccess);
    dst_ = std::make_unique<GuardedBuffer>(*dev_, 4096, kAllAccess);
    src_->fill(13);
    sge_ = Sge{src_->addr(), 64, src_->mr->lkey()};
  }
  SendWr wr(uint64_t id, WrOpcode op = WrOpcode::kRdmaWrite) {
    return makeWr(id, op, &sge_, 1, dst_->addr(), dst_->mr->rkey());
  }

  ManualClock clock_;
  std::unique_ptr<Provider> provider_;
  Device* dev_ = nullptr;
  FaultInjector* faults_ = nullptr;
  std::unique_ptr<GuardedBuffer> src_, dst_;
  Sge sge_{0, 64, 0};
};

TEST_F(SoftFaultsTest, CompletionErrorOnEveryNthWrOfOneQp) {
  auto p = QpPair::make(*dev_, *dev_);
  auto other = QpPair::make(*dev_, *dev_);
  FaultRule rule;
  rule.qp_num = p.a->qpNum();
  rule.every_nth = 3;
  rule.action = FaultAction::kCompletionError;
  rule.status = WcStatus::kRemoteOperation;
  auto id = faults_->addRule(rule);
  ASSERT_TRUE(id.ok()) << id.status().toString();
  for (uint64_t i = 1; i <= 3; ++i) post(*p.a, wr(i));
  for (uint64_t i = 1; i <= 3; ++i) post(*other.a, wr(i));
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 3u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[2].status, WcStatus::kRemoteOperation);
  EXPECT_EQ(p.a->state(), QpState::kError);
  for (const auto& wc : pollNow(*other.cq_a)) EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(other.a->state(), QpState::kRts);
  EXPECT_EQ(faults_->hits(*id), 1u);
}

TEST_F(SoftFaultsTest, OpcodeAndDeviceFiltersNarrowARule) {
  FaultRule rule;
  rule.device = "soft0";
  rule.opcode = WrOpcode::kRdmaRead;
  rule.every_nth = 1;
  rule.status = WcStatus::kRemoteAccess;
  auto id = faults_->addRule(rule);
  ASSERT_TRUE(id.ok());
  auto p = QpPair::make(*dev_, *dev_);
  post(*p.a, wr(1, WrOpcode::kRdmaWrite));
  post(*p.a, wr(2, WrOpcode::kRdmaRead));
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemoteAccess);

  // A QP on soft1 is not touched by the soft0 rule.
  Device& dev1 = provider_->device(1);
  GuardedBuffer local(dev1, 64, kAllAccess);
  auto q = QpPair::make(dev1, *dev_);
  auto wc = transferOne(q, WrOpcode::kRdmaRead, local, dst_->addr(), dst_->mr->rkey(), 64);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(faults_->hits(*id), 1u);
  rule.device = "nope";
  EXPECT_EQ(faults_->addRule(rule).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SoftFaultsTest, ProbabilityRulesAreDeterministicPerSeed) {
  auto hitsFor = [&](uint64_t seed) {
    faults_->clearRules();
    FaultRule rule;
    rule.probability = 0.25;
    rule.seed = seed;
    rule.action = FaultAction::kDelay;
    rule.delay_ns = 1;
    const uint32_t id = *faults_->addRule(rule);
    auto p = QpPair::make(*dev_, *dev_, 4);
    std::vector<bool> pattern;
    for (int i = 0; i < 400; ++i) {
      const uint64_t before = faults_->hits(id);
      post(*p.a, wr(i));
      pattern.push_back(faults_->hits(id) != before);
      clock_.advance(10);
      pollNow(*p.cq_a);
    }
    return pattern;
  };
  const auto a = hitsFor(7), b = hitsFor(7), c = hitsFor(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto fired = std::count(a.begin(), a.end(), true);
  EXPECT_GT(fired, 0);
  EXPECT_LT(fired, 400);
}

TEST_F(SoftFaultsTest, DelayHoldsBackTheWrAndLaterWrsOfItsQpOnly) {
  auto p = QpPair::make(*dev_, *dev_);
  auto other = QpPair::make(*dev_, *dev_);
  FaultRule rule;
  rule.qp_num = p.a->qpNum();
  rule.every_nth = 1;
  rule.max_hits = 1;
  rule.action = FaultAction::kDelay;
  rule.delay_ns = 5000;
  auto id = faults_->addRule(rule);
  ASSERT_TRUE(id.ok());
  const uint64_t t0 = clock_.now();
  post(*p.a, wr(1));      // delayed
  post(*p.a, wr(2));      // not delayed itself, but completes after WR 1
  post(*other.a, wr(3));  // unaffected
  EXPECT_TRUE(pollNow(*p.cq_a).empty());
  EXPECT_EQ(pollNow(*other.cq_a).size(), 1u);
  clock_.set(t0 + 4999);
  EXPECT_TRUE(pollNow(*p.cq_a).empty());
  clock_.set(t0 + 5000);
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(faults_->hits(*id), 1u);  // max_hits retired it
}

TEST_F(SoftFaultsTest, QpErrorFlushesTheWrAndEverythingOutstanding) {
  make(0, 1000);  // latency keeps the first WR outstanding
  auto p = QpPair::make(*dev_, *dev_);
  FaultRule rule;
  rule.qp_num = p.a->qpNum();
  rule.every_nth = 2;
  rule.action = FaultAction::kQpError;
  ASSERT_TRUE(faults_->addRule(rule).ok());
  std::memset(dst_->data(), 0, 64);
  post(*p.a, wr(1));
  post(*p.a, wr(2));
  EXPECT_EQ(p.a->state(), QpState::kError);
  clock_.advance(2000);
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kFlushed);
  EXPECT_EQ(wcs[1].status, WcStatus::kFlushed);
  const SendWr w = wr(3);
  const SendWr* bad = nullptr;
  EXPECT_EQ(p.a->postSend(&w, &bad), EINVAL);
}

TEST_F(SoftFaultsTest, PortDownFailsWrsWithRetryExceededUntilItIsUpAgain) {
  ASSERT_TRUE(faults_->setPortUp("soft0", false).ok());
  EXPECT_FALSE(faults_->portUp("soft0"));
  EXPECT_TRUE(faults_->portUp("soft1"));
  auto p = QpPair::make(*dev_, *dev_);
  std::memset(dst_->data(), 0, 64);
  post(*p.a, wr(1));
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(dst_->data()[0], 0);  // nothing crossed a down link
  ASSERT_TRUE(faults_->setPortUp("soft0", true).ok());
  auto fresh = QpPair::make(*dev_, *dev_);
  post(*fresh.a, wr(2));
  wcs = pollNow(*fresh.cq_a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(dst_->holds(13, 0, 64));
  EXPECT_EQ(faults_->setPortUp("nope", false).code(), StatusCode::kNotFound);
}

TEST_F(SoftFaultsTest, PortDownFailsWrsStillInFlight) {
  make(8, 0);
  auto p = QpPair::make(*dev_, *dev_);
  const uint64_t t0 = clock_.now();
  Sge big{src_->addr(), 4096, src_->mr->lkey()};
  post(*p.a, makeWr(1, WrOpcode::kRdmaWrite, &big, 1, dst_->addr(), dst_->mr->rkey()));
  post(*p.a, makeWr(2, WrOpcode::kRdmaWrite, &big, 1, dst_->addr(), dst_->mr->rkey()));
  clock_.set(t0 + 1000);  // WR 1 is a quarter through
  ASSERT_TRUE(faults_->setPortUp("soft0", false).ok());
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_EQ(wcs[1].status, WcStatus::kFlushed);
  EXPECT_EQ(p.a->state(), QpState::kError);
}

TEST_F(SoftFaultsTest, PortDownAndUpAsRuleActions) {
  FaultRule down;
  down.every_nth = 1;
  down.max_hits = 1;
  down.action = FaultAction::kPortDown;
  ASSERT_TRUE(faults_->addRule(down).ok());
  auto p = QpPair::make(*dev_, *dev_);
  post(*p.a, wr(1));
  auto wcs = pollNow(*p.cq_a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExceeded);
  EXPECT_FALSE(faults_->portUp("soft0"));

  FaultRule up;
  up.every_nth = 1;
  up.max_hits = 1;
  up.action = FaultAction::kPortUp;
  ASSERT_TRUE(faults_->addRule(up).ok());
  auto fresh = QpPair::make(*dev_, *dev_);
  post(*fresh.a, wr(2));
  wcs = pollNow(*fresh.cq_a);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(faults_->portUp("soft0"));
}

TEST_F(SoftFaultsTest, RuleBookkeeping) {
  FaultRule bad;
  EXPECT_EQ(faults_->addRule(bad).status().code(), StatusCode::kInvalidArgument);  // no trigger
  bad.every_nth = 1;
  bad.status = WcStatus::kSuccess;
  EXPECT_EQ(faults_->addRule(bad).status().code(), StatusCode::kInvalidArgument);
  bad.status = WcStatus::kGeneral;
  bad.action = FaultAction::kDelay;
  EXPECT_EQ(faults_->addRule(bad).status().code(), StatusCode::kInvalidArgument);  // no delay
  FaultRule ok;
  ok.probability = 1.5;
  EXPECT_EQ(faults_->addRule(ok).status().code(), StatusCode::kInvalidArgument);
  ok.probability = 0.5;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < 64; ++i) ids.push_back(*faults_->addRule(ok));
  EXPECT_EQ(faults_->addRule(ok).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(faults_->removeRule(ids[10]).ok());
  EXPECT_EQ(faults_->removeRule(ids[10]).code(), StatusCode::kNotFound);
  EXPECT_TRUE(faults_->addRule(ok).ok());
  faults_->clearRules();
  EXPECT_EQ(faults_->hits(ids[0]), 0u);
}

class NotSoft final : public Provider {
 public:
  std::string_view name() const noexcept override { return "fake"; }
  std::string linkModel() const override { return "fake"; }
  size_t deviceCount() const noexcept override { return 0; }
  Device& device(size_t) noexcept override { std::abort(); }
  Result<void*> allocateMemory(size_t, int) override { return Status::NotSupported("fake"); }
  Status freeMemory(void*, size_t) override { return Status::NotSupported("fake"); }
};

TEST(SoftFaults, InjectorOnlyForTheSoftProvider) {
  NotSoft fake;
  EXPECT_EQ(faultInjector(fake), nullptr);
}

}  // namespace
}  // namespace tent::fabric::soft::testing
