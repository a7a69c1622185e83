// Soft QP datapath: postSend. Every check a NIC makes happens here, and so does the
// copy: the bytes move when the WR is posted; only the completion waits for the
// link model (soft_cq_datapath.cc). No allocation, no logging above debug.
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "fabric/rc_rules.h"
#include "fabric/soft/soft_copy.h"
#include "fabric/soft/soft_internal.h"

namespace tent::fabric::soft {

namespace {

WcStatus copyLocal(WrOpcode op, const iovec* iov, uint32_t n, uint8_t* remote,
                   uint64_t stream_min) noexcept {
  for (uint32_t i = 0; i < n; ++i) {
    // dmaCopy has memmove semantics: a loopback WR may overlap its own source.
    if (op == WrOpcode::kRdmaWrite) {
      dmaCopy(remote, iov[i].iov_base, iov[i].iov_len, stream_min);
    } else {
      dmaCopy(iov[i].iov_base, remote, iov[i].iov_len, stream_min);
    }
    remote += iov[i].iov_len;
  }
  return WcStatus::kSuccess;
}

}  // namespace

uint32_t SoftQp::outstanding() const noexcept {
  const uint64_t released = released_.load(std::memory_order_acquire);  // first: tail only grows
  return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) - released);
}

int SoftQp::postSend(const SendWr* wr, const SendWr** bad_wr) noexcept {
  // One poster per QP at a time (our verbs provider keeps its WR bookkeeping for one
  // poster): refused loudly instead of serialised. Debug and test builds abort with a
  // message naming the QP; release builds fail the post with EBUSY.
  if (posting_.exchange(true, std::memory_order_acquire)) {
#ifndef NDEBUG
    rc::abortSecondPoster("soft", qp_num_);
#else
    if (bad_wr != nullptr) *bad_wr = wr;
    dev_->contract_violations.fetch_add(1, std::memory_order_relaxed);
    return EBUSY;
#endif
  }
  const int rc = postChain(wr, bad_wr);
  posting_.store(false, std::memory_order_release);
  return rc;
}

int SoftQp::postChain(const SendWr* wr, const SendWr** bad_wr) noexcept {
  // One timestamp for the whole chain, taken before any copy: the modeled
  // transmission overlaps the copy, as a NIC's DMA overlaps the wire. 0 = not needed
  // (publish() stamps the WRs).
  const uint64_t now = dev_->needs_clock ? dev_->core->now() : 0;
  const uint64_t first = post_tail_;
  uint64_t tail = first;
  PostEffects fx;
  int rc = 0;
  for (; wr != nullptr; wr = wr->next) {
    // After a failed WR the QP is in error: the rest of the chain is accepted and flushed.
    if (!fx.error && state_.load(std::memory_order_acquire) != QpState::kRts) {
      rc = EINVAL;
      break;
    }
    if (rc::checkShape(*wr, max_sge_) != 0) {
      rc = EINVAL;
      break;
    }
    if (tail - released_.load(std::memory_order_acquire) >= max_send_wr_) {
      rc = ENOMEM;
      break;
    }
    WrSlot& s = slot(tail);
    s = WrSlot{};
    s.wr_id = wr->wr_id;
    s.opcode = wr->opcode;
    s.signaled = wr->signaled;
    s.status = fx.error ? WcStatus::kFlushed : execute(*wr, s, &fx);
    if (s.status != WcStatus::kSuccess) fx.error = true;
    ++tail;
  }
  post_tail_ = tail;
  if (tail != first) publish(first, tail, now, fx);
  if (rc != 0 && bad_wr != nullptr) *bad_wr = wr;
  return rc;
}

bool SoftQp::responderUp() const noexcept {
  if (peer_->dead() || !ownerAlive(*remote_.header)) return false;
  const uint64_t word = remote_.qps[qpSlotOf(remote_qp_num_)].word.load(std::memory_order_acquire);
  return word == qpWord(remote_qp_num_, QpState::kRtr) ||
         word == qpWord(remote_qp_num_, QpState::kRts);
}

