// tcp provider: the CQ ring. Completions are handed out once each, in order, and a
// poller caught between taking a completion and giving its cell back (preempted there)
// never makes the ring overflow: admission counts the entries, not the cells.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "fabric/tcp/tcp_cq.h"

namespace tent::fabric::tcp {
namespace {

constexpr uint16_t kGen = 1;

Cqe completion(uint32_t seq) {
  Cqe c;
  c.wc.wr_id = seq;
  c.wc.status = WcStatus::kSuccess;
  c.qp_slot = 0;
  c.qp_gen = kGen;
  c.seq = seq;
  return c;
}

TEST(TcpCq, HandsOutEachCompletionOnceInOrder) {
  auto words = std::make_shared<QpWords>();
  (*words)[0].store(QpWords::make(kGen, 0, 0));
  CqCore cq(words, std::make_shared<QpWords>(), 4);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(cq.push(completion(i)));
  WorkCompletion wc[8];
  ASSERT_EQ(cq.poll(wc, 8), 4);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(wc[i].wr_id, i);
  EXPECT_EQ(QpWords::released((*words)[0].load()), 4u);
  EXPECT_EQ(cq.poll(wc, 8), 0);
}

// Poller A takes completion 0 and is preempted before it gives the cell back; poller B
// takes completion 1, which releases two send-queue slots (released = 2), so the QP may
// have two more WRs complete. The ring holds 2 entries plus A's cell: the producer must
// wait for A's cell, not report an overflow (which fails every later poll with -1 and
// strands the posters: the hang TSan found in TwoPollersOfOneCqSeeEachCompletionExactlyOnce).
TEST(TcpCq, APollerBetweenTakingAndGivingBackDoesNotOverflowTheRing) {
  auto words = std::make_shared<QpWords>();
  (*words)[0].store(QpWords::make(kGen, 0, 0));
  CqCore cq(words, std::make_shared<QpWords>(), 4);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(cq.push(completion(i)));
  CqCore::Claim held;
  ASSERT_TRUE(cq.claim(&held));  // poller A
  EXPECT_EQ(held.cqe.seq, 0u);
  WorkCompletion wc[8];
  ASSERT_EQ(cq.poll(wc, 1), 1);  // poller B
  EXPECT_EQ(wc[0].wr_id, 1u);
  ASSERT_EQ(QpWords::released((*words)[0].load()), 2u);
  // A gives its cell back whenever it runs again; the pushes meanwhile must not fail.
  std::thread poller_a([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    cq.handBack(held);
  });
  const bool pushed4 = cq.push(completion(4));
  const bool pushed5 = cq.push(completion(5));
  poller_a.join();
  EXPECT_TRUE(pushed4);
  EXPECT_TRUE(pushed5);
  ASSERT_EQ(cq.poll(wc, 8), 4);  // -1 after an overflow
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(wc[i].wr_id, i + 2);
}

}  // namespace
}  // namespace tent::fabric::tcp
