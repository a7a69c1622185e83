// The loopback fake's datapath: post_send executes WRs in order per QP at post
// time (checks, then memmove) and queues their CQEs; poll_cq hands each CQE to
// exactly one poller. A WR whose responder does not answer waits (and every WR
// behind it) until its responder answers or the retry budget runs out; the budget
// is checked whenever the send CQ is polled, so no helper thread is needed.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loopback_internal.h"

namespace tent::fabric::testing::loopback {

namespace {

constexpr size_t kServiceBatch = 16;
// ibv_wc.opcode is undefined for error completions: give one no WR here has.
constexpr ibv_wc_opcode kUndefinedOpcode = IBV_WC_SEND;

uint32_t vendorErr(ibv_wc_status status) noexcept {
  return status == IBV_WC_SUCCESS ? 0 : 0x100u + status;
}

}  // namespace

// Detects a second thread inside post_send of one QP. The provider keeps its WR
// bookkeeping for one poster at a time; two at once lose or duplicate WRs.
struct PosterCheck {
  explicit PosterCheck(Qp& q) noexcept : qp(q) {
    if (qp.posters_.fetch_add(1, std::memory_order_acq_rel) == 0) return;
    char what[200];
    std::snprintf(what, sizeof(what),
                  "two threads inside post_send on QP %u of %s at the same time (the provider "
                  "allows one poster per QP at a time)",
                  qp.qpn, qp.device.spec.name.c_str());
    qp.fabric.contractBreak(qp.fabric.counters.concurrent_posts, what);
  }
  ~PosterCheck() { qp.posters_.fetch_sub(1, std::memory_order_acq_rel); }
  PosterCheck(const PosterCheck&) = delete;
  PosterCheck& operator=(const PosterCheck&) = delete;
  Qp& qp;
};

int Qp::post(ibv_send_wr* wr, ibv_send_wr** bad) noexcept {
  PosterCheck check(*this);
  if (fabric.options.on_post) fabric.options.on_post(qpn);
  std::lock_guard<std::mutex> lock(mu_);  // serialises what the check let through
  foldAsyncErrorLocked();
  int rc = 0;
  for (; wr != nullptr; wr = wr->next) {
    rc = acceptLocked(*wr);
    if (rc != 0) {
      *bad = wr;
      break;
    }
  }
  progressLocked();  // the WRs before a refused one are posted
  return rc;
}

// Copies one WR into the send queue. ERR accepts and flushes, as a NIC does.
int Qp::acceptLocked(const ibv_send_wr& wr) noexcept {
  ibv_qp_state s = state_.load(std::memory_order_relaxed);
  if (s != IBV_QPS_RTS && s != IBV_QPS_ERR) return EINVAL;
  if (wr.opcode != IBV_WR_RDMA_WRITE && wr.opcode != IBV_WR_RDMA_READ && wr.opcode != IBV_WR_SEND) {
    return EINVAL;
  }
  if (wr.num_sge < 0 || wr.num_sge > max_sge || (wr.num_sge > 0 && wr.sg_list == nullptr))
    return EINVAL;
  if (wr.send_flags & IBV_SEND_INLINE) return EINVAL;  // max_inline_data is 0
  if (posted_ - freed_.load(std::memory_order_acquire) >= max_send_wr) return ENOMEM;
  Wqe& w = slot(posted_);
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.signaled = sig_all || (wr.send_flags & IBV_SEND_SIGNALED);
  w.num_sge = wr.num_sge;
  w.remote_addr = wr.wr.rdma.remote_addr;
  w.rkey = wr.wr.rdma.rkey;
  w.length = 0;
  for (int i = 0; i < wr.num_sge; ++i) {
    w.sges[i] = wr.sg_list[i];
    w.length += wr.sg_list[i].length;
  }
  ++posted_;
  return 0;
}

// Executes the WRs not yet executed, in order, until one waits for its responder.
void Qp::progressLocked() noexcept {
  foldAsyncErrorLocked();
  while (executed_ < posted_) {
    const Wqe& w = slot(executed_);
    if (state_.load(std::memory_order_relaxed) == IBV_QPS_ERR) {
      completeLocked(w, IBV_WC_WR_FLUSH_ERR);
      continue;
    }
    ibv_wc_status status = IBV_WC_SUCCESS;
    if (!executeLocked(w, &status)) {
      if (!stalled_) {
        stalled_ = true;
        uint64_t budget = retryBudgetNs();
        stall_deadline_ = budget == UINT64_MAX ? UINT64_MAX : fabric.now() + budget;
        setWantsServiceLocked(true);
      }
      if (stall_deadline_ == UINT64_MAX || fabric.now() < stall_deadline_) return;
      status = IBV_WC_RETRY_EXC_ERR;
    }
    stalled_ = false;
    completeLocked(w, status);
    if (status != IBV_WC_SUCCESS) {
      setStateLocked(IBV_QPS_ERR);
      flushReceives();
    }
  }
  stalled_ = false;
  setWantsServiceLocked(false);
}

ibv_wc_status Qp::checkLocalLocked(const Wqe& w) const noexcept {
  for (int i = 0; i < w.num_sge; ++i) {
    const ibv_sge& s = w.sges[i];
    const Mr* mr = fabric.findMr(device, s.lkey);
    if (mr == nullptr || mr->handle.ibv.lkey != s.lkey || mr->pd != &pd ||
        !mr->covers(s.addr, s.length))
      return IBV_WC_LOC_PROT_ERR;
    // A READ writes the local buffer.
    if (w.opcode == IBV_WR_RDMA_READ && !(mr->access & IBV_ACCESS_LOCAL_WRITE))
      return IBV_WC_LOC_PROT_ERR;
  }
  return w.length > kMaxMessage ? IBV_WC_LOC_LEN_ERR : IBV_WC_SUCCESS;
}

// The connected responder QP when it answers (exists, RTR or RTS, connected back
// to us with our PSN); nullptr means the requester's packets go unanswered.
Qp* Qp::responderLocked() const noexcept {
  const Device* to = remote_device_.load(std::memory_order_acquire);
  if (to == nullptr) return nullptr;
  auto it = fabric.qps.find(Fabric::key(*to, remote_qpn_.load(std::memory_order_acquire)));
  if (it == fabric.qps.end()) return nullptr;
  Qp* r = it->second.get();
  return r->answers(device, qpn, sq_psn_) ? r : nullptr;
}

// False when the responder does not answer. Otherwise the WR ran: *status says how.
// A failed check moves no byte at all.
bool Qp::executeLocked(const Wqe& w, ibv_wc_status* status) noexcept {
  std::shared_lock<std::shared_mutex> tables(fabric.tables);
  *status = checkLocalLocked(w);
  if (*status != IBV_WC_SUCCESS) return true;
  Qp* r = responderLocked();
  if (r == nullptr) return false;
  if (w.opcode == IBV_WR_SEND) {
    // The fake retries no RNR: a SEND without a posted receive fails at once, as a
    // NIC does once rnr_retry runs out (the provider's users keep credits).
    *status = r->receive(fabric, w);
    if (*status == IBV_WC_SUCCESS) {
      device.countTraffic(w.length, 0);
      r->device.countTraffic(0, w.length);
    }
    return true;
  }
  const bool read = w.opcode == IBV_WR_RDMA_READ;
  if (w.length > 0) {  // a zero-length RDMA carries no R_Key check
    const int need = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
    const Mr* mr = fabric.findMr(r->device, w.rkey);
    if (mr == nullptr || mr->handle.ibv.rkey != w.rkey || mr->pd != &r->pd ||
        !mr->covers(w.remote_addr, w.length) || !(mr->access & need) ||
        !(r->accessFlags() & need)) {
      r->remoteAccessError();  // the responder's QP goes to ERR too, as on a NIC
      *status = IBV_WC_REM_ACCESS_ERR;
      return true;
    }
  }
  uint64_t remote = w.remote_addr;
  for (int i = 0; i < w.num_sge; ++i) {
    const uint32_t len = w.sges[i].length;
    auto* local = reinterpret_cast<void*>(w.sges[i].addr);
    auto* far = reinterpret_cast<void*>(remote);
    if (len != 0) std::memmove(read ? local : far, read ? far : local, len);
    remote += len;
  }
  device.countTraffic(read ? 0 : w.length, read ? w.length : 0);
  r->device.countTraffic(read ? w.length : 0, read ? 0 : w.length);
  return true;
}

// Signaled WRs and every failed or flushed WR produce a CQE; the others none.
void Qp::completeLocked(const Wqe& w, ibv_wc_status status) noexcept {
  const uint64_t seq = executed_++;
  FabricCounters& c = fabric.counters;
  if (status == IBV_WC_SUCCESS) {
    c.wrs_executed.fetch_add(1, std::memory_order_relaxed);
    c.bytes_moved.fetch_add(w.length, std::memory_order_relaxed);
    if (!w.signaled) return;
  } else if (status == IBV_WC_WR_FLUSH_ERR) {
    c.flushed.fetch_add(1, std::memory_order_relaxed);
  } else {
    c.error_completions.fetch_add(1, std::memory_order_relaxed);
    if (status == IBV_WC_RETRY_EXC_ERR) c.retry_exceeded.fetch_add(1, std::memory_order_relaxed);
  }
  const bool read = w.opcode == IBV_WR_RDMA_READ;
  ibv_wc wc{};
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.qp_num = qpn;
  wc.vendor_err = vendorErr(status);
  wc.opcode = status != IBV_WC_SUCCESS  ? kUndefinedOpcode
              : read                    ? IBV_WC_RDMA_READ
              : w.opcode == IBV_WR_SEND ? IBV_WC_SEND
                                        : IBV_WC_RDMA_WRITE;
  wc.byte_len = status == IBV_WC_SUCCESS && read ? static_cast<uint32_t>(w.length) : 0;
  send_cq.push(wc, this, seq);
}

void Qp::setWantsServiceLocked(bool wanted) noexcept {
  if (wants_service_.exchange(wanted, std::memory_order_acq_rel) != wanted)
    send_cq.serviceWanted(wanted);
}

void Qp::service() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (!destroyed_) progressLocked();
}

