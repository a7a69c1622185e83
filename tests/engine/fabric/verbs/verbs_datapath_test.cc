// The verbs provider's datapath against a fake libibverbs: WR building (in stack
// chunks), bad_wr mapping, send-queue accounting, completion status mapping.
#include <gtest/gtest.h>

#include <vector>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;

class VerbsDatapathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.addDevice("mlx5_0");
    fake_.setGid(0, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
    config::VerbsFabricConfig config;
    config.signal_every = 1;  // every WR signaled (verbs_moderation_test.cc covers N > 1)
    provider_ = std::move(createVerbsProvider(config, fakeOps())).value();
    cq_ = std::move(provider_->device(0).createCq(1024)).value();
  }

  std::unique_ptr<QueuePair> connectedQp(uint32_t max_send_wr, uint32_t max_sge = 4) {
    auto qp = std::move(provider_->device(0).createQp({cq_.get(), max_send_wr, max_sge})).value();
    QpRemote remote;
    remote.qp_num = 1;
    remote.port = provider_->device(0).portIdentity();
    EXPECT_TRUE(qp->modifyToInit().ok());
    EXPECT_TRUE(qp->modifyToRtr(remote).ok());
    EXPECT_TRUE(qp->modifyToRts().ok());
    return qp;
  }

  // `count` chained WRs, wr_id 1000+i, each with `sges_per_wr` SGEs of 8 bytes.
  void buildChain(size_t count, uint32_t sges_per_wr = 1, bool signaled = true) {
    sges_.assign(count * sges_per_wr, Sge{});
    wrs_.assign(count, SendWr{});
    for (size_t i = 0; i < count; ++i) {
      for (uint32_t s = 0; s < sges_per_wr; ++s) {
        sges_[i * sges_per_wr + s] = {0x10000 + i * 64 + s * 8, 8, 0xaa};
      }
      wrs_[i].wr_id = 1000 + i;
      wrs_[i].opcode = i % 2 ? WrOpcode::kRdmaRead : WrOpcode::kRdmaWrite;
      wrs_[i].signaled = signaled;
      wrs_[i].num_sge = sges_per_wr;
      wrs_[i].sg_list = &sges_[i * sges_per_wr];
      wrs_[i].remote_addr = 0x900000 + i * 64;
      wrs_[i].rkey = 0xbb;
      wrs_[i].next = i + 1 < count ? &wrs_[i + 1] : nullptr;
    }
  }

  std::vector<WorkCompletion> pollAll() {
    std::vector<WorkCompletion> out(256);
    int n = cq_->poll(out.data(), static_cast<int>(out.size()));
    out.resize(n < 0 ? 0 : n);
    return out;
  }

  FakeVerbs fake_;
  std::unique_ptr<Provider> provider_;
  std::unique_ptr<CompletionQueue> cq_;
  std::vector<Sge> sges_;
  std::vector<SendWr> wrs_;
};

TEST_F(VerbsDatapathTest, BuildsWrsWithOpcodesFlagsSgesAndRemote) {
  auto qp = connectedQp(16);
  buildChain(3, 2);
  wrs_[2].signaled = false;
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  ASSERT_EQ(fake_.post_call_sizes, std::vector<int>{3});
  ASSERT_EQ(fake_.posted.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto& p = fake_.posted[i];
    EXPECT_EQ(p.opcode, i % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE);
    EXPECT_EQ(p.send_flags, i == 2 ? 0u : unsigned{IBV_SEND_SIGNALED});
    EXPECT_EQ(p.remote_addr, 0x900000 + i * 64);
    EXPECT_EQ(p.rkey, 0xbbu);
    ASSERT_EQ(p.sges.size(), 2u);
    EXPECT_EQ(p.sges[1].addr, 0x10000 + i * 64 + 8);
    EXPECT_EQ(p.sges[1].length, 8u);
    EXPECT_EQ(p.sges[1].lkey, 0xaau);
  }
  EXPECT_EQ(qp->outstanding(), 3u);
}

TEST_F(VerbsDatapathTest, LongChainsArePostedInStackChunks) {
  auto qp = connectedQp(512);
  buildChain(100);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  EXPECT_EQ(fake_.post_call_sizes, (std::vector<int>{32, 32, 32, 4}));
  ASSERT_EQ(fake_.posted.size(), 100u);
  fake_.completeAllSignaled();
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 100u);  // more than one poll chunk
  for (size_t i = 0; i < wcs.size(); ++i) EXPECT_EQ(wcs[i].wr_id, 1000 + i);
  EXPECT_EQ(qp->outstanding(), 0u);
}

TEST_F(VerbsDatapathTest, ChunksAlsoEndWhenTheirSgesRunOut) {
  auto qp = connectedQp(512, 3);
  buildChain(50, 3);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  // 64 stack SGEs hold 21 WRs of 3 SGEs.
  EXPECT_EQ(fake_.post_call_sizes, (std::vector<int>{21, 21, 8}));
  EXPECT_EQ(fake_.posted[49].sges[2].addr, 0x10000 + 49 * 64 + 16);
}

