// Control path of the verbs QP, CQ and MR: creation bookkeeping and the RC state
// machine RESET -> INIT -> RTR -> RTS (-> ERR) with the attributes real NICs need.
#include <algorithm>
#include <bit>
#include <cstring>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

namespace {
constexpr auto kComponent = log::Component::kFabric;

std::string errnoText(int rc) {
  return std::string(std::strerror(rc)) + " (errno " + std::to_string(rc) + ")";
}

bool isZeroGid(const std::array<uint8_t, 16>& gid) {
  for (uint8_t b : gid) {
    if (b != 0) return false;
  }
  return true;
}
}  // namespace

// ---- MR -----------------------------------------------------------------------

VerbsMr::VerbsMr(const VerbsOps& ops, ibv_mr* mr, uint32_t access) : ops_(ops), mr_(mr) {
  addr_ = mr->addr;
  length_ = mr->length;
  lkey_ = mr->lkey;
  rkey_ = mr->rkey;
  access_ = access;
}

VerbsMr::~VerbsMr() {
  int rc = ops_.dereg_mr(mr_);
  if (rc != 0) TENT_WARN(kFabric, "verbs: dereg_mr failed: %s", errnoText(rc).c_str());
}

// ---- CQ -----------------------------------------------------------------------

VerbsCq::VerbsCq(VerbsDevice& device, ibv_cq* cq, uint32_t depth)
    : device_(device),
      ops_(device.ops()),
      cq_(cq),
      depth_(depth),
      qp_capacity_(depth < kMaxQpsPerCq ? depth : kMaxQpsPerCq),
      qps_(new std::atomic<VerbsQp*>[qp_capacity_]) {
  for (uint32_t i = 0; i < qp_capacity_; ++i) qps_[i].store(nullptr, std::memory_order_relaxed);
  signal_every_ = device.signalEvery();
}

VerbsCq::~VerbsCq() {
  if (reserved_wr_ != 0)
    TENT_WARN(kFabric, "verbs %s: CQ destroyed before its QPs", device_.name().c_str());
  int rc = ops_.destroy_cq(cq_);
  if (rc != 0)
    TENT_WARN(kFabric, "verbs %s: destroy_cq failed: %s", device_.name().c_str(),
              errnoText(rc).c_str());
}

Result<uint32_t> VerbsCq::attach(VerbsQp* qp, uint32_t max_send_wr) {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  if (reserved_wr_ + uint64_t{max_send_wr} > depth_) {
    return Status::ResourceExhausted(
        "verbs " + device_.name() + ": CQ depth " + std::to_string(depth_) +
        " cannot hold another QP of max_send_wr " + std::to_string(max_send_wr) + " (" +
        std::to_string(reserved_wr_) + " entries already reserved); it could overflow");
  }
  for (uint32_t i = 0; i < qp_capacity_; ++i) {
    if (qps_[i].load(std::memory_order_relaxed) == nullptr) {
      qps_[i].store(qp, std::memory_order_release);
      reserved_wr_ += max_send_wr;
      return i;
    }
  }
  return Status::ResourceExhausted("verbs " + device_.name() + ": too many QPs on one CQ");
}

void VerbsCq::detach(uint32_t index, uint32_t max_send_wr) {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  qps_[index].store(nullptr, std::memory_order_release);
  reserved_wr_ -= max_send_wr;
}

// ---- QP -----------------------------------------------------------------------

VerbsQp::VerbsQp(VerbsDevice& device, VerbsCq& cq, ibv_qp* qp, uint32_t max_send_wr,
                 uint32_t max_sge, VerbsCq* recv_cq, uint32_t max_recv_wr)
    : device_(device),
      ops_(device.ops()),
      cq_(cq),
      qp_(qp),
      max_send_wr_(max_send_wr),
      max_sge_(max_sge),
      slot_mask_(std::bit_ceil(uint64_t{max_send_wr}) - 1),
      slots_(new Slot[slot_mask_ + 1]),
      recv_cq_(recv_cq),
      max_recv_wr_(recv_cq != nullptr ? max_recv_wr : 0) {
  if (max_recv_wr_ != 0) {
    recv_mask_ = std::bit_ceil(uint64_t{max_recv_wr_}) - 1;
    recv_wr_ids_.reset(new uint64_t[recv_mask_ + 1]);
  }
}

Status VerbsQp::attachToCq() {
  TENT_ASSIGN_OR_RETURN(cq_index_, cq_.attach(this, max_send_wr_));
  attached_ = true;
  if (max_recv_wr_ != 0) {
    TENT_ASSIGN_OR_RETURN(recv_index_, recv_cq_->attach(this, max_recv_wr_));
    recv_attached_ = true;
  }
  return Status::OK();
}

