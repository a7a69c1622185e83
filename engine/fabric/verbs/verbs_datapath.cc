// The verbs provider's hot path: postSend() and poll(). No allocation, no lock,
// no logging above debug. See verbs_objects.h for the wr_id encoding.
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "fabric/verbs/verbs_objects.h"
#include "tent/log.h"

namespace tent::fabric::verbs {

WcStatus toWcStatus(ibv_wc_status status) noexcept {
  switch (status) {
    case IBV_WC_SUCCESS:
      return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR:
      return WcStatus::kLocalLength;
    case IBV_WC_LOC_PROT_ERR:
      return WcStatus::kLocalProtection;
    case IBV_WC_REM_ACCESS_ERR:
      return WcStatus::kRemoteAccess;
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_REQ_ERR:  // e.g. a SEND longer than the posted receive
      return WcStatus::kRemoteOperation;
    case IBV_WC_RETRY_EXC_ERR:
      return WcStatus::kRetryExceeded;
    case IBV_WC_WR_FLUSH_ERR:
      return WcStatus::kFlushed;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return WcStatus::kRnrRetryExceeded;
    default:
      return WcStatus::kGeneral;
  }
}

// ---- post ---------------------------------------------------------------------

uint32_t VerbsQp::outstanding() const noexcept {
  return static_cast<uint32_t>(posted_.load(std::memory_order_acquire) -
                               retired_.load(std::memory_order_acquire));
}

// True when WR number `seq` would exceed max_send_wr. `retired_view` caches
// retired_ and is refreshed only when it says full, so a post costs one shared load.
bool VerbsQp::sendQueueFull(uint64_t seq, uint64_t& retired_view) noexcept {
  if (seq - retired_view < max_send_wr_) return false;
  retired_view = retired_.load(std::memory_order_acquire);
  return seq - retired_view >= max_send_wr_;
}

// Fills one ibv_send_wr (and its SGEs) for sequence `seq`; returns the payload length.
uint64_t VerbsQp::fillWr(const SendWr& wr, uint64_t seq, ibv_send_wr* out, ibv_sge* sges) noexcept {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    sges[i].addr = wr.sg_list[i].addr;
    sges[i].length = wr.sg_list[i].length;
    sges[i].lkey = wr.sg_list[i].lkey;
    bytes += wr.sg_list[i].length;
  }
  *out = ibv_send_wr{};
  out->wr_id = (uint64_t{cq_index_} << kWrIdIndexShift) | (seq & kWrIdSeqMask);
  out->sg_list = wr.num_sge ? sges : nullptr;
  out->num_sge = static_cast<int>(wr.num_sge);
  out->opcode = wr.opcode == WrOpcode::kRdmaRead ? IBV_WR_RDMA_READ
                : wr.opcode == WrOpcode::kSend   ? IBV_WR_SEND
                                                 : IBV_WR_RDMA_WRITE;
  out->send_flags = 0;  // postChain() signals what CQ moderation asks for
  out->wr.rdma.remote_addr = wr.remote_addr;
  out->wr.rdma.rkey = wr.rkey;
  // The slot is free: sendQueueFull() guaranteed its previous WR retired. The
  // completion side reads it only after the NIC completed this WR, which is after
  // the doorbell's store barrier in ibv_post_send.
  Slot& slot = slots_[seq & slot_mask_];
  slot.wr_id = wr.wr_id;
  slot.byte_len = static_cast<uint32_t>(bytes);
  slot.opcode = wr.opcode;
  slot.infer = wr.signaled;  // until postChain() has the NIC signal it
  return bytes;
}

void VerbsQp::signalByNic(uint64_t seq, ibv_send_wr* wr) noexcept {
  wr->send_flags = IBV_SEND_SIGNALED;
  slots_[seq & slot_mask_].infer = false;  // its own CQE reports it
}

