// The loopback QP's control path: the RC state machine. modify_qp checks what the
// kernel's ib_modify_qp_is_ok() and a NIC driver check: the transition, that the
// mask holds every required attribute and nothing outside required + optional, and
// the attribute values (port, P_Key index, MTU, address vector, 24-bit numbers,
// RDMA-read depths). Any violation is EINVAL and leaves the QP as it was.
#include <cerrno>
#include <cstring>

#include "loopback_internal.h"

namespace tent::fabric::testing::loopback {

namespace {

struct Transition {
  ibv_qp_state from;
  ibv_qp_state to;
  int required;
  int optional;
};

// RC rows of the kernel's qp_state_table (drivers/infiniband/core/verbs.c).
constexpr Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
         IBV_QP_MIN_RNR_TIMER,
     IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
         IBV_QP_PATH_MIG_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
         IBV_QP_MIN_RNR_TIMER},
};

// Whether `mask` is a valid RC modify from `from` to `to`. RESET and ERR are
// reachable from every state with the state alone.
bool transitionOk(ibv_qp_state from, ibv_qp_state to, int mask) {
  const int extra = mask & ~IBV_QP_STATE;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return extra == 0;
  for (const Transition& t : kTransitions) {
    if (t.from != from || t.to != to) continue;
    return (extra & t.required) == t.required && (extra & ~(t.required | t.optional)) == 0;
  }
  return false;
}

constexpr int kQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

bool isZero(const ibv_gid& gid) {
  static const ibv_gid kZero{};
  return std::memcmp(gid.raw, kZero.raw, sizeof(gid.raw)) == 0;
}

}  // namespace

Qp::Qp(Device& d, Pd& p, Cq& send, Cq& recv, uint32_t qp_num, const ibv_qp_init_attr& init)
    : fabric(*d.fabric),
      device(d),
      pd(p),
      send_cq(send),
      recv_cq(recv),
      qpn(qp_num),
      max_send_wr(init.cap.max_send_wr),
      max_sge(static_cast<int>(init.cap.max_send_sge)),
      sig_all(init.sq_sig_all != 0),
      max_recv_wr(init.cap.max_recv_wr),
      sq_(new Wqe[init.cap.max_send_wr]),
      sge_pool_(new ibv_sge[size_t{init.cap.max_send_wr} * (max_sge > 0 ? max_sge : 1)]) {
  handle.self = this;
  ibv_qp& q = handle.ibv;
  q.qp_context = init.qp_context;
  q.pd = &p.handle.ibv;
  q.send_cq = &send.handle.ibv;
  q.recv_cq = &recv.handle.ibv;
  q.qp_num = qp_num;
  q.state = IBV_QPS_RESET;
  q.qp_type = IBV_QPT_RC;
  for (uint32_t i = 0; i < max_send_wr; ++i)
    sq_[i].sges = &sge_pool_[size_t{i} * (max_sge ? max_sge : 1)];
  rq_.reset(new Rqe[max_recv_wr > 0 ? max_recv_wr : 1]);
}

// ibv_qp.state is not touched: libibverbs keeps there what modify_qp last set,
// not the moves the NIC makes by itself (to ERR on an error completion).
void Qp::setStateLocked(ibv_qp_state s) noexcept {
  state_.store(s, std::memory_order_release);
}

// A remote access error seen as responder moves us to ERR (as on a NIC); it is
// applied under our own mutex at our next operation.
void Qp::foldAsyncErrorLocked() noexcept {
  if (!async_error_.exchange(false, std::memory_order_acq_rel)) return;
  ibv_qp_state s = state_.load(std::memory_order_relaxed);
  if (s != IBV_QPS_RESET) setStateLocked(IBV_QPS_ERR);
}

bool Qp::answers(const Device& from, uint32_t from_qpn, uint32_t psn) const noexcept {
  ibv_qp_state s = state_.load(std::memory_order_acquire);
  if ((s != IBV_QPS_RTR && s != IBV_QPS_RTS) || async_error_.load(std::memory_order_acquire))
    return false;
  // Our peer, with the PSN it starts sending at: otherwise every packet is out of
  // sequence (or not for us) and the requester retries until it gives up.
  return remote_device_.load(std::memory_order_acquire) == &from &&
         remote_qpn_.load(std::memory_order_acquire) == from_qpn &&
         rq_psn_.load(std::memory_order_acquire) == psn;
}