WcStatus SoftQp::retryExceeded(WrSlot& s, PostEffects* fx) const noexcept {
  s.extra_delay_ns += dev_->core->retry_budget_ns;  // the retransmissions before giving up
  fx->delayed = true;
  return WcStatus::kRetryExceeded;
}

WcStatus SoftQp::execute(const SendWr& wr, WrSlot& s, PostEffects* fx) noexcept {
  DeviceState& d = *dev_;
  FaultHit hit;
  if (d.core->faults.match(d.info.index, qp_num_, wr.opcode, &hit)) {
    const WcStatus st = applyFault(hit, s, fx);
    if (st != WcStatus::kSuccess) return st;
  }
  if (!d.port_up.load(std::memory_order_acquire)) return WcStatus::kRetryExceeded;
  iovec iov[kMaxSge];
  uint64_t total = 0;
  int local_gpu = -1;
  WcStatus st = checkLocal(wr, iov, &total, &local_gpu);
  if (st != WcStatus::kSuccess) return st;
  s.bytes = total;
  // A dead peer or a responder QP that is not RTR/RTS never answers: a NIC retransmits
  // until its retry count runs out, then completes the WR with retry-exceeded.
  if (!responderUp()) return retryExceeded(s, fx);
  if (wr.opcode == WrOpcode::kSend) {
    if (local_gpu >= 0) return WcStatus::kLocalProtection;  // SENDs from host memory only
    st = executeSend(wr, iov, total);
    return st == WcStatus::kRetryExceeded ? retryExceeded(s, fx) : st;
  }
  if (total == 0) return WcStatus::kSuccess;  // zero-length: no rkey check, as in verbs
  MrSnapshot mr;
  st = checkRemote(wr, total, &mr);
  if (st != WcStatus::kSuccess) return st;
  if (!d.core->copy_payload) return WcStatus::kSuccess;  // a benchmark's NIC-side DMA
  if (local_gpu >= 0 || mr.gpu_share != kGpuNone) return copyGpu(wr, iov, mr, local_gpu, s);
  st = copy(wr, iov, total, mr);
  return st == WcStatus::kRetryExceeded ? retryExceeded(s, fx) : st;  // the peer vanished
}

WcStatus SoftQp::applyFault(const FaultHit& hit, WrSlot& s, PostEffects* fx) noexcept {
  switch (hit.action) {
    case FaultAction::kCompletionError:
      return hit.status;
    case FaultAction::kDelay:
      s.extra_delay_ns += hit.delay_ns;
      fx->delayed = true;
      return WcStatus::kSuccess;
    case FaultAction::kQpError:
      fx->qp_error = true;
      return WcStatus::kFlushed;
    case FaultAction::kPortDown:
      dev_->setPortUp(false);
      return WcStatus::kRetryExceeded;
    case FaultAction::kPortUp:
      dev_->setPortUp(true);
      return WcStatus::kSuccess;
    case FaultAction::kHoldPost: {
      const uint64_t until = monotonicNs() + hit.delay_ns;
      while (monotonicNs() < until && dev_->core->faults.holdEpoch() == hit.hold_epoch) {
        cpuRelax();
      }
      return WcStatus::kSuccess;
    }
  }
  return WcStatus::kSuccess;
}

WcStatus SoftQp::checkLocal(const SendWr& wr, iovec* iov, uint64_t* total,
                            int* gpu_device) const noexcept {
  const ControlView& view = dev_->view;
  const WcStatus st = rc::checkLocal(
      wr, dev_->info.max_message_bytes,
      [&view, gpu_device](uint32_t lkey, rc::Region* r) noexcept {
        MrSnapshot mr;
        if (!readMr(view, lkey, &mr)) return false;
        if (mr.gpu_share != kGpuNone && *gpu_device < 0) *gpu_device = mr.gpu_device;
        *r = rc::Region{mr.addr, mr.length, mr.access};
        return true;
      },
      total);
  if (st != WcStatus::kSuccess) return st;
  for (uint32_t i = 0; i < wr.num_sge; ++i) {
    iov[i].iov_base = reinterpret_cast<void*>(wr.sg_list[i].addr);
    iov[i].iov_len = wr.sg_list[i].length;
  }
  return WcStatus::kSuccess;
}

