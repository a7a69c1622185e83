// The loopback fake device's control path over the raw VerbsOps table: devices,
// ports and GIDs, the fake sysfs tree, resource checks, the RC state machine and
// the attribute masks modify_qp accepts.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <fstream>
#include <string>

#include "loopback_test_util.h"

namespace tent::fabric::testing {
namespace {

std::string gidText(const ibv_gid& g) {
  char text[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, g.raw, text, sizeof(text));
  return text;
}

TEST(LoopbackControl, DevicesByNameWithActivePortsAndAGidEach) {
  LoopbackOptions o;
  o.devices = {{"lb0", true, 0}, {"ib0", false, 1}};
  RawVerbs v(std::move(o));
  ASSERT_EQ(v.contexts.size(), 2u);
  EXPECT_STREQ(v.ops.get_device_name(v.list[0]), "lb0");
  EXPECT_STREQ(v.ops.get_device_name(v.list[1]), "ib0");
  EXPECT_EQ(v.list[2], nullptr);
  ibv_port_attr roce{}, ib{};
  ASSERT_EQ(v.ops.query_port(v.contexts[0], 1, &roce), 0);
  ASSERT_EQ(v.ops.query_port(v.contexts[1], 1, &ib), 0);
  EXPECT_EQ(v.ops.query_port(v.contexts[0], 2, &roce), EINVAL);
  EXPECT_EQ(roce.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(roce.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(roce.lid, 0);
  EXPECT_EQ(ib.link_layer, IBV_LINK_LAYER_INFINIBAND);
  EXPECT_NE(ib.lid, 0);
  // RoCE: link-local and IPv4-mapped, each as v1 and v2; the rest of the table is empty.
  ibv_gid_entry e{};
  ASSERT_EQ(v.ops.query_gid_ex(v.contexts[0], 1, 3, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(gidText(e.gid), "::ffff:10.77.0.1");
  EXPECT_EQ(v.ops.query_gid_ex(v.contexts[0], 1, 4, &e, 0), ENODATA);
  EXPECT_EQ(v.ops.query_gid_ex(v.contexts[0], 1, 8, &e, 0), EINVAL);
  ASSERT_EQ(v.ops.query_gid_ex(v.contexts[1], 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_IB);
  EXPECT_NE(gidText(v.gid(0, 0)), gidText(v.gid(1, 0)));  // a GID names its device
  ibv_device_attr attr{};
  ASSERT_EQ(v.ops.query_device(v.contexts[0], &attr), 0);
  EXPECT_EQ(attr.phys_port_cnt, 1);
  EXPECT_GT(attr.max_qp_wr, 0);
}

TEST(LoopbackControl, SysfsTreeGivesNumaNodePciAndCounters) {
  RawVerbs v(RawVerbs::twoDevices());
  const std::string path = v.list[1]->ibdev_path;
  EXPECT_EQ(path.rfind(v.fabric.sysfsRoot(), 0), 0u);
  std::ifstream numa(path + "/device/numa_node");
  int node = -1;
  ASSERT_TRUE(numa >> node);
  EXPECT_EQ(node, 1);
  std::ifstream xmit(path + "/ports/1/counters/port_xmit_data");
  uint64_t words = 1;
  ASSERT_TRUE(xmit >> words);
  EXPECT_EQ(words, 0u);
}

TEST(LoopbackControl, ResourceChecksGiveLibibverbsErrors) {
  RawVerbs v(RawVerbs::twoDevices());
  std::vector<uint8_t> buf(4096);
  errno = 0;
  EXPECT_EQ(v.ops.reg_mr(v.pds[0], buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);  // REMOTE_WRITE needs LOCAL_WRITE
  EXPECT_EQ(v.ops.reg_mr(v.pds[0], buf.data(), 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
  ibv_mr* a = v.mr(0, buf.data(), buf.size());
  ibv_mr* b = v.mr(0, buf.data(), buf.size());
  EXPECT_NE(a->lkey, a->rkey);
  EXPECT_NE(a->lkey, b->lkey);
  EXPECT_NE(a->rkey, b->rkey);
  EXPECT_EQ(v.ops.dealloc_pd(v.pds[0]), EBUSY);  // MRs still use it

  EXPECT_EQ(v.ops.create_cq(v.contexts[0], 0, nullptr, nullptr, 0), nullptr);
  ibv_cq* cq0 = v.cq(0);
  ibv_cq* cq1 = v.cq(1);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq0;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 0;
  init.cap.max_send_sge = 1;
  EXPECT_EQ(v.ops.create_qp(v.pds[0], &init), nullptr);  // max_send_wr 0
  init.cap.max_send_wr = 40000;
  EXPECT_EQ(v.ops.create_qp(v.pds[0], &init), nullptr);  // above max_qp_wr
  init.cap.max_send_wr = 8;
  init.send_cq = cq1;
  EXPECT_EQ(v.ops.create_qp(v.pds[0], &init), nullptr);  // a CQ of another device
  EXPECT_EQ(errno, EINVAL);
  init.send_cq = cq0;
  init.qp_type = IBV_QPT_UD;
  EXPECT_EQ(v.ops.create_qp(v.pds[0], &init), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_qp* qp = v.qp(0, cq0);
  EXPECT_EQ(qp->state, IBV_QPS_RESET);
  EXPECT_EQ(v.ops.destroy_cq(cq0), EBUSY);  // a QP still uses it
  v.destroy(qp);
  LoopbackStats s = v.fabric.stats();
  EXPECT_EQ(s.qps, 0);
  EXPECT_EQ(s.mrs, 2);
  EXPECT_EQ(s.cqs, 2);
}

TEST(LoopbackControl, ModifyQpChecksTransitionsMasksAndValues) {
  RawVerbs v(RawVerbs::twoDevices());
  ibv_cq* cq = v.cq(0);
  ibv_qp* qp = v.qp(0, cq);
  ibv_qp* peer = v.qp(1, v.cq(1));
  EXPECT_EQ(v.toRtr(qp, 1, peer->qp_num), EINVAL);  // RESET -> RTR skips INIT
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_EQ(v.ops.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), EINVAL)
      << "PKEY_INDEX is required";
  EXPECT_EQ(v.ops.modify_qp(qp, &a,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
                                IBV_QP_TIMEOUT),
            EINVAL)
      << "TIMEOUT is not allowed at INIT";
  a.port_num = 2;
  EXPECT_EQ(
      v.ops.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      EINVAL)
      << "no port 2";
  EXPECT_EQ(qp->state, IBV_QPS_RESET);  // refused modifies change nothing
  ASSERT_EQ(v.toInit(qp), 0);
  EXPECT_EQ(v.toRts(qp), EINVAL);  // INIT -> RTS skips RTR

  ibv_qp_attr r = RawVerbs::rtrAttr(peer->qp_num);
  r.ah_attr.dlid = 1;
  const int rtr = RawVerbs::kRtrMask;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr), EINVAL) << "RoCE needs a GRH";
  r.ah_attr.is_global = 1;
  r.ah_attr.grh.sgid_index = 3;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr), EINVAL) << "zero dgid";
  r.ah_attr.grh.dgid = v.gid(1);
  r.ah_attr.grh.sgid_index = 5;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr), EINVAL) << "empty sgid entry";
  r.ah_attr.grh.sgid_index = 3;
  r.max_dest_rd_atomic = 17;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr), EINVAL) << "above max_qp_rd_atom";
  r.max_dest_rd_atomic = 16;
  r.dest_qp_num = 1u << 24;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr), EINVAL) << "QP numbers have 24 bits";
  r.dest_qp_num = peer->qp_num;
  EXPECT_EQ(v.ops.modify_qp(qp, &r, rtr & ~IBV_QP_MIN_RNR_TIMER), EINVAL);
  ASSERT_EQ(v.ops.modify_qp(qp, &r, rtr), 0);
  EXPECT_EQ(qp->state, IBV_QPS_RTR);
  EXPECT_EQ(v.toRts(qp, 32), EINVAL);  // timeout has 5 bits
  ASSERT_EQ(v.toRts(qp), 0);
  ibv_qp_attr same{};
  same.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(v.ops.modify_qp(qp, &same, IBV_QP_ACCESS_FLAGS), 0);  // RTS -> RTS
  EXPECT_EQ(v.ops.modify_qp(qp, &same, IBV_QP_ACCESS_FLAGS | IBV_QP_DEST_QPN), EINVAL);
  ASSERT_EQ(v.toError(qp), 0);
  EXPECT_EQ(v.toError(qp), 0);  // ERR -> ERR
  EXPECT_EQ(v.toInit(qp), EINVAL);
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(v.ops.modify_qp(qp, &reset, IBV_QP_STATE), 0);
  EXPECT_EQ(v.toInit(qp), 0);  // a reset QP starts over
}