TEST_F(VerbsDatapathTest, BadWrFromTheNicMapsBackToOurWr) {
  auto qp = connectedQp(512);
  buildChain(50);
  fake_.fail_post_at = 37;  // the 6th WR of the second chunk
  fake_.fail_post_rc = ENOMEM;
  const SendWr* bad = nullptr;
  EXPECT_EQ(qp->postSend(&wrs_[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &wrs_[37]);
  EXPECT_EQ(fake_.posted.size(), 37u);
  EXPECT_EQ(qp->outstanding(), 37u);
  // The rest can be posted again from bad_wr on.
  fake_.fail_post_at = -1;
  ASSERT_EQ(qp->postSend(bad, &bad), 0);
  fake_.completeAllSignaled();
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 50u);
  EXPECT_EQ(wcs[37].wr_id, 1037u);
  EXPECT_EQ(wcs[49].wr_id, 1049u);
}

TEST_F(VerbsDatapathTest, PostingBeyondMaxSendWrFailsWithEnomem) {
  auto qp = connectedQp(4);
  buildChain(6);
  const SendWr* bad = nullptr;
  EXPECT_EQ(qp->postSend(&wrs_[0], &bad), ENOMEM);
  EXPECT_EQ(bad, &wrs_[4]);
  EXPECT_EQ(qp->outstanding(), 4u);
  EXPECT_EQ(fake_.posted.size(), 4u);
  fake_.complete(0);
  fake_.complete(1);
  ASSERT_EQ(pollAll().size(), 2u);
  EXPECT_EQ(qp->outstanding(), 2u);
  EXPECT_EQ(qp->postSend(bad, &bad), 0);
  EXPECT_EQ(qp->outstanding(), 4u);
  EXPECT_EQ(fake_.posted[5].remote_addr, wrs_[5].remote_addr);
}

TEST_F(VerbsDatapathTest, UnsignaledWrsRetireWithTheNextSignaledOne) {
  auto qp = connectedQp(8);
  buildChain(4, 1, false);
  wrs_[3].signaled = true;
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  EXPECT_EQ(qp->outstanding(), 4u);
  fake_.completeAllSignaled();
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 1003u);
  EXPECT_EQ(qp->outstanding(), 0u);
}

TEST_F(VerbsDatapathTest, PostOutsideRtsOrWithTooManySgesIsEinval) {
  auto cold = std::move(provider_->device(0).createQp({cq_.get(), 8, 1})).value();
  buildChain(2);
  const SendWr* bad = nullptr;
  EXPECT_EQ(cold->postSend(&wrs_[0], &bad), EINVAL);
  EXPECT_EQ(bad, &wrs_[0]);
  EXPECT_TRUE(fake_.post_call_sizes.empty());

  auto qp = connectedQp(8, 1);
  buildChain(3);
  wrs_[2].num_sge = 2;  // max_sge is 1
  EXPECT_EQ(qp->postSend(&wrs_[0], &bad), EINVAL);
  EXPECT_EQ(bad, &wrs_[2]);
  EXPECT_EQ(fake_.posted.size(), 2u);  // the WRs before it were posted
}

struct StatusCase {
  ibv_wc_status ibv;
  WcStatus ours;
};

TEST_F(VerbsDatapathTest, CompletionCarriesOurWrAndTheMappedStatus) {
  const StatusCase cases[] = {
      {IBV_WC_SUCCESS, WcStatus::kSuccess},
      {IBV_WC_LOC_LEN_ERR, WcStatus::kLocalLength},
      {IBV_WC_LOC_PROT_ERR, WcStatus::kLocalProtection},
      {IBV_WC_REM_ACCESS_ERR, WcStatus::kRemoteAccess},
      {IBV_WC_REM_OP_ERR, WcStatus::kRemoteOperation},
      {IBV_WC_REM_INV_REQ_ERR, WcStatus::kRemoteOperation},
      {IBV_WC_RETRY_EXC_ERR, WcStatus::kRetryExceeded},
      {IBV_WC_WR_FLUSH_ERR, WcStatus::kFlushed},
      {IBV_WC_GENERAL_ERR, WcStatus::kGeneral},
      {IBV_WC_RNR_RETRY_EXC_ERR, WcStatus::kRnrRetryExceeded},
      {IBV_WC_LOC_QP_OP_ERR, WcStatus::kGeneral},
  };
  for (const StatusCase& c : cases) {
    SCOPED_TRACE(ibv_wc_status_str(c.ibv));
    auto qp = connectedQp(8);
    buildChain(2);
    const SendWr* bad = nullptr;
    ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
    fake_.complete(fake_.posted.size() - 1, c.ibv, 0x1234);
    auto wcs = pollAll();
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].wr_id, 1001u);
    EXPECT_EQ(wcs[0].status, c.ours);
    EXPECT_EQ(wcs[0].opcode, WrOpcode::kRdmaRead);  // from our WR, not from ibv_wc
    EXPECT_EQ(wcs[0].qp_num, qp->qpNum());
    EXPECT_EQ(wcs[0].byte_len, 8u);
    EXPECT_EQ(wcs[0].vendor_err, 0x1234u);
    EXPECT_EQ(qp->state(), c.ours == WcStatus::kSuccess ? QpState::kRts : QpState::kError);
    EXPECT_EQ(qp->outstanding(), 0u);
  }
}

