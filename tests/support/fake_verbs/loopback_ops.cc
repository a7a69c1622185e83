// The loopback fake's VerbsOps table: device listing and queries, and the creation
// and destruction of contexts, PDs, MRs, CQs and QPs, with the argument checks and
// errno values of libibverbs (create calls set errno and return nullptr; the
// others return an errno value). The datapath lives in loopback_datapath.cc, the
// QP state machine in loopback_qp.cc.
#include <fcntl.h>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/mapped_range.h"
#include "loopback_internal.h"

namespace tent::fabric::testing::loopback {

namespace {

template <class T>
T* fail(int error) {
  errno = error;
  return nullptr;
}

Device* deviceOf(ibv_context* ctx) noexcept {
  return ctx ? selfOf<Device>(ctx->device) : nullptr;
}

ibv_device** getDeviceList(int* num) {
  Fabric* f = currentFabric();
  if (f == nullptr) {
    if (num) *num = 0;
    return fail<ibv_device*>(ENOSYS);
  }
  auto** list = new ibv_device*[f->devices.size() + 1];
  for (size_t i = 0; i < f->devices.size(); ++i) list[i] = &f->devices[i]->handle.ibv;
  list[f->devices.size()] = nullptr;
  if (num) *num = static_cast<int>(f->devices.size());
  return list;
}

ibv_context* openDevice(ibv_device* device) {
  Device* d = selfOf<Device>(device);
  if (d == nullptr) return fail<ibv_context>(ENODEV);
  ContextState* state = openContextState();
  if (state == nullptr) return fail<ibv_context>(EMFILE);
  auto* box = new ContextBox();
  auto* h = &box->handle;
  box->state = state;
  h->self = d;
  h->ibv.device = device;
  h->ibv.cmd_fd = -1;
  h->ibv.async_fd = state->event_fd;
  h->ibv.num_comp_vectors = 1;
  d->fabric->counters.contexts.fetch_add(1);
  return &h->ibv;
}

int closeDevice(ibv_context* ctx) {
  Device* d = deviceOf(ctx);
  if (d == nullptr) return EINVAL;
  d->fabric->counters.contexts.fetch_sub(1);
  auto* box = reinterpret_cast<ContextBox*>(ctx);
  closeContextState(box->state);
  delete box;
  return 0;
}

int queryPort(ibv_context* ctx, uint8_t port, ibv_port_attr* attr) {
  Device* d = deviceOf(ctx);
  if (d == nullptr || port != 1) return EINVAL;
  *attr = d->port;
  return 0;
}

int queryGid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  Device* d = deviceOf(ctx);
  if (d == nullptr || port != 1 || index < 0 || index >= kGidTableLength) return EINVAL;
  std::lock_guard<std::mutex> lock(d->gid_mu);
  *gid = d->gids[index].gid;  // zero for an empty entry, as the kernel reports it
  return 0;
}

int queryGidEx(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* entry,
               uint32_t flags) {
  Device* d = deviceOf(ctx);
  if (d == nullptr || port != 1 || flags != 0 || index >= kGidTableLength) return EINVAL;
  if (!d->gid_used[index]) return ENODATA;
  std::lock_guard<std::mutex> lock(d->gid_mu);
  *entry = d->gids[index];
  return 0;
}

ibv_pd* allocPd(ibv_context* ctx) {
  Device* d = deviceOf(ctx);
  if (d == nullptr) return fail<ibv_pd>(EINVAL);
  auto* pd = new Pd();
  pd->handle.self = pd;
  pd->handle.ibv.context = ctx;
  pd->device = d;
  d->fabric->counters.pds.fetch_add(1);
  return &pd->handle.ibv;
}

int deallocPd(ibv_pd* ibv) {
  Pd* pd = selfOf<Pd>(ibv);
  if (pd == nullptr) return EINVAL;
  if (pd->users.load() != 0) return EBUSY;  // MRs or QPs still use it
  pd->device->fabric->counters.pds.fetch_sub(1);
  delete pd;
  return 0;
}

constexpr int kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                             IBV_ACCESS_RELAXED_ORDERING;

ibv_mr* registerChecked(ibv_pd* ibv, void* addr, size_t length, int access);

// reg_mr as the kernel does it: the registration model's cost and rendezvous around
// the checks and the key allocation.
ibv_mr* regMr(ibv_pd* ibv, void* addr, size_t length, int access) {
  Pd* pd = selfOf<Pd>(ibv);
  if (pd == nullptr) return fail<ibv_mr>(EINVAL);
  Fabric& f = *pd->device->fabric;
  const bool allowed = f.enterRegistration(*pd->device, length);
  ibv_mr* mr = allowed ? registerChecked(ibv, addr, length, access) : fail<ibv_mr>(ENOMEM);
  const int saved = errno;
  f.leaveRegistration();
  if (mr != nullptr) {
    f.counters.registrations.fetch_add(1);
    if (access & IBV_ACCESS_RELAXED_ORDERING) f.counters.relaxed_registrations.fetch_add(1);
  }
  errno = saved;
  return mr;
}

// lkey and rkey differ (unlike mlx5, where they are equal), so a WR that passes one
// for the other fails here; each registration gets fresh keys, never reused.
ibv_mr* registerChecked(ibv_pd* ibv, void* addr, size_t length, int access) {
  Pd* pd = selfOf<Pd>(ibv);
  if (pd == nullptr || length == 0 || (access & ~kKnownAccess) != 0) return fail<ibv_mr>(EINVAL);
  bool remote_write = access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  if (remote_write && !(access & IBV_ACCESS_LOCAL_WRITE)) return fail<ibv_mr>(EINVAL);
  // The kernel pins the pages: unmapped ones, or read-only ones asked to be written, fail.
  const bool writable = remote_write || (access & IBV_ACCESS_LOCAL_WRITE);
  if (!checkMappedRange(reinterpret_cast<uintptr_t>(addr), length, writable).ok())
    return fail<ibv_mr>(EFAULT);
  Fabric& f = *pd->device->fabric;
  auto* mr = new Mr();
  mr->handle.self = mr;
  mr->device = pd->device;
  mr->pd = pd;
  mr->addr = reinterpret_cast<uint64_t>(addr);
  mr->length = length;
  mr->access = access;
  ibv_mr& m = mr->handle.ibv;
  m.context = ibv->context;
  m.pd = ibv;
  m.addr = addr;
  m.length = length;
  {
    std::unique_lock<std::shared_mutex> lock(f.tables);
    uint32_t n = f.next_key++;
    m.handle = n;
    m.lkey = (n << 8) | 0x11;
    m.rkey = (n << 8) | 0x22;
    f.mrs[Fabric::key(*mr->device, m.lkey)] = mr;
    f.mrs[Fabric::key(*mr->device, m.rkey)] = mr;
  }
  pd->users.fetch_add(1);
  f.counters.mrs.fetch_add(1);
  return &m;
}

// Waits for WRs copying from or into the region (they hold `tables` shared).
// A dma-buf MR: the NIC reaches the exporter's memory through the descriptor and WRs
// address it by `iova`. Here the memory must be mapped at `iova` in this process (the
// fake CUDA driver's device memory is); the descriptor must be open.
ibv_mr* regDmabufMr(ibv_pd* ibv, uint64_t offset, size_t length, uint64_t iova, int fd,
                    int access) {
  (void)offset;
  if (fd < 0 || fcntl(fd, F_GETFD) == -1) return fail<ibv_mr>(EBADF);
  return regMr(ibv, reinterpret_cast<void*>(iova), length, access);
}

int deregMr(ibv_mr* ibv) {
  Mr* mr = selfOf<Mr>(ibv);
  if (mr == nullptr) return EINVAL;
  Fabric& f = *mr->device->fabric;
  {
    std::unique_lock<std::shared_mutex> lock(f.tables);
    f.mrs.erase(Fabric::key(*mr->device, ibv->lkey));
    f.mrs.erase(Fabric::key(*mr->device, ibv->rkey));
  }
  mr->pd->users.fetch_sub(1);
  f.counters.mrs.fetch_sub(1);
  delete mr;
  return 0;
}

ibv_cq* createCq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                 int vector) {
  Device* d = deviceOf(ctx);
  if (d == nullptr || cqe < 1 || cqe > d->attr.max_cqe) return fail<ibv_cq>(EINVAL);
  // Completion channels are not emulated: nothing here would ever signal one.
  if (channel != nullptr) return fail<ibv_cq>(EOPNOTSUPP);
  if (vector < 0 || vector >= ctx->num_comp_vectors) return fail<ibv_cq>(EINVAL);
  auto* cq = new Cq(*d, ctx, cqe, cq_context);
  d->fabric->counters.cqs.fetch_add(1);
  return &cq->handle.ibv;
}