// ---- receive queue ------------------------------------------------------------------

int Qp::postRecv(ibv_recv_wr* wr, ibv_recv_wr** bad) noexcept {
  const ibv_qp_state s = state_.load(std::memory_order_acquire);
  bool flush = false;
  int rc = 0;
  {
    std::lock_guard<std::mutex> lock(rq_mu_);
    for (; wr != nullptr; wr = wr->next) {
      if (s == IBV_QPS_RESET || wr->num_sge < 0 || wr->num_sge > 1 ||
          (wr->num_sge > 0 && wr->sg_list == nullptr)) {
        rc = EINVAL;
        break;
      }
      if (rq_count_ >= max_recv_wr) {
        rc = ENOMEM;
        break;
      }
      Rqe& e = rq_[(rq_head_ + rq_count_) % max_recv_wr];
      e.wr_id = wr->wr_id;
      e.num_sge = wr->num_sge;
      e.sge = wr->num_sge ? wr->sg_list[0] : ibv_sge{};
      ++rq_count_;
    }
    flush = s == IBV_QPS_ERR;
  }
  if (rc != 0) *bad = wr;
  if (flush) flushReceives();  // a QP in ERR completes receives at once, flushed
  return rc;
}

ibv_wc_status Qp::receive(const Fabric& f, const Wqe& w) noexcept {
  std::lock_guard<std::mutex> lock(rq_mu_);
  if (rq_count_ == 0) return IBV_WC_RNR_RETRY_EXC_ERR;
  const Rqe e = rq_[rq_head_];
  rq_head_ = (rq_head_ + 1) % max_recv_wr;
  --rq_count_;
  ibv_wc wc{};
  wc.wr_id = e.wr_id;
  wc.qp_num = qpn;
  wc.opcode = IBV_WC_RECV;
  wc.status = IBV_WC_SUCCESS;
  ibv_wc_status sender = IBV_WC_SUCCESS;
  const uint64_t room = e.num_sge ? e.sge.length : 0;
  const Mr* mr = e.num_sge ? f.findMr(device, e.sge.lkey) : nullptr;
  if (w.length > room) {
    wc.status = IBV_WC_LOC_LEN_ERR;
    sender = IBV_WC_REM_INV_REQ_ERR;
  } else if (w.length > 0 &&
             (mr == nullptr || mr->handle.ibv.lkey != e.sge.lkey || mr->pd != &pd ||
              !mr->covers(e.sge.addr, w.length) || !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
    wc.status = IBV_WC_LOC_PROT_ERR;
    sender = IBV_WC_REM_OP_ERR;
  } else {
    uint64_t at = e.sge.addr;
    for (int i = 0; i < w.num_sge; ++i) {
      const uint32_t len = w.sges[i].length;
      if (len != 0)
        std::memmove(reinterpret_cast<void*>(at), reinterpret_cast<void*>(w.sges[i].addr), len);
      at += len;
    }
    wc.byte_len = static_cast<uint32_t>(w.length);
  }
  wc.vendor_err = vendorErr(wc.status);
  recv_cq.push(wc, this, 0, /*recv=*/true);
  return sender;
}

void Qp::flushReceives() noexcept {
  std::lock_guard<std::mutex> lock(rq_mu_);
  while (rq_count_ > 0) {
    const Rqe& e = rq_[rq_head_];
    ibv_wc wc{};
    wc.wr_id = e.wr_id;
    wc.qp_num = qpn;
    wc.opcode = kUndefinedOpcode;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.vendor_err = vendorErr(wc.status);
    recv_cq.push(wc, this, 0, /*recv=*/true);
    fabric.counters.flushed.fetch_add(1, std::memory_order_relaxed);
    rq_head_ = (rq_head_ + 1) % max_recv_wr;
    --rq_count_;
  }
}

// ---- CQ -------------------------------------------------------------------------

Cq::Cq(Device& d, ibv_context* context, int cqe, void* cq_context)
    : device(d), depth(static_cast<uint32_t>(cqe)), ring_(new Cqe[static_cast<size_t>(cqe)]) {
  handle.self = this;
  handle.ibv.context = context;
  handle.ibv.cq_context = cq_context;
  handle.ibv.cqe = cqe;
}

// A full CQ is an overflow: the CQ goes to error (poll_cq fails from then on) and
// the contract break is reported, since the provider's admission should make it
// impossible.
void Cq::push(const ibv_wc& wc, Qp* qp, uint64_t seq, bool recv) noexcept {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (overflowed_) return;
    if (count_ < depth) {
      uint32_t at = head_ + count_;
      ring_[at >= depth ? at - depth : at] = {wc, qp, seq, recv};
      ++count_;
      return;
    }
    overflowed_ = true;
  }
  char what[200];
  std::snprintf(what, sizeof(what),
                "CQ of %s with %u entries overflowed (a CQE of QP %u found it full); its "
                "poll_cq fails from now on",
                device.spec.name.c_str(), depth, qp->qpn);
  device.fabric->contractBreak(device.fabric->counters.cq_overflows, what);
}