// Builds the chain in stack chunks of kPostChunkWrs WRs / kPostChunkSges SGEs and
// posts each chunk with one ibv_post_send. One poster per QP at a time (the
// engine's lane and lcore ownership guarantee it).
int VerbsQp::postSend(const SendWr* wr, const SendWr** bad_wr) noexcept {
#ifndef NDEBUG
  // Debug and test builds catch a second concurrent poster instead of corrupting the
  // slot bookkeeping (the soft provider does the same in every build).
  if (posting_.exchange(true, std::memory_order_acquire)) {
    // datapath-lint: allow(log) the last words of a contract break, then abort
    std::fprintf(stderr, "tent verbs provider: two threads posted on QP %u at the same time\n",
                 qpNum());
    std::abort();
  }
  const int rc = postChain(wr, bad_wr);
  posting_.store(false, std::memory_order_release);
  return rc;
#else
  return postChain(wr, bad_wr);
#endif
}

int VerbsQp::postChain(const SendWr* wr, const SendWr** bad_wr) noexcept {
  if (state_.load(std::memory_order_acquire) != QpState::kRts) {
    *bad_wr = wr;
    return EINVAL;
  }
  ibv_send_wr wrs[kPostChunkWrs];
  ibv_sge sges[kPostChunkSges];
  const SendWr* sources[kPostChunkWrs];
  uint64_t seq = posted_.load(std::memory_order_relaxed);
  uint64_t retired_view = retired_.load(std::memory_order_acquire);
  while (wr != nullptr) {
    int n = 0;
    int used_sges = 0;
    int error = 0;
    uint32_t unsignaled = 0;  // WRs to report since the last one the NIC signals
    int last_report = -1;
    for (; wr != nullptr && n < kPostChunkWrs; wr = wr->next) {
      if (wr->num_sge > max_sge_ || (wr->num_sge > 0 && wr->sg_list == nullptr) ||
          wr->opcode == WrOpcode::kRecv) {
        error = EINVAL;
        break;
      }
      if (used_sges + static_cast<int>(wr->num_sge) > kPostChunkSges) break;  // next chunk
      if (sendQueueFull(seq + n, retired_view)) {
        error = ENOMEM;
        break;
      }
      fillWr(*wr, seq + n, &wrs[n], &sges[used_sges]);
      if (wr->signaled) {
        last_report = n;
        if (++unsignaled >= signal_every_) {
          signalByNic(seq + n, &wrs[n]);
          unsignaled = 0;
        }
      }
      if (n > 0) wrs[n - 1].next = &wrs[n];
      sources[n] = wr;
      used_sges += static_cast<int>(wr->num_sge);
      ++n;
    }
    // Every chunk ends signaled, so no WR waits for a later post to complete.
    if (unsignaled > 0) signalByNic(seq + last_report, &wrs[last_report]);
    if (n > 0) {
      ibv_send_wr* ibv_bad = nullptr;
      int rc = ops_.post_send(qp_, wrs, &ibv_bad);
      if (rc != 0) {
        ptrdiff_t posted = (ibv_bad >= wrs && ibv_bad < wrs + n) ? ibv_bad - wrs : 0;
        posted_.store(seq + posted, std::memory_order_release);
        *bad_wr = sources[posted];
        TENT_DLOG(kFabric, "verbs qp %u: post_send failed rc=%d at wr %td", qpNum(), rc, posted);
        return rc;
      }
      seq += n;
      posted_.store(seq, std::memory_order_release);
    }
    if (error != 0) {
      *bad_wr = wr;
      return error;
    }
  }
  return 0;
}