VerbsQp::~VerbsQp() {
  // Destroying the QP also removes its completions from the CQ (rdma-core
  // providers clean them), so the CQ slot can be reused afterwards.
  int rc = ops_.destroy_qp(qp_);
  if (rc != 0)
    TENT_WARN(kFabric, "verbs %s: destroy_qp failed: %s", device_.name().c_str(),
              errnoText(rc).c_str());
  if (attached_) cq_.detach(cq_index_, max_send_wr_);
  if (recv_attached_) recv_cq_->detach(recv_index_, max_recv_wr_);
}

Status VerbsQp::modify(ibv_qp_attr& attr, int mask, QpState from, QpState to) {
  QpState now = state();
  if (now != from) {
    return Status::FailedPrecondition("verbs " + device_.name() + " qp " + std::to_string(qpNum()) +
                                      ": modify to " + std::string(toString(to)) + " needs state " +
                                      std::string(toString(from)) + ", QP is in " +
                                      std::string(toString(now)));
  }
  int rc = ops_.modify_qp(qp_, &attr, mask);
  if (rc != 0) {
    return Status::IoError("verbs " + device_.name() + " qp " + std::to_string(qpNum()) +
                           ": modify to " + std::string(toString(to)) +
                           " failed: " + errnoText(rc));
  }
  state_.store(to, std::memory_order_release);
  return Status::OK();
}

Status VerbsQp::modifyToInit() {
  const PortSetup& port = device_.port();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port.port_num;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return modify(attr, mask, QpState::kReset, QpState::kInit);
}

// RoCE always routes by GID (GRH); IB uses the LID, and the GRH too when the
// peer has no LID (a routed fabric). The path MTU is the smaller of both ports'
// (a larger one than the peer's port takes is dropped there, one direction only).
Status VerbsQp::modifyToRtr(const QpRemote& remote) {
  const PortSetup& port = device_.port();
  bool global = port.ethernet() || remote.port.lid == 0;
  const std::string who = "verbs " + device_.name() + " qp " + std::to_string(qpNum());
  if (global && isZeroGid(remote.port.gid)) {
    return Status::InvalidArgument(
        who + ": modify to RTR: remote GID is zero and " +
        (port.ethernet() ? "RoCE needs a GID" : "the remote has no LID"));
  }
  ibv_mtu path_mtu = port.path_mtu;
  if (remote.mtu_bytes != 0) {
    auto remote_mtu = mtuFromBytes(remote.mtu_bytes);
    if (!remote_mtu.ok()) return remote_mtu.status().withContext(who + ": the peer's port MTU");
    path_mtu = std::min(path_mtu, *remote_mtu);
  }
  if (remote.traffic.service_level > kMaxServiceLevel || remote.psn > kMaxPsn ||
      remote.local_psn > kMaxPsn) {
    return Status::InvalidArgument(
        who + ": modify to RTR: service level " + std::to_string(remote.traffic.service_level) +
        " (max " + std::to_string(kMaxServiceLevel) + ") or a PSN (" + std::to_string(remote.psn) +
        ", " + std::to_string(remote.local_psn) + "; 24 bits) out of range");
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = path_mtu;
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = port.max_dest_rd_atomic;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = port.port_num;
  attr.ah_attr.dlid = remote.port.lid;
  attr.ah_attr.sl = remote.traffic.service_level;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.static_rate = 0;
  if (global) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.port.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    attr.ah_attr.grh.hop_limit = kHopLimit;
    attr.ah_attr.grh.flow_label = 0;
    attr.ah_attr.grh.traffic_class = remote.traffic.traffic_class;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  TENT_RETURN_IF_ERROR(modify(attr, mask, QpState::kInit, QpState::kRtr));
  sq_psn_ = remote.local_psn;
  return Status::OK();
}

// The QP starts sending at the PSN its peer was told (QpRemote::local_psn at RTR; the
// peer's rq_psn); 0 toward peers that exchange no PSNs.
Status VerbsQp::modifyToRts() {
  const PortSetup& port = device_.port();
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = port.timeout;
  attr.retry_cnt = port.retry_cnt;
  attr.rnr_retry = port.rnr_retry;
  attr.sq_psn = sq_psn_;
  attr.max_rd_atomic = port.max_rd_atomic;
  int mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC;
  return modify(attr, mask, QpState::kRtr, QpState::kRts);
}

// Allowed from any state; the NIC then flushes outstanding WRs (kFlushed).
Status VerbsQp::modifyToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(attr, IBV_QP_STATE, state(), QpState::kError);
}

}  // namespace tent::fabric::verbs
