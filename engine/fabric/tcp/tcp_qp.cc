// The tcp provider's QP control path: creation, the RC state machine, and handing
// the connection set-up to the service thread (modifyToRtr never blocks on the network).
#include <sched.h>

#include <bit>
#include <string>

#include "fabric/tcp/tcp_internal.h"
#include "tent/log.h"

namespace tent::fabric::tcp {

QpCore::QpCore(std::shared_ptr<DeviceState> device, std::shared_ptr<CqCore> send_cq,
               uint32_t slot_index, uint16_t generation, const QpInitAttr& attr,
               std::shared_ptr<CqCore> receive_cq)
    : dev(std::move(device)),
      cq(std::move(send_cq)),
      slot(slot_index),
      gen(generation),
      qp_num(uint32_t{generation} << kQpSlotBits | slot_index),
      max_send_wr(attr.max_send_wr),
      max_sge(attr.max_sge),
      mask(std::bit_ceil(uint64_t{attr.max_send_wr}) - 1),
      slots(std::make_unique<WrSlot[]>(mask + 1)),
      sge_pool(std::make_unique<Sge[]>((mask + 1) * attr.max_sge)),
      recv_cq(std::move(receive_cq)),
      max_recv_wr(recv_cq != nullptr ? attr.max_recv_wr : 0),
      rq_mask(max_recv_wr != 0 ? std::bit_ceil(uint64_t{max_recv_wr}) - 1 : 0),
      rq(max_recv_wr != 0 ? std::make_unique<RecvSlot[]>(rq_mask + 1) : nullptr) {}

void CqCore::addProgress(QpCore* qp) {
  std::lock_guard<std::mutex> g(progress_mu_);
  qp->progress_next.store(progress_head_.load(std::memory_order_relaxed),
                          std::memory_order_relaxed);
  progress_head_.store(qp, std::memory_order_release);
  progress_count_.fetch_add(1, std::memory_order_relaxed);
}

void CqCore::removeProgress(QpCore* qp) {
  std::lock_guard<std::mutex> g(progress_mu_);
  std::atomic<QpCore*>* link = &progress_head_;
  while (link->load(std::memory_order_relaxed) != qp) {
    QpCore* at = link->load(std::memory_order_relaxed);
    if (at == nullptr) return;  // not in the list
    link = &at->progress_next;
  }
  link->store(qp->progress_next.load(std::memory_order_relaxed), std::memory_order_release);
  progress_count_.fetch_sub(1, std::memory_order_relaxed);
  // Polls that start from now on count in the other reader count and cannot reach
  // `qp`; wait for those that may have (each is inside for one turn per QP at most).
  const uint64_t old = progress_epoch_.fetch_add(1, std::memory_order_seq_cst);
  while (progress_inside_[old & 1].load(std::memory_order_seq_cst) != 0) sched_yield();
}

TcpQp::TcpQp(std::shared_ptr<QpCore> core) : q_(std::move(core)) {
  q_->dev->loop->attach(q_);
  if (q_->dev->caller_progress) q_->cq->addProgress(q_.get());
}

TcpQp::~TcpQp() {
  // First out of the CQ's progress list: from then on no poller touches the QP.
  q_->cq->removeProgress(q_.get());
  DeviceState& dev = *q_->dev;
  dev.loop->detach(q_);  // the loop closed the connection and let go of the QP
  // Completions still in the CQ are stale from now on: each hands its entry back
  // when it is polled; the rest of the reservation comes back now.
  const uint64_t old = (*dev.qp_words)[q_->slot].exchange(0, std::memory_order_acq_rel);
  const uint32_t unpolled = QpWords::unpolled(old);
  q_->cq->reserved.fetch_sub(q_->max_send_wr - unpolled, std::memory_order_acq_rel);
  const uint64_t rold = (*dev.recv_words)[q_->slot].exchange(0, std::memory_order_acq_rel);
  if (q_->recv_cq != nullptr) {
    q_->recv_cq->reserved.fetch_sub(q_->max_recv_wr - QpWords::unpolled(rold),
                                    std::memory_order_acq_rel);
  }
  std::lock_guard<std::mutex> g(dev.ctrl_mutex);
  dev.free_qps.push_back(q_->slot);
}

Status TcpQp::transition(QpState from, QpState to) {
  QpState now = from;
  if (!q_->state.compare_exchange_strong(now, to, std::memory_order_acq_rel)) {
    return Status::FailedPrecondition(
        "tcp QP " + std::to_string(q_->qp_num) + ": cannot go to " + std::string(toString(to)) +
        " from " + std::string(toString(now)) + " (needs " + std::string(toString(from)) + ")");
  }
  return Status::OK();
}

Status TcpQp::modifyToInit() {
  if (state() == QpState::kInit) return Status::OK();  // INIT -> INIT is legal in verbs
  return transition(QpState::kReset, QpState::kInit);
}

Status TcpQp::modifyToRtr(const QpRemote& remote) {
  const std::string who = "tcp QP " + std::to_string(q_->qp_num);
  if (state() != QpState::kInit) return transition(QpState::kInit, QpState::kRtr);  // the error
  if (remote.qp_num == 0 || remote.qp_num >= (1u << 24)) {
    return Status::InvalidArgument(who + ": remote qp_num " + std::to_string(remote.qp_num) +
                                   " is not a QP number");
  }
  auto address = addressOf(remote.port);
  if (!address.ok()) return address.status().withContext(who + " RTR");
  const PortIdentity& local = q_->dev->identity;
  if (remote.port == local && remote.qp_num == q_->qp_num) {
    return Status::InvalidArgument(who + ": a tcp QP cannot be connected to itself");
  }
  // Read by the service thread after it sees RTR (release below) or the command.
  q_->remote = remote;
  // How this QP marks its connection (IP_TOS / IPV6_TCLASS), set by whichever side opens
  // the socket before it carries a byte: requests and our responses to the peer alike.
  q_->traffic_class = remote.traffic.traffic_class;
  q_->role = weConnect(local, q_->qp_num, remote) ? Role::kConnector : Role::kAcceptor;
  TENT_RETURN_IF_ERROR(transition(QpState::kInit, QpState::kRtr));
  TENT_DEBUG(kFabric, "tcp QP %u on %s -> %s qp %u (%s)", q_->qp_num, q_->dev->info.name.c_str(),
             toText(*address).c_str(), remote.qp_num,
             q_->role == Role::kConnector ? "connects" : "accepts");
  q_->dev->loop->rtr(q_);
  return Status::OK();
}

Status TcpQp::modifyToRts() {
  return transition(QpState::kRtr, QpState::kRts);
}

Status TcpQp::modifyToError() {
  q_->flush_requested.store(true, std::memory_order_seq_cst);
  q_->state.store(QpState::kError, std::memory_order_seq_cst);
  q_->dev->loop->error(q_);
  return Status::OK();
}

}  // namespace tent::fabric::tcp