WcStatus SoftQp::checkRemote(const SendWr& wr, uint64_t total, MrSnapshot* mr) const noexcept {
  const bool valid = readMr(remote_, wr.rkey, mr);
  return rc::checkRemote(valid, rc::Region{mr->addr, mr->length, mr->access}, wr.opcode,
                         wr.remote_addr, total);
}

WcStatus SoftQp::copy(const SendWr& wr, const iovec* iov, uint64_t total,
                      const MrSnapshot& mr) noexcept {
  if (peer_->sameProcess()) {
    return copyLocal(wr.opcode, iov, wr.num_sge, reinterpret_cast<uint8_t*>(wr.remote_addr),
                     dev_->core->stream_copy_min_bytes);
  }
  if (mr.shm_id != 0) {
    if (uint8_t* base = peer_->segmentBase(mr.shm_id, mr.shm_length)) {
      return copyLocal(wr.opcode, iov, wr.num_sge,
                       base + mr.shm_offset + (wr.remote_addr - mr.addr),
                       dev_->core->stream_copy_min_bytes);
    }
  }
  iovec remote{reinterpret_cast<void*>(wr.remote_addr), total};
  const pid_t pid = static_cast<pid_t>(peer_->pid());
  const ssize_t done = wr.opcode == WrOpcode::kRdmaWrite
                           ? process_vm_writev(pid, iov, wr.num_sge, &remote, 1, 0)
                           : process_vm_readv(pid, iov, wr.num_sge, &remote, 1, 0);
  if (done == static_cast<ssize_t>(total)) return WcStatus::kSuccess;
  if (done < 0 && errno == ESRCH) {
    peer_->markDead();
    return WcStatus::kRetryExceeded;
  }
  // The registered range is not mapped in the peer any more (freed behind its MR).
  return WcStatus::kRemoteAccess;
}

void SoftQp::publish(uint64_t first, uint64_t last, uint64_t now, const PostEffects& fx) noexcept {
  DeviceState& d = *dev_;
  SpinGuard g(d.lock);
  if (now == 0) now = fx.delayed ? d.core->now() : d.seen_now;
  if (now > d.seen_now) d.seen_now = now;
  d.advanceLocked(static_cast<double>(now));
  // Moved to ERR while we were copying (modifyToError, a port going down), or an
  // injected QP error: everything not yet visible is flushed, these WRs included.
  const bool flush_all = fx.qp_error || state_.load(std::memory_order_relaxed) == QpState::kError;
  if (flush_all) flushLocked(now);
  if (flush_all || fx.error) setStateLocked(QpState::kError);
  // Every WR of this call found the responder up after `now`: a completion visible by
  // `now` (unlimited link, no latency) needs no later check.
  if (!flush_all && !fx.error && now > responder_seen_ns_) responder_seen_ns_ = now;
  tail_.store(last, std::memory_order_release);
  if (flush_all) {
    for (uint64_t i = first; i < last; ++i) {
      slot(i).status = WcStatus::kFlushed;
      completeSlotLocked(slot(i), static_cast<double>(now));
    }
    transmitted_ = last;
  } else if (d.port.bytes_per_ns <= 0) {  // unlimited link: transmitted at once
    for (uint64_t i = first; i < last; ++i) completeSlotLocked(slot(i), static_cast<double>(now));
    transmitted_ = last;
  } else if (!in_port_) {
    d.activateLocked(*this);
  }
  if (!in_cq_) cq_->addLocked(*this);
}

}  // namespace tent::fabric::soft