// Several threads may poll one CQ (the direct CQ: callers and the rail poller). A CQE
// names its WR by a slot of the QP's ring; a second poller that retires a later WR of
// the same QP while the first is still between poll_cq and reading its slot must not
// free that slot for a new post (the first would then report the new WR). Found by
// the fake-verbs race test (a slice completed twice, a crash); here deterministic: the
// second poller and the post run inside the first poller's poll_cq.
TEST_F(VerbsDatapathTest, ASecondPollerCannotRecycleASlotTheFirstHasNotRead) {
  auto qp = connectedQp(2);
  buildChain(2);  // 1000 (slot 0), 1001 (slot 1), both signaled
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.completeAllSignaled();
  SendWr late = wrs_[0];
  late.wr_id = 2000;
  late.next = nullptr;
  int late_rc = -1;
  std::vector<WorkCompletion> second(4);
  int second_n = -1;
  fake_.inside_poll = [&] {  // the first poller holds CQE 1000, not translated yet
    second_n = cq_->poll(second.data(), 4);
    late_rc = qp->postSend(&late, &bad);
  };
  WorkCompletion first{};
  ASSERT_EQ(cq_->poll(&first, 1), 1);
  EXPECT_EQ(first.wr_id, 1000u) << "the first poller reported another WR than its CQE's";
  std::vector<WorkCompletion> rest = pollAll();
  if (second_n > 0) rest.insert(rest.begin(), second.begin(), second.begin() + second_n);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].wr_id, 1001u);
  if (late_rc == 0) {  // only if a slot really was free when it was posted
    fake_.completeAllSignaled();
    auto last = pollAll();
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].wr_id, 2000u);
  }
}

TEST_F(VerbsDatapathTest, ErrorCompletionStopsFurtherPosts) {
  auto qp = connectedQp(8);
  buildChain(3, 1, false);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  ASSERT_TRUE(qp->modifyToError().ok());
  // A flush completes unsignaled WRs too; each keeps its own wr_id.
  for (size_t i = 0; i < 3; ++i) fake_.complete(i, IBV_WC_WR_FLUSH_ERR);
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 1000 + i);
    EXPECT_EQ(wcs[i].status, WcStatus::kFlushed);
  }
  EXPECT_EQ(qp->outstanding(), 0u);
  EXPECT_EQ(qp->postSend(&wrs_[0], &bad), EINVAL);
}

TEST_F(VerbsDatapathTest, CompletionsOfTwoQpsOnOneCqFindTheirQp) {
  auto a = connectedQp(8);
  auto b = connectedQp(8);
  buildChain(2);
  wrs_[0].next = nullptr;
  const SendWr* bad = nullptr;
  ASSERT_EQ(a->postSend(&wrs_[0], &bad), 0);
  ASSERT_EQ(b->postSend(&wrs_[1], &bad), 0);
  fake_.complete(1);
  fake_.complete(0);
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1001u);
  EXPECT_EQ(wcs[0].qp_num, b->qpNum());
  EXPECT_EQ(wcs[1].wr_id, 1000u);
  EXPECT_EQ(a->outstanding(), 0u);
  EXPECT_EQ(b->outstanding(), 0u);
}

TEST_F(VerbsDatapathTest, PollHonoursMaxAndReportsCqErrors) {
  auto qp = connectedQp(64);
  buildChain(40);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.completeAllSignaled();
  WorkCompletion wc[64];
  EXPECT_EQ(cq_->poll(wc, 5), 5);
  EXPECT_EQ(wc[4].wr_id, 1004u);
  EXPECT_EQ(cq_->poll(wc, 64), 35);
  EXPECT_EQ(cq_->poll(wc, 64), 0);
  EXPECT_EQ(provider_->device(0).counters().wrs, 40u);
  fake_.poll_rc = -EIO;
  EXPECT_EQ(cq_->poll(wc, 64), -1);
}

TEST(VerbsStatus, EveryIbvStatusMapsToOneOfOurs) {
  EXPECT_EQ(verbs::toWcStatus(IBV_WC_SUCCESS), WcStatus::kSuccess);
  EXPECT_EQ(verbs::toWcStatus(IBV_WC_WR_FLUSH_ERR), WcStatus::kFlushed);
  EXPECT_EQ(verbs::toWcStatus(IBV_WC_TM_ERR), WcStatus::kGeneral);
  EXPECT_EQ(verbs::toWcStatus(static_cast<ibv_wc_status>(999)), WcStatus::kGeneral);
}

}  // namespace
}  // namespace tent::fabric
