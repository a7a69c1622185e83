// CQ moderation in the verbs provider (fake libibverbs): the NIC signals every Nth
// WR the caller wants completed and the last of each posted chunk; the completions
// of the others are inferred in order from the signaled one, flushed after an error
// completion. Each WR the caller asked about completes exactly once, with its own
// wr_id and status, and the send queue frees its slots.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "config/config.h"
#include "fabric/verbs/verbs_objects.h"
#include "tests/support/fake_verbs/fake_verbs.h"

namespace tent::fabric {
namespace {

using testing::fakeOps;
using testing::FakeVerbs;

class VerbsModerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_.addDevice("mlx5_0");
    fake_.setGid(0, IBV_GID_TYPE_ROCE_V2, "::ffff:10.0.0.7");
    config::VerbsFabricConfig config;
    config.signal_every = 4;
    provider_ = std::move(createVerbsProvider(config, fakeOps())).value();
    cq_ = std::move(provider_->device(0).createCq(1024)).value();
  }

  std::unique_ptr<QueuePair> connectedQp(uint32_t max_send_wr) {
    auto qp = std::move(provider_->device(0).createQp({cq_.get(), max_send_wr, 1})).value();
    QpRemote remote;
    remote.qp_num = 1;
    remote.port = provider_->device(0).portIdentity();
    EXPECT_TRUE(qp->modifyToInit().ok());
    EXPECT_TRUE(qp->modifyToRtr(remote).ok());
    EXPECT_TRUE(qp->modifyToRts().ok());
    return qp;
  }

  // `count` chained WRs, wr_id base+i, all asking for a completion.
  void buildChain(size_t count, uint64_t base = 1000) {
    sges_.assign(count, Sge{});
    wrs_.assign(count, SendWr{});
    for (size_t i = 0; i < count; ++i) {
      sges_[i] = {0x10000 + i * 64, 8, 0xaa};
      wrs_[i].wr_id = base + i;
      wrs_[i].num_sge = 1;
      wrs_[i].sg_list = &sges_[i];
      wrs_[i].remote_addr = 0x900000 + i * 64;
      wrs_[i].rkey = 0xbb;
      wrs_[i].next = i + 1 < count ? &wrs_[i + 1] : nullptr;
    }
  }

  std::vector<size_t> nicSignaled() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < fake_.posted.size(); ++i)
      if (fake_.posted[i].send_flags & IBV_SEND_SIGNALED) out.push_back(i);
    return out;
  }

  // Polls with room for `max` at a time until the CQ gives nothing.
  std::vector<WorkCompletion> pollAll(int max = 256) {
    std::vector<WorkCompletion> out;
    std::vector<WorkCompletion> wc(max);
    for (int n; (n = cq_->poll(wc.data(), max)) > 0;)
      out.insert(out.end(), wc.begin(), wc.begin() + n);
    return out;
  }

  FakeVerbs fake_;
  std::unique_ptr<Provider> provider_;
  std::unique_ptr<CompletionQueue> cq_;
  std::vector<Sge> sges_;
  std::vector<SendWr> wrs_;
};

using Seq = std::vector<size_t>;

TEST_F(VerbsModerationTest, EveryNthAndTheLastAreSignaled) {
  auto qp = connectedQp(64);
  buildChain(10);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  EXPECT_EQ(nicSignaled(), (Seq{3, 7, 9}));
  fake_.completeAllSignaled();
  EXPECT_EQ(fake_.cq_entries.size(), 3u);  // three CQEs ...
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 10u);  // ... ten completions, in order, each once
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 1000 + i);
    EXPECT_EQ(wcs[i].status, WcStatus::kSuccess);
    EXPECT_EQ(wcs[i].byte_len, 8u);
    EXPECT_EQ(wcs[i].qp_num, qp->qpNum());
  }
  EXPECT_EQ(qp->outstanding(), 0u);
  EXPECT_EQ(provider_->device(0).counters().wrs, 10u);
}

TEST_F(VerbsModerationTest, OnlyWrsUpToTheSignaledOneComplete) {
  auto qp = connectedQp(64);
  buildChain(10);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.complete(3);
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(wcs.back().wr_id, 1003u);
  EXPECT_EQ(qp->outstanding(), 6u);
  fake_.complete(7);
  fake_.complete(9);
  EXPECT_EQ(pollAll().size(), 6u);
  EXPECT_EQ(qp->outstanding(), 0u);
}

TEST_F(VerbsModerationTest, WrsNotAskedForAreNeitherSignaledNorReported) {
  auto qp = connectedQp(64);
  buildChain(6);
  wrs_[1].signaled = false;
  wrs_[2].signaled = false;
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  EXPECT_EQ(nicSignaled(), (Seq{5}));  // the 4th WR to report is the last
  fake_.completeAllSignaled();
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 4u);
  EXPECT_EQ(wcs[0].wr_id, 1000u);
  EXPECT_EQ(wcs[1].wr_id, 1003u);
  EXPECT_EQ(wcs[3].wr_id, 1005u);
  EXPECT_EQ(qp->outstanding(), 0u);
}

