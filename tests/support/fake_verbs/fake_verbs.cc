#include "fake_verbs.h"

#include <utility>

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

namespace tent::fabric::testing {

namespace {

FakeVerbs* g_fake = nullptr;

ibv_device** getDeviceList(int* n) {
  if (g_fake->list_returns_null) {
    if (n) *n = 0;
    errno = ENOSYS;
    return nullptr;
  }
  auto** list = new ibv_device*[g_fake->devices.size() + 1];
  for (size_t i = 0; i < g_fake->devices.size(); ++i) list[i] = g_fake->devices[i].get();
  list[g_fake->devices.size()] = nullptr;
  if (n) *n = static_cast<int>(g_fake->devices.size());
  return list;
}

ibv_context* openDevice(ibv_device* device) {
  if (g_fake->fail_open) {
    errno = ENODEV;
    return nullptr;
  }
  auto failing = g_fake->fail_open_of.find(device->name);
  if (failing != g_fake->fail_open_of.end()) {
    errno = failing->second;
    return nullptr;
  }
  auto ctx = std::make_unique<ibv_context>();
  ctx->device = device;
  g_fake->contexts.push_back(std::move(ctx));
  ++g_fake->opened;
  return g_fake->contexts.back().get();
}

int queryGidEx(ibv_context*, uint32_t, uint32_t index, ibv_gid_entry* entry, uint32_t) {
  if (g_fake->query_gid_ex_rc != 0) return g_fake->query_gid_ex_rc;
  auto it = g_fake->gids.find(static_cast<int>(index));
  if (it == g_fake->gids.end()) return ENODATA;
  *entry = it->second;
  return 0;
}

int queryGid(ibv_context*, uint8_t, int index, ibv_gid* gid) {
  auto it = g_fake->gids.find(index);
  if (it == g_fake->gids.end()) {
    std::memset(gid, 0, sizeof(*gid));
    return 0;  // real query_gid gives a zero GID for an empty entry
  }
  *gid = it->second.gid;
  return 0;
}

ibv_pd* allocPd(ibv_context* ctx) {
  auto pd = std::make_unique<ibv_pd>();
  pd->context = ctx;
  g_fake->pd_objects.push_back(std::move(pd));
  ++g_fake->pds;
  return g_fake->pd_objects.back().get();
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  g_fake->reg_access.push_back(access);
  g_fake->reg_addrs.push_back(addr);
  if (g_fake->fail_reg_mr) {
    errno = EFAULT;
    return nullptr;
  }
  if (g_fake->reject_relaxed_ordering && (access & IBV_ACCESS_RELAXED_ORDERING)) {
    errno = EINVAL;  // a kernel older than the optional access flags
    return nullptr;
  }
  auto mr = std::make_unique<ibv_mr>();
  mr->pd = pd;
  mr->addr = addr;
  mr->length = length;
  mr->lkey = g_fake->next_key++;
  mr->rkey = g_fake->next_key++;
  g_fake->mr_objects.push_back(std::move(mr));
  ++g_fake->mrs;
  return g_fake->mr_objects.back().get();
}

ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  g_fake->dmabuf_regs.push_back({offset, length, iova, fd, access});
  if (g_fake->fail_reg_dmabuf_mr != 0) {
    errno = g_fake->fail_reg_dmabuf_mr;
    return nullptr;
  }
  auto mr = std::make_unique<ibv_mr>();
  mr->pd = pd;
  mr->addr = reinterpret_cast<void*>(iova);
  mr->length = length;
  mr->lkey = g_fake->next_key++;
  mr->rkey = g_fake->next_key++;
  g_fake->mr_objects.push_back(std::move(mr));
  ++g_fake->mrs;
  return g_fake->mr_objects.back().get();
}

ibv_cq* createCq(ibv_context* ctx, int cqe, void*, ibv_comp_channel*, int) {
  auto cq = std::make_unique<ibv_cq>();
  cq->context = ctx;
  cq->cqe = cqe;
  g_fake->cq_objects.push_back(std::move(cq));
  ++g_fake->cqs;
  return g_fake->cq_objects.back().get();
}

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  g_fake->qp_inits.push_back(*attr);
  if (g_fake->fail_create_qp) {
    errno = ENOMEM;
    return nullptr;
  }
  auto qp = std::make_unique<ibv_qp>();
  qp->pd = pd;
  qp->qp_num = g_fake->next_qp_num++;
  qp->state = IBV_QPS_RESET;
  qp->send_cq = attr->send_cq;
  g_fake->qp_objects.push_back(std::move(qp));
  ++g_fake->qps;
  return g_fake->qp_objects.back().get();
}