// Receives: one poster at a time (the QP's owner), posted in chunks on the stack.
int VerbsQp::postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept {
  if (max_recv_wr_ == 0 || state_.load(std::memory_order_acquire) == QpState::kReset) {
    *bad_wr = wr;
    return EINVAL;
  }
  ibv_recv_wr wrs[kRecvChunkWrs];
  ibv_sge sges[kRecvChunkWrs];
  const RecvWr* sources[kRecvChunkWrs];
  uint64_t seq = recv_posted_.load(std::memory_order_relaxed);
  while (wr != nullptr) {
    int n = 0;
    int error = 0;
    for (; wr != nullptr && n < kRecvChunkWrs; wr = wr->next) {
      if (wr->num_sge > 1 || (wr->num_sge > 0 && wr->sg_list == nullptr)) {
        error = EINVAL;
        break;
      }
      if (seq + n - recv_retired_.load(std::memory_order_acquire) >= max_recv_wr_) {
        error = ENOMEM;
        break;
      }
      recv_wr_ids_[(seq + n) & recv_mask_] = wr->wr_id;
      wrs[n] = ibv_recv_wr{};
      wrs[n].wr_id =
          kWrIdRecvFlag | (uint64_t{recv_index_} << kWrIdIndexShift) | ((seq + n) & kWrIdSeqMask);
      if (wr->num_sge == 1) {
        sges[n] = ibv_sge{wr->sg_list[0].addr, wr->sg_list[0].length, wr->sg_list[0].lkey};
        wrs[n].sg_list = &sges[n];
        wrs[n].num_sge = 1;
      }
      if (n > 0) wrs[n - 1].next = &wrs[n];
      sources[n] = wr;
      ++n;
    }
    if (n > 0) {
      ibv_recv_wr* ibv_bad = nullptr;
      const int rc = ops_.post_recv(qp_, wrs, &ibv_bad);
      if (rc != 0) {
        const ptrdiff_t posted = (ibv_bad >= wrs && ibv_bad < wrs + n) ? ibv_bad - wrs : 0;
        recv_posted_.store(seq + posted, std::memory_order_release);
        *bad_wr = sources[posted];
        return rc;
      }
      seq += n;
      recv_posted_.store(seq, std::memory_order_release);
    }
    if (error != 0) {
      *bad_wr = wr;
      return error;
    }
  }
  return 0;
}

uint64_t VerbsQp::takeRecv(uint64_t seq48) noexcept {
  const uint64_t posted = recv_posted_.load(std::memory_order_acquire);
  const uint64_t seq = posted - (((posted & kWrIdSeqMask) - seq48) & kWrIdSeqMask);
  const uint64_t wr_id = recv_wr_ids_[seq & recv_mask_];
  recv_retired_.store(seq + 1, std::memory_order_release);  // receives complete in order
  return wr_id;
}

// ---- completions --------------------------------------------------------------

uint64_t VerbsQp::fullSeq(uint64_t seq48) const noexcept {
  // posted_ is at most max_send_wr ahead of any WR still to complete.
  const uint64_t posted = posted_.load(std::memory_order_acquire);
  return posted - (((posted & kWrIdSeqMask) - seq48) & kWrIdSeqMask);
}

// Retires every WR up to and including `seq48` (unsignaled ones before it too).
void VerbsQp::retire(uint64_t seq48) noexcept {
  const uint64_t retired_to = fullSeq(seq48) + 1;
  uint64_t current = retired_.load(std::memory_order_relaxed);
  while (current < retired_to &&
         !retired_.compare_exchange_weak(current, retired_to, std::memory_order_acq_rel)) {
  }
}

void VerbsCq::translateRecv(VerbsQp& qp, const ibv_wc& in, WorkCompletion* out) noexcept {
  out->wr_id = qp.takeRecv(in.wr_id & kWrIdSeqMask);
  out->opcode = WrOpcode::kRecv;
  out->status = toWcStatus(in.status);
  out->byte_len = out->status == WcStatus::kSuccess ? in.byte_len : 0;
  out->qp_num = in.qp_num;
  out->vendor_err = in.vendor_err;
  if (out->status != WcStatus::kSuccess && out->status != WcStatus::kFlushed) qp.markError();
}