int destroyCq(ibv_cq* ibv) {
  Cq* cq = selfOf<Cq>(ibv);
  if (cq == nullptr) return EINVAL;
  if (cq->users() != 0) return EBUSY;  // QPs still use it
  cq->device.fabric->counters.cqs.fetch_sub(1);
  delete cq;
  return 0;
}

bool validCaps(const Device& d, const ibv_qp_cap& cap) {
  return cap.max_send_wr >= 1 && cap.max_send_wr <= static_cast<uint32_t>(d.attr.max_qp_wr) &&
         cap.max_recv_wr <= static_cast<uint32_t>(d.attr.max_qp_wr) &&
         cap.max_send_sge <= static_cast<uint32_t>(d.attr.max_sge) && cap.max_recv_sge <= 1 &&
         cap.max_inline_data == 0;  // the fake takes one receive SGE
}

ibv_qp* createQp(ibv_pd* ibv, ibv_qp_init_attr* init) {
  Pd* pd = selfOf<Pd>(ibv);
  if (pd == nullptr || init == nullptr) return fail<ibv_qp>(EINVAL);
  Cq* send = selfOf<Cq>(init->send_cq);
  Cq* recv = selfOf<Cq>(init->recv_cq);
  Device& d = *pd->device;
  if (init->qp_type != IBV_QPT_RC || init->srq != nullptr) return fail<ibv_qp>(EOPNOTSUPP);
  if (send == nullptr || recv == nullptr || &send->device != &d || &recv->device != &d)
    return fail<ibv_qp>(EINVAL);
  if (!validCaps(d, init->cap)) return fail<ibv_qp>(EINVAL);
  Fabric& f = *d.fabric;
  uint32_t qpn = f.next_qpn.fetch_add(1) & kMax24Bit;  // never reused within a run
  auto qp = std::make_shared<Qp>(d, *pd, *send, *recv, qpn, *init);
  qp->handle.ibv.context = ibv->context;
  {
    std::unique_lock<std::shared_mutex> lock(f.tables);
    f.qps[Fabric::key(d, qpn)] = qp;
  }
  send->attach(qp);
  recv->recv_users.fetch_add(1);
  pd->users.fetch_add(1);
  f.counters.qps.fetch_add(1);
  init->cap.max_inline_data = 0;
  return &qp->handle.ibv;
}