int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  g_fake->modifies.push_back({qp->qp_num, *attr, mask});
  auto it = g_fake->modify_rc.find(attr->qp_state);
  if (it != g_fake->modify_rc.end()) return it->second;
  qp->state = attr->qp_state;
  return 0;
}

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  int n = 0;
  for (; wr != nullptr; wr = wr->next, ++n) {
    if (static_cast<long>(g_fake->posted.size()) == g_fake->fail_post_at) {
      *bad = wr;
      g_fake->post_call_sizes.push_back(n);
      return g_fake->fail_post_rc;
    }
    FakeVerbs::PostedWr p;
    p.qp_num = qp->qp_num;
    p.wr_id = wr->wr_id;
    p.opcode = wr->opcode;
    p.send_flags = wr->send_flags;
    p.remote_addr = wr->wr.rdma.remote_addr;
    p.rkey = wr->wr.rdma.rkey;
    p.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    g_fake->posted.push_back(std::move(p));
  }
  g_fake->post_call_sizes.push_back(n);
  return 0;
}

int pollCq(ibv_cq*, int max, ibv_wc* wc) {
  if (g_fake->poll_rc < 0) return g_fake->poll_rc;
  int n = 0;
  while (n < max && !g_fake->cq_entries.empty()) {
    wc[n++] = g_fake->cq_entries.front();
    g_fake->cq_entries.pop_front();
  }
  if (auto hook = std::exchange(g_fake->inside_poll, nullptr)) hook();
  return n;
}

int queryNetdev(uint32_t ifindex, char* name, size_t name_len, bool* up) {
  auto it = g_fake->netdevs.find(ifindex);
  if (it == g_fake->netdevs.end()) return ENODEV;
  std::snprintf(name, name_len, "%s", it->second.name.c_str());
  *up = it->second.up;
  return 0;
}

int defaultRouteNetdev(char* name, size_t name_len) {
  if (g_fake->default_route.empty()) return ENOENT;
  std::snprintf(name, name_len, "%s", g_fake->default_route.c_str());
  return 0;
}

VerbsOps makeFakeOps() {
  VerbsOps ops{};
  ops.get_device_list = getDeviceList;
  ops.free_device_list = [](ibv_device** list) { delete[] list; };
  ops.get_device_name = [](ibv_device* d) -> const char* { return d->name; };
  ops.open_device = openDevice;
  ops.close_device = [](ibv_context*) { return ++g_fake->closed, 0; };
  ops.query_device = [](ibv_context*, ibv_device_attr* a) { return *a = g_fake->device_attr, 0; };
  ops.query_port = [](ibv_context* c, uint8_t, ibv_port_attr* a) {
    auto own = g_fake->port_attr_of.find(c->device->name);
    return *a = own != g_fake->port_attr_of.end() ? own->second : g_fake->port_attr, 0;
  };
  ops.query_gid = queryGid;
  ops.query_gid_ex = queryGidEx;
  ops.alloc_pd = allocPd;
  ops.dealloc_pd = [](ibv_pd*) { return --g_fake->pds, 0; };
  ops.reg_mr = regMr;
  ops.reg_dmabuf_mr = regDmabufMr;
  ops.dereg_mr = [](ibv_mr*) { return --g_fake->mrs, 0; };
  ops.create_cq = createCq;
  ops.destroy_cq = [](ibv_cq*) { return --g_fake->cqs, 0; };
  ops.create_qp = createQp;
  ops.destroy_qp = [](ibv_qp*) { return --g_fake->qps, 0; };
  ops.modify_qp = modifyQp;
  ops.post_send = postSend;
  ops.poll_cq = pollCq;
  ops.query_netdev = queryNetdev;
  ops.default_route_netdev = defaultRouteNetdev;
  return ops;
}

}  // namespace