int Qp::checkAttrsLocked(const ibv_qp_attr& a, int mask) const noexcept {
  const ibv_port_attr& port = device.port;
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= port.pkey_tbl_len) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) && (a.qp_access_flags & ~kQpAccess) != 0) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > port.active_mtu))
    return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > kMax24Bit) return EINVAL;
  if ((mask & IBV_QP_RQ_PSN) && a.rq_psn > kMax24Bit) return EINVAL;
  if ((mask & IBV_QP_SQ_PSN) && a.sq_psn > kMax24Bit) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > device.attr.max_qp_rd_atom)
    return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > device.attr.max_qp_init_rd_atom)
    return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
  if (mask & IBV_QP_AV) {
    const ibv_ah_attr& av = a.ah_attr;
    if (av.port_num != 1) return EINVAL;
    bool roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    if (roce && !av.is_global) return EINVAL;  // RoCE routes by GRH only
    if (!av.is_global && av.dlid == 0) return EINVAL;
    if (av.is_global) {
      int sgid = av.grh.sgid_index;
      if (sgid >= kGidTableLength || !device.gid_used[sgid] || isZero(av.grh.dgid)) return EINVAL;
    }
  }
  return 0;
}

// The route is an address, not a check: a GID or LID no device owns is accepted
// here and makes every WR end in retry-exceeded, as a real fabric would.
void Qp::applyAvLocked(const ibv_ah_attr& av) {
  const Device* to = av.is_global ? fabric.deviceByGid(av.grh.dgid) : fabric.deviceByLid(av.dlid);
  remote_device_.store(to, std::memory_order_release);
}

int Qp::modify(const ibv_qp_attr& attr, int mask) {
  std::lock_guard<std::mutex> lock(mu_);
  foldAsyncErrorLocked();
  if (destroyed_) return EINVAL;
  const ibv_qp_state cur = state_.load(std::memory_order_relaxed);
  if ((mask & IBV_QP_CUR_STATE) && attr.cur_qp_state != cur) return EINVAL;
  const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr.qp_state : cur;
  if (!transitionOk(cur, next, mask)) return EINVAL;
  if (int rc = checkAttrsLocked(attr, mask); rc != 0) return rc;
  if (mask & IBV_QP_ACCESS_FLAGS) access_flags_.store(attr.qp_access_flags);
  if (mask & IBV_QP_AV) applyAvLocked(attr.ah_attr);
  if (mask & IBV_QP_DEST_QPN) remote_qpn_.store(attr.dest_qp_num);
  if (mask & IBV_QP_RQ_PSN) rq_psn_.store(attr.rq_psn);
  if (mask & IBV_QP_SQ_PSN) sq_psn_ = attr.sq_psn;
  if (mask & IBV_QP_TIMEOUT) timeout_ = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) retry_cnt_ = attr.retry_cnt;
  if (next == IBV_QPS_RTR || next == IBV_QPS_RTS) {
    LoopbackTransition t;
    t.device = device.spec.name;
    t.qp_num = qpn;
    t.state = next;
    t.traffic_class = attr.ah_attr.grh.traffic_class;
    t.service_level = attr.ah_attr.sl;
    t.path_mtu = attr.path_mtu;
    t.rq_psn = attr.rq_psn;
    t.sq_psn = attr.sq_psn;
    if (cur != next) fabric.recordTransition(t);
  }
  setStateLocked(next);
  handle.ibv.state = next;
  if (next == IBV_QPS_ERR) {
    progressLocked();  // flushes every WR not yet completed
    flushReceives();
  }
  if (next == IBV_QPS_RESET) resetLocked();
  return 0;
}

// RESET forgets the send queue, the connection and the QP's CQEs.
void Qp::resetLocked() {
  send_cq.dropCqesOf(this);
  posted_ = executed_ = 0;
  freed_.store(0, std::memory_order_release);
  stalled_ = false;
  setWantsServiceLocked(false);
  access_flags_.store(0);
  remote_device_.store(nullptr);
  remote_qpn_.store(0);
  rq_psn_.store(0);
}

void Qp::markDestroyed() {
  std::lock_guard<std::mutex> lock(mu_);
  destroyed_ = true;
  stalled_ = false;
  setWantsServiceLocked(false);
  setStateLocked(IBV_QPS_RESET);  // a requester no longer finds a responder here
}

// (retry_cnt + 1) x 4.096 us x 2^timeout; timeout 0 means "retry forever".
uint64_t Qp::retryBudgetNs() const noexcept {
  if (timeout_ == 0) return UINT64_MAX;
  return (uint64_t{retry_cnt_} + 1) * 4096 * (uint64_t{1} << timeout_);
}

int modifyQp(ibv_qp* ibv, ibv_qp_attr* attr, int mask) {
  Qp* qp = selfOf<Qp>(ibv);
  if (qp == nullptr || attr == nullptr) return EINVAL;
  return qp->modify(*attr, mask);
}

}  // namespace tent::fabric::testing::loopback
