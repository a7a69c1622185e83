// The tcp provider's post path. Every local check a NIC makes happens here (shared
// with soft: engine/fabric/rc_rules.h); the WRs are queued in the QP's slots and, when
// the connection is up and its send stream idle, sent by this thread at once with a
// non-blocking sendmsg (tcp_tx_datapath.cc). No allocation, no lock; the syscalls are
// that sendmsg and, on rare paths only, one eventfd write to the service thread.
#include <sys/eventfd.h>

#include <cerrno>

#include "fabric/rc_rules.h"
#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

uint32_t QpCore::released() const noexcept {
  return QpWords::released((*dev->qp_words)[slot].load(std::memory_order_acquire));
}

void ServiceLoop::wake() noexcept {
  // datapath-lint: allow(syscall) the one way to reach a sleeping service thread; rare paths
  eventfd_write(evfd_, 1);
}

uint32_t QpCore::rqReleased() const noexcept {
  return QpWords::released((*dev->recv_words)[slot].load(std::memory_order_acquire));
}

// Receives are taken by the service thread in posting order; nothing to wake: a SEND
// arriving finds them in the ring.
int TcpQp::postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept {
  QpCore& q = *q_;
  if (q.max_recv_wr == 0 || q.state.load(std::memory_order_acquire) == QpState::kReset) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return EINVAL;
  }
  if (q.recv_posting.exchange(true, std::memory_order_acquire)) {
#ifndef NDEBUG
    rc::abortSecondPoster("tcp (receive queue)", q.qp_num);
#else
    if (bad_wr != nullptr) *bad_wr = wr;
    return EBUSY;
#endif
  }
  int rc = 0;
  uint64_t posted = q.rq_posted.load(std::memory_order_relaxed);
  for (; wr != nullptr; wr = wr->next) {
    if (rc::checkRecvShape(*wr, 1) != 0) {
      rc = EINVAL;
      break;
    }
    if (static_cast<uint32_t>(posted) - q.rqReleased() >= q.max_recv_wr) {
      rc = ENOMEM;
      break;
    }
    RecvSlot& s = q.rq[posted & q.rq_mask];
    s.wr_id = wr->wr_id;
    s.num_sge = wr->num_sge;
    s.sge = wr->num_sge != 0 ? wr->sg_list[0] : Sge{};
    q.rq_posted.store(++posted, std::memory_order_release);
  }
  q.recv_posting.store(false, std::memory_order_release);
  if (rc != 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

uint32_t TcpQp::outstanding() const noexcept {
  const uint32_t released = q_->released();  // first: the tail only grows
  return static_cast<uint32_t>(q_->tail.load(std::memory_order_acquire)) - released;
}

int TcpQp::postSend(const SendWr* wr, const SendWr** bad_wr) noexcept {
  QpCore& q = *q_;
  // One poster per QP at a time: refused loudly, as soft does (rc_rules.h).
  if (q.posting.exchange(true, std::memory_order_acquire)) {
#ifndef NDEBUG
    rc::abortSecondPoster("tcp", q.qp_num);
#else
    if (bad_wr != nullptr) *bad_wr = wr;
    q.dev->contract_violations.fetch_add(1, std::memory_order_relaxed);
    return EBUSY;
#endif
  }
  const int rc = postChain(wr, bad_wr);
  q.posting.store(false, std::memory_order_release);
  return rc;
}

int TcpQp::postChain(const SendWr* wr, const SendWr** bad_wr) noexcept {
  QpCore& q = *q_;
  MrTable& mrs = q.dev->mrs;
  const uint64_t max_message = q.dev->info.max_message_bytes;
  const uint64_t first = q.post_tail;
  uint64_t tail = first;
  uint32_t released = q.released();
  bool failed = false;  // a WR failed its checks: the QP is in error, the rest is flushed
  int rc = 0;
  for (; wr != nullptr; wr = wr->next) {
    if (!failed && q.state.load(std::memory_order_acquire) != QpState::kRts) {
      rc = EINVAL;
      break;
    }
    if (rc::checkShape(*wr, q.max_sge) != 0) {
      rc = EINVAL;
      break;
    }
    if (static_cast<uint32_t>(tail) - released >= q.max_send_wr) {
      released = q.released();
      if (static_cast<uint32_t>(tail) - released >= q.max_send_wr) {
        rc = ENOMEM;
        break;
      }
    }
    WrSlot& s = q.wr(tail);
    Sge* sges = q.sges(tail);
    s.wr_id = wr->wr_id;
    s.opcode = wr->opcode;
    s.signaled = wr->signaled;
    s.num_sge = wr->num_sge;
    s.final = false;
    s.status = WcStatus::kSuccess;
    s.length = 0;
    for (uint32_t i = 0; i < wr->num_sge; ++i) sges[i] = wr->sg_list[i];
    uint64_t total = 0;
    const WcStatus st =
        failed ? WcStatus::kFlushed
               : rc::checkLocal(
                     *wr, max_message,
                     [&mrs](uint32_t lkey, rc::Region* r) noexcept { return mrs.lookup(lkey, r); },
                     &total);
    if (st != WcStatus::kSuccess) {
      s.final = true;
      s.status = st;
      failed = true;
    } else {
      s.length = static_cast<uint32_t>(total);
      Header h;
      const bool send = wr->opcode == WrOpcode::kSend;
      h.opcode = send                                 ? Opcode::kSendReq
                 : wr->opcode == WrOpcode::kRdmaWrite ? Opcode::kWriteReq
                                                      : Opcode::kReadReq;
      h.length = s.length;
      h.seq = tail;
      h.remote_addr = send ? 0 : wr->remote_addr;
      h.rkey = send ? 0 : wr->rkey;
      encodeHeader(h, s.header);
    }
    ++tail;
  }
  q.post_tail = tail;
  if (tail != first) {
    // A WR that fails its checks moves the QP to ERR when it is posted (as soft does);
    // the WRs before it still complete, in order, then it, then the flushed rest.
    if (failed) q.state.store(QpState::kError, std::memory_order_seq_cst);
    q.tail.store(tail, std::memory_order_seq_cst);
    afterPublish(failed);
  }
  if (rc != 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

void TcpQp::afterPublish(bool failed) noexcept {
  QpCore& q = *q_;
  bool wake = failed;
  // The common case: the connection is up; send now, from this thread.
  if (q.established.load(std::memory_order_seq_cst)) {
    if (kickTx(q) == TxResult::kFault) wake = true;
  } else if (q.conn_lost.load(std::memory_order_acquire)) {
    wake = true;  // the service thread fails them, as to a dead peer
  }
  // Moved to ERR while we posted: the service thread flushes what it has not seen.
  if (q.state.load(std::memory_order_seq_cst) == QpState::kError) wake = true;
  // The service thread sleeps without a timeout when nothing is outstanding; now
  // something is, and a silent peer must still fail it within the retry budget.
  ServiceLoop& loop = *q.dev->loop;
  if (wake || loop.sleeping()) loop.wake();
}

}  // namespace tent::fabric::tcp