FakeVerbs::FakeVerbs() {
  g_fake = this;
  device_attr.phys_port_cnt = 1;
  device_attr.max_qp_wr = 4096;
  device_attr.max_sge = 30;
  device_attr.max_cqe = 65536;
  device_attr.max_qp_rd_atom = 16;
  device_attr.max_qp_init_rd_atom = 16;
  port_attr.state = IBV_PORT_ACTIVE;
  port_attr.active_mtu = IBV_MTU_4096;
  port_attr.max_mtu = IBV_MTU_4096;
  port_attr.gid_tbl_len = 8;
  port_attr.link_layer = IBV_LINK_LAYER_ETHERNET;
  port_attr.active_speed = 32;  // EDR lanes
  port_attr.active_width = 2;   // 4x: 100 Gb/s
}

FakeVerbs::~FakeVerbs() {
  g_fake = nullptr;
}

void FakeVerbs::addDevice(const std::string& name, Kind kind) {
  auto d = std::make_unique<ibv_device>();
  d->node_type = IBV_NODE_CA;
  d->transport_type = IBV_TRANSPORT_IB;
  if (kind == Kind::kEfa) {
    d->node_type = IBV_NODE_UNSPECIFIED;
    d->transport_type = IBV_TRANSPORT_UNSPECIFIED;
  } else if (kind == Kind::kIwarp) {
    d->node_type = IBV_NODE_RNIC;
    d->transport_type = IBV_TRANSPORT_IWARP;
  }
  if (kind == Kind::kInfiniband) {
    port_attr_of[name] = port_attr;
    port_attr_of[name].link_layer = IBV_LINK_LAYER_INFINIBAND;
    port_attr_of[name].lid = static_cast<uint16_t>(devices.size() + 1);
  }
  std::snprintf(d->name, sizeof(d->name), "%s", name.c_str());
  std::snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/nonexistent/infiniband/%s", name.c_str());
  devices.push_back(std::move(d));
}

uint32_t FakeVerbs::netdevIndex(const std::string& name) {
  for (const auto& [index, netdev] : netdevs) {
    if (netdev.name == name) return index;
  }
  const uint32_t index = static_cast<uint32_t>(netdevs.size()) + 2;  // 1 is lo
  netdevs[index] = Netdev{name, true};
  return index;
}

void FakeVerbs::setGid(int index, ibv_gid_type type, const std::string& text,
                       const std::string& netdev) {
  ibv_gid_entry e{};
  e.ndev_ifindex = netdev.empty() ? 0 : netdevIndex(netdev);
  inet_pton(AF_INET6, text.c_str(), e.gid.raw);
  e.gid_index = static_cast<uint32_t>(index);
  e.port_num = 1;
  e.gid_type = type;
  gids[index] = e;
}

void FakeVerbs::complete(size_t index, ibv_wc_status status, uint32_t vendor_err) {
  ibv_wc wc{};
  wc.wr_id = posted.at(index).wr_id;
  wc.status = status;
  wc.qp_num = posted[index].qp_num;
  wc.vendor_err = vendor_err;
  // Verbs leaves opcode undefined for error completions: make it wrong on purpose.
  wc.opcode =
      status == IBV_WC_SUCCESS
          ? (posted[index].opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE)
          : IBV_WC_SEND;
  cq_entries.push_back(wc);
}

void FakeVerbs::completeAllSignaled(ibv_wc_status status) {
  for (; next_signaled < posted.size(); ++next_signaled) {
    if (posted[next_signaled].send_flags & IBV_SEND_SIGNALED) complete(next_signaled, status);
  }
}

const VerbsOps& fakeOps() {
  static const VerbsOps ops = makeFakeOps();
  return ops;
}

FakeVerbs* currentFake() {
  return g_fake;
}

}  // namespace tent::fabric::testing
