// Soft receive queues, datapath: postRecv, a SEND taking the responder's oldest posted
// receive, and polling receive completions. No allocation; the device spinlock only
// around the receive CQ's QP list (as the send side).
#include <cerrno>

#include "fabric/rc_rules.h"
#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

int SoftQp::postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept {
  if (rq_ == nullptr || state_.load(std::memory_order_acquire) == QpState::kReset) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return EINVAL;
  }
  if (recv_posting_.exchange(true, std::memory_order_acquire)) {
#ifndef NDEBUG
    rc::abortSecondPoster("soft (receive queue)", qp_num_);
#else
    if (bad_wr != nullptr) *bad_wr = wr;
    return EBUSY;
#endif
  }
  int rc = 0;
  uint64_t posted = rq_->posted.load(std::memory_order_relaxed);
  for (; wr != nullptr; wr = wr->next) {
    if (rc::checkRecvShape(*wr, kMaxRecvSge) != 0) {
      rc = EINVAL;
      break;
    }
    if (posted - rq_polled_.load(std::memory_order_acquire) >= max_recv_wr_) {
      rc = ENOMEM;
      break;
    }
    RqSlot& s = rq_slots_[posted % kMaxRecvWr];
    s.wr_id = wr->wr_id;
    s.addr = wr->num_sge != 0 ? wr->sg_list[0].addr : 0;
    s.length = wr->num_sge != 0 ? wr->sg_list[0].length : 0;
    s.lkey = wr->num_sge != 0 ? wr->sg_list[0].lkey : 0;
    s.byte_len = 0;
    s.status = 0;
    s.state.store(rqWord(qp_num_, RqState::kPosted), std::memory_order_release);
    rq_->posted.store(++posted, std::memory_order_release);
  }
  recv_posting_.store(false, std::memory_order_release);
  if (rc != 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

RqHeader* SoftQp::remoteRq() noexcept {
  const uint32_t key = remote_.qps[qpSlotOf(remote_qp_num_)].rq_key.load(std::memory_order_acquire);
  MrSnapshot mr;
  if (key == 0 || !readMr(remote_, key, &mr) || mr.length < kRqAreaBytes) return nullptr;
  if (peer_->sameProcess()) return reinterpret_cast<RqHeader*>(mr.addr);
  if (mr.shm_id == 0) return nullptr;
  uint8_t* base = peer_->segmentBase(mr.shm_id, mr.shm_length);
  return base != nullptr ? reinterpret_cast<RqHeader*>(base + mr.shm_offset) : nullptr;
}

// The receiver not ready: no receive posted (or none at all). As a NIC whose RNR
// retries ran out: the SEND fails and the QP goes to ERR; nothing is placed.
WcStatus SoftQp::executeSend(const SendWr& wr, const iovec* iov, uint64_t total) noexcept {
  RqHeader* rq = remoteRq();
  if (rq == nullptr) return WcStatus::kRnrRetryExceeded;
  const uint64_t c = rq->consumed.load(std::memory_order_relaxed);
  if (c == rq->posted.load(std::memory_order_acquire)) return WcStatus::kRnrRetryExceeded;
  RqSlot& s =
      reinterpret_cast<RqSlot*>(reinterpret_cast<uint8_t*>(rq) + sizeof(RqHeader))[c % kMaxRecvWr];
  uint64_t expected = rqWord(remote_qp_num_, RqState::kPosted);
  if (!s.state.compare_exchange_strong(expected, rqWord(remote_qp_num_, RqState::kClaimed),
                                       std::memory_order_acq_rel)) {
    return WcStatus::kRnrRetryExceeded;  // flushed by the receiver, or another QP's
  }
  WcStatus receiver = WcStatus::kSuccess;
  WcStatus sender = WcStatus::kSuccess;
  MrSnapshot mr;
  if (total > s.length) {
    receiver = WcStatus::kLocalLength;
    sender = WcStatus::kRemoteOperation;
  } else if (total != 0) {
    // The receive buffer must be registered with LOCAL_WRITE on the receiver's device.
    const bool valid = readMr(remote_, s.lkey, &mr);
    if (!valid || !rc::inside(mr.addr, mr.length, s.addr, total) ||
        !(mr.access & kAccessLocalWrite) || mr.gpu_share != kGpuNone) {
      receiver = WcStatus::kLocalProtection;
      sender = WcStatus::kRemoteOperation;
    } else if (dev_->core->copy_payload) {
      SendWr place = wr;
      place.opcode = WrOpcode::kRdmaWrite;
      place.remote_addr = s.addr;
      sender = copy(place, iov, total, mr);
      if (sender != WcStatus::kSuccess) receiver = WcStatus::kLocalProtection;
    }
  }
  s.byte_len = receiver == WcStatus::kSuccess ? static_cast<uint32_t>(total) : 0;
  s.status = static_cast<uint32_t>(receiver);
  s.state.store(rqWord(remote_qp_num_, RqState::kDone), std::memory_order_release);
  rq->consumed.store(c + 1, std::memory_order_release);
  return sender;
}

bool SoftQp::nextRecvLocked(WorkCompletion* wc) noexcept {
  const uint64_t polled = rq_polled_.load(std::memory_order_relaxed);
  if (polled == rq_->posted.load(std::memory_order_acquire)) return false;
  RqSlot& s = rq_slots_[polled % kMaxRecvWr];
  uint64_t word = s.state.load(std::memory_order_acquire);
  if (word == rqWord(qp_num_, RqState::kPosted)) {
    // Not used yet: flushed once the QP is in error, as verbs flushes its receive queue.
    if (state_.load(std::memory_order_acquire) != QpState::kError) return false;
    if (!s.state.compare_exchange_strong(word, rqWord(qp_num_, RqState::kFlushed),
                                         std::memory_order_acq_rel)) {
      return false;  // a sender claimed it just now; its data follows
    }
    word = rqWord(qp_num_, RqState::kFlushed);
  }
  if (word != rqWord(qp_num_, RqState::kDone) && word != rqWord(qp_num_, RqState::kFlushed)) {
    return false;  // claimed: the sender is placing the payload
  }
  wc->wr_id = s.wr_id;
  wc->opcode = WrOpcode::kRecv;
  wc->qp_num = qp_num_;
  wc->vendor_err = 0;
  if (word == rqWord(qp_num_, RqState::kFlushed)) {
    wc->status = WcStatus::kFlushed;
    wc->byte_len = 0;
  } else {
    wc->status = static_cast<WcStatus>(s.status);
    wc->byte_len = s.byte_len;
  }
  s.state.store(rqWord(qp_num_, RqState::kFree), std::memory_order_relaxed);
  rq_polled_.store(polled + 1, std::memory_order_release);
  return true;
}

int CqCore::pollRecvLocked(WorkCompletion* wc, int max) noexcept {
  int n = 0;
  bool more = true;
  // Round-robin over the QPs, one completion each per round: no QP starves another.
  while (n < max && more) {
    more = false;
    for (SoftQp* q = recv_qps; q != nullptr && n < max; q = q->rq_next_) {
      if (q->nextRecvLocked(&wc[n])) {
        ++n;
        more = true;
      }
    }
  }
  return n;
}

}  // namespace tent::fabric::soft