void VerbsCq::translateSend(VerbsQp& qp, const ibv_wc& in, WorkCompletion* out) noexcept {
  const uint64_t seq48 = in.wr_id & kWrIdSeqMask;
  const VerbsQp::Slot& slot = qp.slotOf(seq48);
  out->wr_id = slot.wr_id;
  out->opcode = slot.opcode;  // ibv_wc.opcode is undefined for error completions
  out->byte_len = slot.byte_len;
  out->status = toWcStatus(in.status);
  out->qp_num = in.qp_num;
  out->vendor_err = in.vendor_err;
  // Any error completion means the NIC moved the QP to the error state.
  if (out->status != WcStatus::kSuccess) {
    qp.markError();
    qp.noteErrorCompletion();
  }
  qp.retire(seq48);
}

bool VerbsCq::emit(const ibv_wc& in, WorkCompletion* wc, int max, int* done) noexcept {
  const uint32_t index = static_cast<uint32_t>(in.wr_id >> kWrIdIndexShift);
  VerbsQp* qp = index < qp_capacity_ ? qps_[index].load(std::memory_order_acquire) : nullptr;
  // A QP destroyed with completions in flight (or its slot reused while this CQE was
  // held): destroy_qp removed its CQEs from the CQ, this one is stale.
  if (qp == nullptr || qp->qpNum() != in.qp_num) return true;
  if (in.wr_id & kWrIdRecvFlag) {
    if (*done == max) return false;
    translateRecv(*qp, in, &wc[(*done)++]);
    return true;
  }
  // RC completes in order: the WRs before this one that the NIC did not signal are
  // complete too (flushed when an error came before them).
  const uint64_t seq = qp->fullSeq(in.wr_id & kWrIdSeqMask);
  for (uint64_t next = qp->retiredSeq(); next < seq; next = qp->retiredSeq()) {
    const VerbsQp::Slot& slot = qp->slotAt(next);
    if (slot.infer) {
      if (*done == max) return false;
      WorkCompletion& out = wc[(*done)++];
      out.wr_id = slot.wr_id;
      out.opcode = slot.opcode;
      out.byte_len = slot.byte_len;
      out.status = qp->errorSeen() ? WcStatus::kFlushed : WcStatus::kSuccess;
      out.qp_num = in.qp_num;
      out.vendor_err = 0;
    }
    qp->retireNext(next);
  }
  if (*done == max) return false;
  translateSend(*qp, in, &wc[(*done)++]);
  return true;
}

int VerbsCq::poll(WorkCompletion* wc, int max) noexcept {
  // One translating poller at a time: a CQE names its WR by a slot of the QP's ring,
  // and another poller retiring a later WR of that QP would free the slot before this
  // one reads it. A poll that finds the CQ taken returns 0 at once (the holder takes
  // the completions); nothing waits.
  if (polling_.exchange(true, std::memory_order_acquire)) return 0;
  const int done = pollOwned(wc, max);
  polling_.store(false, std::memory_order_release);
  return done;
}

// Reads CQEs only as far as their completions surely fit (each stands for at most
// signal_every), so a CQE is held across calls only when `max` is below that.
int VerbsCq::pollOwned(WorkCompletion* wc, int max) noexcept {
  int done = 0;
  bool drained = false;
  while (done < max) {
    if (held_next_ == held_count_) {
      if (drained) break;
      int want = (max - done) / static_cast<int>(signal_every_);
      want = want < 1 ? 1 : (want > kPollChunk ? kPollChunk : want);
      const int n = ops_.poll_cq(cq_, want, held_);
      held_next_ = 0;
      held_count_ = n > 0 ? n : 0;
      if (n < 0) {
        TENT_DLOG(kFabric, "verbs cq: poll_cq failed rc=%d", n);
        if (done == 0) return -1;  // the error repeats on the next call
        break;
      }
      if (n == 0) break;
      drained = n < want;
    }
    if (!emit(held_[held_next_], wc, max, &done)) break;
    ++held_next_;
  }
  if (done > 0) device_.countCompletions(static_cast<uint64_t>(done));
  return done;
}

}  // namespace tent::fabric::verbs
