// Helpers for the loopback fake's own tests: a small verbs program over the raw
// VerbsOps table (open, PD, MR, CQ, QP, connect, post, poll) that destroys what it
// made, in order, when it goes away.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/support/fake_verbs/loopback_verbs.h"

namespace tent::fabric::testing {

inline constexpr int kAllAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct RawVerbs {
  explicit RawVerbs(LoopbackOptions options) : fabric(std::move(options)), ops(fabric.ops()) {
    int n = 0;
    list = ops.get_device_list(&n);
    for (int i = 0; i < n; ++i) {
      contexts.push_back(ops.open_device(list[i]));
      pds.push_back(ops.alloc_pd(contexts.back()));
    }
  }
  static LoopbackOptions twoDevices(OnContractBreak policy = OnContractBreak::kAbort) {
    LoopbackOptions o;
    o.devices = {{"lb0", true, 0}, {"lb1", true, 1}};
    o.on_contract_break = policy;
    return o;
  }
  ~RawVerbs() {
    for (ibv_qp* qp : qps) EXPECT_EQ(ops.destroy_qp(qp), 0);
    for (ibv_mr* mr : mrs) EXPECT_EQ(ops.dereg_mr(mr), 0);
    for (ibv_cq* cq : cqs) EXPECT_EQ(ops.destroy_cq(cq), 0);
    for (ibv_pd* pd : pds) EXPECT_EQ(ops.dealloc_pd(pd), 0);
    for (ibv_context* c : contexts) EXPECT_EQ(ops.close_device(c), 0);
    ops.free_device_list(list);
  }

  ibv_cq* cq(int dev, int depth = 256) {
    cqs.push_back(ops.create_cq(contexts[dev], depth, nullptr, nullptr, 0));
    EXPECT_NE(cqs.back(), nullptr);
    return cqs.back();
  }
  ibv_qp* qp(int dev, ibv_cq* cq, uint32_t max_send_wr = 16, uint32_t max_sge = 4,
             ibv_pd* pd = nullptr) {
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = max_send_wr;
    init.cap.max_send_sge = max_sge;
    init.cap.max_recv_wr = 1;
    init.cap.max_recv_sge = 1;
    ibv_qp* q = ops.create_qp(pd ? pd : pds[dev], &init);
    EXPECT_NE(q, nullptr);
    if (q) qps.push_back(q);
    return q;
  }
  ibv_mr* mr(int dev, void* addr, size_t len, int access = kAllAccess, ibv_pd* pd = nullptr) {
    ibv_mr* m = ops.reg_mr(pd ? pd : pds[dev], addr, len, access);
    EXPECT_NE(m, nullptr);
    if (m) mrs.push_back(m);
    return m;
  }
  ibv_pd* newPd(int dev) {
    pds.push_back(ops.alloc_pd(contexts[dev]));
    return pds.back();
  }
  void destroy(ibv_qp* q) {
    ASSERT_EQ(ops.destroy_qp(q), 0);
    std::erase(qps, q);
  }
  void dereg(ibv_mr* m) {
    ASSERT_EQ(ops.dereg_mr(m), 0);
    std::erase(mrs, m);
  }

  ibv_gid gid(int dev, int index = 3) {
    ibv_gid g{};
    EXPECT_EQ(ops.query_gid(contexts[dev], 1, index, &g), 0);
    return g;
  }
  int toInit(ibv_qp* q, int access = kAllAccess) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = access;
    return ops.modify_qp(q, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  static constexpr int kRtrMask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  // RTR attributes toward QP number `dest`, without a route (set ah_attr).
  static ibv_qp_attr rtrAttr(uint32_t dest, uint32_t rq_psn = 0) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = dest;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    return a;
  }
  // RTR toward QP number `dest` on device `to` (by its RoCE v2 GID).
  int toRtr(ibv_qp* q, int to, uint32_t dest, uint32_t rq_psn = 0) {
    ibv_qp_attr a = rtrAttr(dest, rq_psn);
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = gid(to);
    a.ah_attr.grh.sgid_index = 3;
    a.ah_attr.grh.hop_limit = 64;
    return ops.modify_qp(q, &a, kRtrMask);
  }
  // RTR toward QP number `dest` by LID alone (IB without a GRH).
  int toRtrByLid(ibv_qp* q, uint16_t lid, uint32_t dest) {
    ibv_qp_attr a = rtrAttr(dest);
    a.ah_attr.dlid = lid;
    return ops.modify_qp(q, &a, kRtrMask);
  }
  int toRts(ibv_qp* q, uint8_t timeout = 14, uint8_t retry_cnt = 7) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    return ops.modify_qp(q, &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  int toError(ibv_qp* q) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    return ops.modify_qp(q, &a, IBV_QP_STATE);
  }
  // Connects a (on device da) and b (on device db) to each other: INIT, RTR, RTS.
  void connect(ibv_qp* a, int da, ibv_qp* b, int db, uint8_t timeout = 14, uint8_t retry = 7) {
    ASSERT_EQ(toInit(a), 0);
    ASSERT_EQ(toInit(b), 0);
    ASSERT_EQ(toRtr(a, db, b->qp_num), 0);
    ASSERT_EQ(toRtr(b, da, a->qp_num), 0);
    ASSERT_EQ(toRts(a, timeout, retry), 0);
    ASSERT_EQ(toRts(b, timeout, retry), 0);
  }

  // One RDMA WR with one SGE.
  int post(ibv_qp* q, ibv_wr_opcode op, void* local, uint32_t len, uint32_t lkey, void* remote,
           uint32_t rkey, uint64_t wr_id = 1, bool signaled = true) {
    ibv_sge sge{reinterpret_cast<uint64_t>(local), len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote);
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ops.post_send(q, &wr, &bad);
  }
  // What one poll returns (at most 64 CQEs); a negative poll result gives {}.
  std::vector<ibv_wc> poll(ibv_cq* cq) {
    std::vector<ibv_wc> wc(64);
    int n = ops.poll_cq(cq, 64, wc.data());
    wc.resize(n < 0 ? 0 : static_cast<size_t>(n));
    return wc;
  }
  // Polls until `want` CQEs arrived or 20 s passed (a bound, not an expectation).
  std::vector<ibv_wc> pollUntil(ibv_cq* cq, size_t want) {
    std::vector<ibv_wc> got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      for (const ibv_wc& wc : poll(cq)) got.push_back(wc);
    }
    return got;
  }

  LoopbackVerbs fabric;
  const VerbsOps& ops;
  ibv_device** list = nullptr;
  std::vector<ibv_context*> contexts;
  std::vector<ibv_pd*> pds;
  std::vector<ibv_cq*> cqs;
  std::vector<ibv_qp*> qps;
  std::vector<ibv_mr*> mrs;
};

// A byte pattern that differs per seed.
inline void fill(std::vector<uint8_t>& v, uint8_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
}
inline bool holds(const uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<uint8_t>(seed + i * 7)) return false;
  }
  return true;
}

}  // namespace tent::fabric::testing