// Removes the QP from the tables (requesters then find no responder), waits for a
// post in progress (the QP's mutex), and removes its CQEs from the CQ.
int destroyQp(ibv_qp* ibv) {
  Qp* qp = selfOf<Qp>(ibv);
  if (qp == nullptr) return EINVAL;
  Fabric& f = qp->fabric;
  std::shared_ptr<Qp> keep;
  {
    std::unique_lock<std::shared_mutex> lock(f.tables);
    auto it = f.qps.find(Fabric::key(qp->device, qp->qpn));
    if (it == f.qps.end() || it->second.get() != qp) return EINVAL;  // destroyed twice
    keep = std::move(it->second);
    f.qps.erase(it);
  }
  qp->markDestroyed();
  qp->send_cq.detach(qp);
  if (&qp->recv_cq != &qp->send_cq) qp->recv_cq.dropCqesOf(qp);
  qp->recv_cq.recv_users.fetch_sub(1);
  qp->pd.users.fetch_sub(1);
  f.counters.qps.fetch_sub(1);
  return 0;  // `keep` may be the last reference; a poller servicing it may hold another
}

}  // namespace

int modifyQp(ibv_qp* ibv, ibv_qp_attr* attr, int mask);  // loopback_qp.cc
int postSend(ibv_qp* ibv, ibv_send_wr* wr, ibv_send_wr** bad);
int postRecv(ibv_qp* ibv, ibv_recv_wr* wr, ibv_recv_wr** bad);
int pollCq(ibv_cq* ibv, int num, ibv_wc* wc);

VerbsOps makeOps() noexcept {
  VerbsOps ops{};
  ops.get_device_list = getDeviceList;
  ops.free_device_list = [](ibv_device** list) { delete[] list; };
  ops.get_device_name = [](ibv_device* d) -> const char* { return d ? d->name : nullptr; };
  ops.open_device = openDevice;
  ops.close_device = closeDevice;
  ops.query_device = [](ibv_context* ctx, ibv_device_attr* attr) {
    Device* d = deviceOf(ctx);
    if (d == nullptr) return EINVAL;
    *attr = d->attr;
    std::lock_guard<std::mutex> lock(d->fabric->reg_mu);
    attr->max_mr_size = d->fabric->reg_model.max_mr_size;
    return 0;
  };
  ops.query_port = queryPort;
  ops.query_gid = queryGid;
  ops.query_gid_ex = queryGidEx;
  ops.alloc_pd = allocPd;
  ops.dealloc_pd = deallocPd;
  ops.reg_mr = regMr;
  ops.reg_dmabuf_mr = regDmabufMr;
  ops.dereg_mr = deregMr;
  ops.create_cq = createCq;
  ops.destroy_cq = destroyCq;
  ops.create_qp = createQp;
  ops.destroy_qp = destroyQp;
  ops.modify_qp = modifyQp;
  ops.post_send = postSend;
  ops.post_recv = postRecv;
  ops.poll_cq = pollCq;
  ops.get_async_event = getAsyncEvent;
  ops.ack_async_event = ackAsyncEvent;
  // Every RoCE device's GIDs sit on its own netdev, always up (loopback_fabric.cc).
  ops.query_netdev = [](uint32_t ifindex, char* name, size_t len, bool* up) {
    if (ifindex < kNetdevIfindexBase) return ENODEV;
    std::snprintf(name, len, "lbnet%u", ifindex - kNetdevIfindexBase);
    *up = true;
    return 0;
  };
  ops.default_route_netdev = [](char*, size_t) { return ENOENT; };
  return ops;
}

}  // namespace tent::fabric::testing::loopback
