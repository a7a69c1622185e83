// The loopback fake device's datapath over the raw VerbsOps table: bytes moved and
// verified, access errors that move no byte, completion order, flushes,
// retry-exceeded timing (on an injected clock), CQ overflow, and the thread rules:
// many pollers on one CQ, posters on different QPs, a second poster on one QP.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "loopback_test_util.h"

namespace tent::fabric::testing {
namespace {

// Two devices, one connected QP pair (a on lb0, b on lb1), a buffer on each side.
struct Pair : ::testing::Test {
  explicit Pair(LoopbackOptions o = RawVerbs::twoDevices()) : v(std::move(o)) {}
  void SetUp() override {
    cqa = v.cq(0);
    cqb = v.cq(1);
    a = v.qp(0, cqa);
    b = v.qp(1, cqb);
    la = v.mr(0, local.data(), local.size());
    rb = v.mr(1, remote.data(), remote.size());
  }
  void connect(uint8_t timeout = 14, uint8_t retry = 7) { v.connect(a, 0, b, 1, timeout, retry); }
  int write(size_t off, uint32_t len, uint64_t id = 1, bool signaled = true) {
    return v.post(a, IBV_WR_RDMA_WRITE, local.data() + off, len, la->lkey, remote.data() + off,
                  rb->rkey, id, signaled);
  }
  RawVerbs v;
  std::vector<uint8_t> local = std::vector<uint8_t>(1 << 16);
  std::vector<uint8_t> remote = std::vector<uint8_t>(1 << 16);
  ibv_cq* cqa = nullptr;
  ibv_cq* cqb = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_mr* la = nullptr;
  ibv_mr* rb = nullptr;
};

using LoopbackData = Pair;

TEST_F(LoopbackData, WriteAndReadMoveEveryByte) {
  connect();
  fill(local, 1);
  ASSERT_EQ(write(0, 1 << 16, 7), 0);
  auto wc = v.pollUntil(cqa, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wc[0].qp_num, a->qp_num);
  EXPECT_TRUE(holds(remote.data(), remote.size(), 1));
  // READ back into two SGEs.
  fill(remote, 2);
  std::fill(local.begin(), local.end(), 0);
  ibv_sge sges[2] = {{reinterpret_cast<uint64_t>(local.data()), 1000, la->lkey},
                     {reinterpret_cast<uint64_t>(local.data() + 1000), 3000, la->lkey}};
  ibv_send_wr wr{};
  wr.wr_id = 8;
  wr.sg_list = sges;
  wr.num_sge = 2;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote.data());
  wr.wr.rdma.rkey = rb->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(v.ops.post_send(a, &wr, &bad), 0);
  wc = v.pollUntil(cqa, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 4000u);
  EXPECT_TRUE(holds(local.data(), 4000, 2));
  EXPECT_EQ(local[4000], 0);
  LoopbackStats s = v.fabric.stats();
  EXPECT_EQ(s.wrs_executed, 2u);
  EXPECT_EQ(s.bytes_moved, (1u << 16) + 4000u);
}

// Each violation completes with its error, moves no byte and puts the requester in
// ERR; `check` is run on a fresh connection each time.
TEST_F(LoopbackData, AccessViolationsFailAndMoveNoByte) {
  std::vector<uint8_t> ro(4096), nolocal(4096);
  ibv_mr* ro_mr = v.mr(1, ro.data(), ro.size(), IBV_ACCESS_REMOTE_READ);
  ibv_mr* nolocal_mr = v.mr(0, nolocal.data(), nolocal.size(), IBV_ACCESS_REMOTE_READ);
  ibv_pd* other_pd = v.newPd(1);
  std::vector<uint8_t> foreign(4096);
  ibv_mr* foreign_mr = v.mr(1, foreign.data(), foreign.size(), kAllAccess, other_pd);
  struct Case {
    const char* what;
    ibv_wr_opcode op;
    void* local;
    uint32_t len;
    uint32_t lkey;
    void* remote;
    uint32_t rkey;
    ibv_wc_status want;
  };
  fill(local, 3);
  const Case cases[] = {
      {"WRITE to a read-only region", IBV_WR_RDMA_WRITE, local.data(), 4096, la->lkey, ro.data(),
       ro_mr->rkey, IBV_WC_REM_ACCESS_ERR},
      {"READ into a region without LOCAL_WRITE", IBV_WR_RDMA_READ, nolocal.data(), 4096,
       nolocal_mr->lkey, remote.data(), rb->rkey, IBV_WC_LOC_PROT_ERR},
      {"unknown lkey", IBV_WR_RDMA_WRITE, local.data(), 64, 0x7777, remote.data(), rb->rkey,
       IBV_WC_LOC_PROT_ERR},
      {"an rkey passed as lkey", IBV_WR_RDMA_WRITE, local.data(), 64, la->rkey, remote.data(),
       rb->rkey, IBV_WC_LOC_PROT_ERR},
      {"local SGE past its region", IBV_WR_RDMA_WRITE, local.data() + local.size() - 8, 16,
       la->lkey, remote.data(), rb->rkey, IBV_WC_LOC_PROT_ERR},
      {"remote range past its region", IBV_WR_RDMA_WRITE, local.data(), 16, la->lkey,
       remote.data() + remote.size() - 8, rb->rkey, IBV_WC_REM_ACCESS_ERR},
      {"rkey of another PD", IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, foreign.data(),
       foreign_mr->rkey, IBV_WC_REM_ACCESS_ERR},
      {"an lkey passed as rkey", IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, remote.data(),
       rb->lkey, IBV_WC_REM_ACCESS_ERR},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::fill(remote.begin(), remote.end(), 0xCD);
    std::fill(ro.begin(), ro.end(), 0xCD);
    std::fill(nolocal.begin(), nolocal.end(), 0xCD);
    a = v.qp(0, cqa);
    b = v.qp(1, cqb);
    connect();
    ASSERT_EQ(v.post(a, c.op, c.local, c.len, c.lkey, c.remote, c.rkey, 9, false), 0);
    auto wc = v.pollUntil(cqa, 1);  // unsignaled, yet an error always has a CQE
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, c.want);
    EXPECT_NE(wc[0].vendor_err, 0u);
    for (uint8_t x : remote) ASSERT_EQ(x, 0xCD);
    for (uint8_t x : ro) ASSERT_EQ(x, 0xCD);
    for (uint8_t x : nolocal) ASSERT_EQ(x, 0xCD);
    EXPECT_EQ(a->state, IBV_QPS_RTS) << "ibv_qp.state is what modify_qp set, as in libibverbs";
    ASSERT_EQ(write(0, 64, 10), 0);  // the QP is in ERR: accepted and flushed
    wc = v.pollUntil(cqa, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  }
  EXPECT_EQ(v.fabric.stats().wrs_executed, 0u);
}

TEST_F(LoopbackData, RemoteAccessErrorMovesTheResponderToErrorToo) {
  connect();
  std::vector<uint8_t> ro(64);
  ibv_mr* ro_mr = v.mr(1, ro.data(), ro.size(), IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(v.post(a, IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, ro.data(), ro_mr->rkey), 0);
  ASSERT_EQ(v.pollUntil(cqa, 1).at(0).status, IBV_WC_REM_ACCESS_ERR);
  // b's own posts now flush.
  ibv_mr* lb = v.mr(1, remote.data(), 64);
  ibv_mr* ra = v.mr(0, local.data(), 64);
  ASSERT_EQ(v.post(b, IBV_WR_RDMA_WRITE, remote.data(), 64, lb->lkey, local.data(), ra->rkey), 0);
  ASSERT_EQ(v.pollUntil(cqb, 1).at(0).status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(LoopbackData, ResponderQpWithoutRemoteWriteRefusesWrites) {
  ASSERT_EQ(v.toInit(a), 0);
  ASSERT_EQ(v.toInit(b, IBV_ACCESS_REMOTE_READ), 0);
  ASSERT_EQ(v.toRtr(a, 1, b->qp_num), 0);
  ASSERT_EQ(v.toRtr(b, 0, a->qp_num), 0);
  ASSERT_EQ(v.toRts(a), 0);
  ASSERT_EQ(write(0, 64), 0);
  EXPECT_EQ(v.pollUntil(cqa, 1).at(0).status, IBV_WC_REM_ACCESS_ERR);
}

// In order per QP; unsignaled WRs complete silently and keep their slot until a
// later CQE is polled; max_send_wr is a hard limit (ENOMEM, bad_wr).
TEST_F(LoopbackData, CompletionsInOrderAndSendQueueLimit) {
  connect();
  ibv_send_wr wrs[20]{};
  ibv_sge sges[20]{};
  for (int i = 0; i < 20; ++i) {
    sges[i] = {reinterpret_cast<uint64_t>(local.data() + i * 64), 64, la->lkey};
    wrs[i].wr_id = 100 + i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].send_flags = i % 4 == 3 ? IBV_SEND_SIGNALED : 0;
    wrs[i].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote.data() + i * 64);
    wrs[i].wr.rdma.rkey = rb->rkey;
    wrs[i].next = i + 1 < 20 ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(v.ops.post_send(a, &wrs[0], &bad), ENOMEM);  // max_send_wr is 16
  EXPECT_EQ(bad, &wrs[16]);
  auto wc = v.pollUntil(cqa, 4);
  ASSERT_EQ(wc.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wc[i].wr_id, 103u + 4 * i);
  // Polling the CQE of WR 15 freed all 16 slots: the rest fits now.
  wrs[19].send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(v.ops.post_send(a, &wrs[16], &bad), 0);
  wc = v.pollUntil(cqa, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 119u);
  // 12 unsignaled WRs: only a later CQE frees their slots.
  for (int i = 0; i < 12; ++i) wrs[i].send_flags = 0;
  wrs[11].next = nullptr;
  ASSERT_EQ(v.ops.post_send(a, &wrs[0], &bad), 0);
  wrs[12].next = nullptr;
  wrs[12].send_flags = 0;
  EXPECT_EQ(v.ops.post_send(a, &wrs[12], &bad), 0);
  ibv_send_wr* five = &wrs[13];
  wrs[17].next = nullptr;
  EXPECT_EQ(v.ops.post_send(a, five, &bad), ENOMEM);  // 13 + 3 = 16 fit, the 4th does not
  EXPECT_EQ(bad, &wrs[16]);
}

TEST_F(LoopbackData, AnErrorFlushesTheRestOfTheChainEachWithACqe) {
  connect();
  ibv_send_wr wrs[4]{};
  ibv_sge sges[4]{};
  for (int i = 0; i < 4; ++i) {
    sges[i] = {reinterpret_cast<uint64_t>(local.data()), 64, i == 1 ? 0x4242u : la->lkey};
    wrs[i].wr_id = i;
    wrs[i].sg_list = &sges[i];
    wrs[i].num_sge = 1;
    wrs[i].opcode = IBV_WR_RDMA_WRITE;
    wrs[i].send_flags = i == 0 ? IBV_SEND_SIGNALED : 0;
    wrs[i].wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote.data());
    wrs[i].wr.rdma.rkey = rb->rkey;
    wrs[i].next = i < 3 ? &wrs[i + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(v.ops.post_send(a, &wrs[0], &bad), 0);
  auto wc = v.pollUntil(cqa, 4);
  ASSERT_EQ(wc.size(), 4u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].status, IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[3].status, IBV_WC_WR_FLUSH_ERR);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(wc[i].wr_id, static_cast<uint64_t>(i));
}

TEST_F(LoopbackData, DestroyingAQpRemovesItsCqes) {
  connect();
  ibv_qp* c = v.qp(0, cqa);
  ibv_qp* d = v.qp(1, cqb);
  v.connect(c, 0, d, 1);
  ASSERT_EQ(write(0, 64, 1), 0);
  ASSERT_EQ(v.post(c, IBV_WR_RDMA_WRITE, local.data(), 64, la->lkey, remote.data(), rb->rkey, 2),
            0);
  ASSERT_EQ(write(0, 64, 3), 0);
  v.destroy(a);
  auto wc = v.poll(cqa);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  a = nullptr;
}

}  // namespace
}  // namespace tent::fabric::testing