int Cq::poll(int max, ibv_wc* out) noexcept {
  if (attention_.load(std::memory_order_acquire) != 0) serviceQps();
  std::lock_guard<std::mutex> lock(mu_);
  if (overflowed_) return -EOVERFLOW;
  int n = 0;
  while (n < max && count_ > 0) {
    Cqe& e = ring_[head_];
    out[n++] = e.wc;
    if (!e.recv) e.qp->retire(e.seq + 1);  // its slot and every earlier one are free
    head_ = head_ + 1 == depth ? 0 : head_ + 1;
    --count_;
  }
  return n;
}

void Cq::serviceWanted(bool wanted) noexcept {
  if (wanted)
    attention_.fetch_add(1, std::memory_order_acq_rel);
  else
    attention_.fetch_sub(1, std::memory_order_acq_rel);
}

// Runs the retry timer of the QPs waiting on a responder. The references keep a
// QP alive if it is destroyed meanwhile (service() then does nothing).
void Cq::serviceQps() noexcept {
  std::shared_ptr<Qp> due[kServiceBatch];
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t size = attached_.size();
    for (size_t i = 0; i < size && n < kServiceBatch; ++i) {
      const auto& qp = attached_[(service_cursor_ + i) % size];
      if (qp->wantsService()) due[n++] = qp;
    }
    ++service_cursor_;  // more than a batch waiting: each gets its turn
  }
  for (size_t i = 0; i < n; ++i) due[i]->service();
}

