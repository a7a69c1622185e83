// Soft QP control path: creation, the RC state machine, connecting to the peer.
#include <bit>
#include <string>

#include "fabric/soft/soft_internal.h"
#include "tent/log.h"

namespace tent::fabric::soft {

SoftQp::SoftQp(std::shared_ptr<DeviceState> dev, std::shared_ptr<CqCore> cq, uint32_t slot,
               uint32_t qp_num, const QpInitAttr& attr, std::shared_ptr<CqCore> recv_cq)
    : dev_(std::move(dev)),
      cq_(std::move(cq)),
      slot_index_(slot),
      qp_num_(qp_num),
      max_send_wr_(attr.max_send_wr),
      max_sge_(attr.max_sge),
      recv_cq_(std::move(recv_cq)) {
  const uint64_t capacity = std::bit_ceil(uint64_t{max_send_wr_});
  slots_ = std::make_unique<WrSlot[]>(capacity);
  mask_ = capacity - 1;
  if (recv_cq_ != nullptr) max_recv_wr_ = attr.max_recv_wr;
  dev_->view.qps[slot_index_].word.store(qpWord(qp_num_, QpState::kReset),
                                         std::memory_order_release);
}

SoftQp::~SoftQp() {
  {
    SpinGuard g(dev_->lock);
    if (in_port_) dev_->deactivateLocked(*this);
    if (in_cq_) cq_->removeLocked(*this);
    detachRecvLocked();
    state_.store(QpState::kReset, std::memory_order_release);
    dev_->view.qps[slot_index_].word.store(0, std::memory_order_release);
  }
  std::lock_guard<std::mutex> g(dev_->ctrl_mutex);
  dev_->free_qps.push_back(slot_index_);
  cq_->reserved -= max_send_wr_;
  if (recv_cq_ != nullptr) recv_cq_->reserved -= max_recv_wr_;
}

Status SoftQp::transition(QpState from, QpState to) {
  SpinGuard g(dev_->lock);
  const QpState now = state_.load(std::memory_order_relaxed);
  if (now != from) {
    return Status::FailedPrecondition(
        "soft QP " + std::to_string(qp_num_) + ": cannot go to " + std::string(toString(to)) +
        " from " + std::string(toString(now)) + " (needs " + std::string(toString(from)) + ")");
  }
  setStateLocked(to);
  return Status::OK();
}

Status SoftQp::modifyToInit() {
  if (state() == QpState::kInit) return Status::OK();  // INIT -> INIT is legal in verbs
  return transition(QpState::kReset, QpState::kInit);
}

Status SoftQp::modifyToRtr(const QpRemote& remote) {
  if (state() != QpState::kInit) return transition(QpState::kInit, QpState::kRtr);  // the error
  SoftAddress address;
  if (!decodeIdentity(remote.port, &address)) {
    return Status::InvalidArgument("soft QP " + std::to_string(qp_num_) +
                                   ": the remote port identity is not a soft port");
  }
  if (remote.qp_num == 0) {
    return Status::InvalidArgument("soft QP " + std::to_string(qp_num_) + ": remote qp_num is 0");
  }
  if (address.boot != bootTag()) {
    return Status::FailedPrecondition(
        "soft QP " + std::to_string(qp_num_) + ": the peer (pid " + std::to_string(address.pid) +
        ") runs on another kernel (boot id tag " + std::to_string(address.boot) + ", here " +
        std::to_string(bootTag()) +
        "); the soft provider reaches peers through shared memory on one host only; across "
        "hosts use the tcp provider (fabric.provider: tcp)");
  }
  auto peer = dev_->core->attachPeer(address);
  if (!peer.ok()) return peer.status().withContext("soft QP " + std::to_string(qp_num_) + " RTR");
  auto view = (*peer)->attachDevice(address.device_index);
  if (!view.ok()) return view.status().withContext("soft QP " + std::to_string(qp_num_) + " RTR");
  // Written before the state flips to RTR/RTS (release), read by posters after it (acquire).
  peer_ = std::move(peer).value();
  remote_ = *view;
  remote_qp_num_ = remote.qp_num;
  service_class_ = serviceClassOf(remote.traffic.traffic_class);
  TENT_DEBUG(kFabric, "soft QP %u on %s -> pid %u device %u qp %u", qp_num_,
             dev_->info.name.c_str(), address.pid, address.device_index, remote.qp_num);
  return transition(QpState::kInit, QpState::kRtr);
}

Status SoftQp::modifyToRts() {
  return transition(QpState::kRtr, QpState::kRts);
}

Status SoftQp::modifyToError() {
  DeviceState& d = *dev_;
  SpinGuard g(d.lock);
  const uint64_t now = d.core->now();
  d.advanceLocked(static_cast<double>(now));
  flushLocked(now);
  setStateLocked(QpState::kError);
  return Status::OK();
}

void SoftQp::setStateLocked(QpState s) noexcept {
  state_.store(s, std::memory_order_release);
  dev_->view.qps[slot_index_].word.store(qpWord(qp_num_, s), std::memory_order_release);
}

}  // namespace tent::fabric::soft