// The NIC reports an error on the WR that failed (signaled or not) and flushes the
// rest, each with its own CQE (the IB spec): the error lands on its own WR, those
// before it succeeded, those after it are flushed.
TEST_F(VerbsModerationTest, ErrorIsAttributedToItsWrAndTheRestFlush) {
  auto qp = connectedQp(64);
  buildChain(10);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.complete(3);  // the signaled WR before the failure
  fake_.complete(5, IBV_WC_REM_ACCESS_ERR, 0x51);
  for (size_t i = 6; i < 10; ++i) fake_.complete(i, IBV_WC_WR_FLUSH_ERR);
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 1000 + i);
    const WcStatus want = i < 5    ? WcStatus::kSuccess
                          : i == 5 ? WcStatus::kRemoteAccess
                                   : WcStatus::kFlushed;
    EXPECT_EQ(wcs[i].status, want) << "wr " << i;
  }
  EXPECT_EQ(wcs[5].vendor_err, 0x51u);
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_EQ(qp->outstanding(), 0u);
}

// A NIC that flushed only the signaled WRs: the unsignaled ones between are
// reported flushed too (never as successes they were not).
TEST_F(VerbsModerationTest, FlushOfSignaledWrsOnlyFlushesTheOnesBetween) {
  auto qp = connectedQp(64);
  buildChain(10);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.complete(3);  // 0..3 done
  ASSERT_TRUE(qp->modifyToError().ok());
  fake_.complete(4, IBV_WC_RETRY_EXC_ERR);
  fake_.complete(7, IBV_WC_WR_FLUSH_ERR);
  fake_.complete(9, IBV_WC_WR_FLUSH_ERR);
  auto wcs = pollAll();
  ASSERT_EQ(wcs.size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(wcs[i].wr_id, 1000 + i);
    const WcStatus want = i < 4    ? WcStatus::kSuccess
                          : i == 4 ? WcStatus::kRetryExceeded
                                   : WcStatus::kFlushed;
    EXPECT_EQ(wcs[i].status, want) << "wr " << i;
  }
  EXPECT_EQ(qp->outstanding(), 0u);
}

// A caller polling fewer than a CQE stands for gets them over several polls, each
// exactly once; the CQE waits inside the provider meanwhile.
TEST_F(VerbsModerationTest, SmallPollsGetEveryCompletionOnce) {
  auto qp = connectedQp(64);
  buildChain(10);
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.completeAllSignaled();
  for (int max : {1, 3}) {
    SCOPED_TRACE(max);
    auto wcs = pollAll(max);
    ASSERT_EQ(wcs.size(), max == 1 ? 10u : 0u);
    for (size_t i = 0; i < wcs.size(); ++i) EXPECT_EQ(wcs[i].wr_id, 1000 + i);
  }
  buildChain(10, 2000);
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  fake_.completeAllSignaled();
  std::map<uint64_t, int> seen;
  for (const WorkCompletion& wc : pollAll(3)) ++seen[wc.wr_id];
  ASSERT_EQ(seen.size(), 10u);
  for (auto& [id, times] : seen) EXPECT_EQ(times, 1) << id;
  EXPECT_EQ(qp->outstanding(), 0u);
}

TEST_F(VerbsModerationTest, SendQueueSlotsComeBackForTheNextChain) {
  auto qp = connectedQp(8);
  for (uint64_t round = 0; round < 3; ++round) {
    buildChain(8, 1000 + round * 100);
    const SendWr* bad = nullptr;
    ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0) << "round " << round;
    EXPECT_EQ(qp->outstanding(), 8u);
    EXPECT_EQ(qp->postSend(&wrs_[0], &bad), ENOMEM);  // full until completions come
    fake_.completeAllSignaled();
    EXPECT_EQ(pollAll().size(), 8u);
    EXPECT_EQ(qp->outstanding(), 0u);
  }
}

TEST_F(VerbsModerationTest, EachPostedChunkEndsSignaled) {
  auto qp = connectedQp(64);
  buildChain(34);  // 32 WRs per ibv_post_send
  const SendWr* bad = nullptr;
  ASSERT_EQ(qp->postSend(&wrs_[0], &bad), 0);
  EXPECT_EQ(fake_.post_call_sizes, (std::vector<int>{32, 2}));
  EXPECT_EQ(nicSignaled(), (Seq{3, 7, 11, 15, 19, 23, 27, 31, 33}));
  fake_.completeAllSignaled();
  EXPECT_EQ(pollAll().size(), 34u);
}

}  // namespace
}  // namespace tent::fabric