TEST(LoopbackControl, IbRoutesByLidWithoutGrh) {
  LoopbackOptions o;
  o.devices = {{"ib0", false, 0}, {"ib1", false, 0}};
  RawVerbs v(std::move(o));
  ibv_cq* cq0 = v.cq(0);
  ibv_cq* cq1 = v.cq(1);
  ibv_qp* a = v.qp(0, cq0);
  ibv_qp* b = v.qp(1, cq1);
  ibv_port_attr p0{}, p1{};
  v.ops.query_port(v.contexts[0], 1, &p0);
  v.ops.query_port(v.contexts[1], 1, &p1);
  ASSERT_EQ(v.toInit(a), 0);
  ASSERT_EQ(v.toInit(b), 0);
  EXPECT_EQ(v.toRtrByLid(a, 0, b->qp_num), EINVAL);  // no LID and no GRH: no route at all
  ASSERT_EQ(v.toRtrByLid(a, p1.lid, b->qp_num), 0);
  ASSERT_EQ(v.toRtrByLid(b, p0.lid, a->qp_num), 0);
  ASSERT_EQ(v.toRts(a), 0);
  ASSERT_EQ(v.toRts(b), 0);
  std::vector<uint8_t> src(256), dst(256, 0);
  fill(src, 5);
  ibv_mr* ms = v.mr(0, src.data(), src.size());
  ibv_mr* md = v.mr(1, dst.data(), dst.size());
  ASSERT_EQ(v.post(a, IBV_WR_RDMA_WRITE, src.data(), 256, ms->lkey, dst.data(), md->rkey), 0);
  auto wc = v.pollUntil(cq0, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(holds(dst.data(), dst.size(), 5));
}

TEST(LoopbackControl, PostOutsideRtsIsRefusedWithBadWr) {
  RawVerbs v(RawVerbs::twoDevices());
  ibv_cq* cq = v.cq(0);
  ibv_qp* qp = v.qp(0, cq);
  std::vector<uint8_t> buf(64);
  ibv_mr* m = v.mr(0, buf.data(), buf.size());
  ASSERT_EQ(v.toInit(qp), 0);
  ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), 64, m->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(v.ops.post_send(qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(v.poll(cq).empty());
}

}  // namespace
}  // namespace tent::fabric::testing
