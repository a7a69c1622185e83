// realVerbsOps(): the production table. The lambdas wrap what verbs.h defines as
// static inlines or macros, so every entry is a plain function pointer.
#include "fabric/verbs/verbs_ops.h"
#include "fabric/verbs/verbs_netdev.h"

#include <atomic>

namespace tent::fabric {

namespace {

VerbsOps makeRealOps() noexcept {
  VerbsOps ops{};
  ops.get_device_list = [](int* n) { return ibv_get_device_list(n); };
  ops.free_device_list = [](ibv_device** list) { ibv_free_device_list(list); };
  ops.get_device_name = [](ibv_device* d) { return ibv_get_device_name(d); };
  ops.open_device = [](ibv_device* d) { return ibv_open_device(d); };
  ops.close_device = [](ibv_context* c) { return ibv_close_device(c); };
  ops.query_device = [](ibv_context* c, ibv_device_attr* a) { return ibv_query_device(c, a); };
  ops.query_port = [](ibv_context* c, uint8_t port, ibv_port_attr* a) {
    return ibv_query_port(c, port, a);
  };
  ops.query_gid = [](ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
    return ibv_query_gid(c, port, index, gid);
  };
  ops.query_gid_ex = [](ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e,
                        uint32_t flags) { return ibv_query_gid_ex(c, port, index, e, flags); };
  ops.alloc_pd = [](ibv_context* c) { return ibv_alloc_pd(c); };
  ops.dealloc_pd = [](ibv_pd* pd) { return ibv_dealloc_pd(pd); };
  ops.reg_mr = [](ibv_pd* pd, void* addr, size_t length, int access) {
    return ibv_reg_mr(pd, addr, length, access);
  };
#ifdef TENT_HAVE_IBV_DMABUF
  ops.reg_dmabuf_mr = [](ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access) {
    return ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access);
  };
#endif
  ops.dereg_mr = [](ibv_mr* mr) { return ibv_dereg_mr(mr); };
  ops.create_cq = [](ibv_context* c, int cqe, void* cq_context, ibv_comp_channel* channel,
                     int vector) { return ibv_create_cq(c, cqe, cq_context, channel, vector); };
  ops.destroy_cq = [](ibv_cq* cq) { return ibv_destroy_cq(cq); };
  ops.create_qp = [](ibv_pd* pd, ibv_qp_init_attr* a) { return ibv_create_qp(pd, a); };
  ops.destroy_qp = [](ibv_qp* qp) { return ibv_destroy_qp(qp); };
  ops.modify_qp = [](ibv_qp* qp, ibv_qp_attr* a, int mask) { return ibv_modify_qp(qp, a, mask); };
  ops.post_send = [](ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    return ibv_post_send(qp, wr, bad);
  };
  ops.post_recv = [](ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return ibv_post_recv(qp, wr, bad);
  };
  ops.poll_cq = [](ibv_cq* cq, int n, ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); };
  ops.get_async_event = [](ibv_context* c, ibv_async_event* e) {
    return ibv_get_async_event(c, e);
  };
  ops.ack_async_event = [](ibv_async_event* e) { ibv_ack_async_event(e); };
  ops.query_netdev = verbs::queryHostNetdev;
  ops.default_route_netdev = verbs::hostDefaultRouteNetdev;
  return ops;
}

}  // namespace

const VerbsOps& realVerbsOps() noexcept {
  static const VerbsOps ops = makeRealOps();
  return ops;
}

namespace {
std::atomic<const VerbsOps*> g_override{nullptr};
}  // namespace

void setVerbsOpsOverride(const VerbsOps* ops) noexcept {
  g_override.store(ops, std::memory_order_release);
}

const VerbsOps& activeVerbsOps() noexcept {
  const VerbsOps* ops = g_override.load(std::memory_order_acquire);
  return ops != nullptr ? *ops : realVerbsOps();
}

}  // namespace tent::fabric