void Cq::attach(std::shared_ptr<Qp> qp) {
  std::lock_guard<std::mutex> lock(mu_);
  attached_.push_back(std::move(qp));
}

void Cq::detach(Qp* qp) {
  dropCqesOf(qp);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = attached_.begin(); it != attached_.end(); ++it) {
    if (it->get() == qp) {
      attached_.erase(it);
      break;
    }
  }
}

void Cq::dropCqesOf(Qp* qp) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t kept = 0;
  for (uint32_t i = 0; i < count_; ++i) {
    const Cqe& e = ring_[(head_ + i) % depth];
    if (e.qp != qp) ring_[(head_ + kept++) % depth] = e;
  }
  count_ = kept;
}

size_t Cq::users() {
  std::lock_guard<std::mutex> lock(mu_);
  return attached_.size() + static_cast<size_t>(recv_users.load());
}

// ---- entry points -----------------------------------------------------------------

int postSend(ibv_qp* ibv, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* qp = selfOf<Qp>(ibv);
  if (qp == nullptr) return EINVAL;
  // A dead device takes the WRs (the doorbell rings) and never executes them.
  if (contextDead(ibv->context)) return 0;
  return qp->post(wr, bad);
}

int postRecv(ibv_qp* ibv, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* qp = selfOf<Qp>(ibv);
  return qp ? qp->postRecv(wr, bad) : EINVAL;
}

int pollCq(ibv_cq* ibv, int num, ibv_wc* wc) {
  Cq* cq = selfOf<Cq>(ibv);
  if (cq == nullptr) return -EINVAL;
  // Nothing completes after a fatal error, nor while a test holds the completions.
  if (completionsHeld(ibv->context)) return 0;
  return cq->poll(num, wc);
}

}  // namespace tent::fabric::testing::loopback
