// The tcp provider's receive side, on the device's service thread: what a NIC's
// receive pipeline does. Requests from the peer are checked against our own MR table
// (rkey, bounds, access) at each WR and served - WRITE payloads received straight into
// the target range, READ payloads queued for the send stream from the region itself;
// responses to our WRs are matched in order and complete them (READ payloads received
// straight into the WR's local buffers; device memory through the staging buffer of the
// service thread). A poller that finds its CQ empty runs the same code on one QP
// (caller-side progress, ServiceLoop::callerTurn); the QP's rx_owner makes it the
// receive side's only reader. Headers are read together with the payload
// before them (one recvmsg: payload iovecs, then the next header), so a stream of small
// WRITEs costs about one recvmsg per WR. No allocation, no lock; recv/recvmsg are the
// syscalls, marked.
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "fabric/rc_rules.h"
#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

namespace {

// Bytes one connection may consume per turn before the others get theirs.
constexpr uint64_t kTurnBytes = uint64_t{4} << 20;
// A poller's turn (caller-side progress) is shorter: it is the application's or an
// lcore's time, and what it leaves the service thread reads.
constexpr uint64_t kCallerTurnBytes = uint64_t{256} << 10;
}  // namespace

void ServiceLoop::pushCqe(QpCore& q, uint64_t seq, const WrSlot& w) noexcept {
  Cqe c;
  c.wc.wr_id = w.wr_id;
  c.wc.status = w.status;
  c.wc.opcode = w.opcode;
  c.wc.qp_num = q.qp_num;
  c.wc.byte_len = w.length;
  c.qp_slot = q.slot;
  c.qp_gen = q.gen;
  c.seq = static_cast<uint32_t>(seq);
  q.cq->push(c);  // false only if the CQ overflowed, which admission rules out
}

bool ServiceLoop::completeInOrder(QpCore& q) noexcept {
  const uint64_t tail = q.tail.load(std::memory_order_acquire);
  while (q.done < tail) {
    WrSlot& w = q.wr(q.done);
    if (!w.final) {
      if (!q.error_seen) break;
      // After an error every later WR is flushed; the caller closed the stream first,
      // so no sender reads these slots any more.
      w.final = true;
      w.status = WcStatus::kFlushed;
    }
    // Once its completion is in the CQ a poller may release the slot and a poster
    // reuse it: read what we need first.
    const WcStatus status = w.status;
    const uint64_t length = w.length;
    // Counted with fetch_add: a poller's turn on one QP and the service thread on
    // another may complete at once.
    dev_.wrs.fetch_add(1, std::memory_order_relaxed);
    if (status == WcStatus::kSuccess) dev_.bytes.fetch_add(length, std::memory_order_relaxed);
    if (w.signaled || status != WcStatus::kSuccess) pushCqe(q, q.done, w);
    ++q.done;
    q.done_pub.store(q.done, std::memory_order_release);
    if (status != WcStatus::kSuccess && !q.error_seen) {
      q.error_seen = true;
      q.state.store(QpState::kError, std::memory_order_seq_cst);
      return true;
    }
  }
  return false;
}

bool ServiceLoop::queueResponse(QpCore& q, Opcode op, uint64_t seq, WcStatus status,
                                uint32_t length, uint64_t addr, uint32_t key) noexcept {
  const uint64_t t = q.rsp_tail.load(std::memory_order_relaxed);
  // More requests in flight than the peer's declared send queue: a broken peer.
  if (q.rsp == nullptr || t - q.rsp_sent.load(std::memory_order_acquire) > q.rsp_mask) return false;
  Response& r = q.rsp[t & q.rsp_mask];
  r.seq = seq;
  r.opcode = op;
  r.status = status;
  r.length = length;
  r.addr = addr;
  r.key = key;
  r.encode();
  q.rsp_tail.store(t + 1, std::memory_order_release);
  return true;
}

ServiceLoop::RxResult ServiceLoop::serveRead(Conn& c) noexcept {
  QpCore& q = *c.qp;
  const Header& h = c.cur;
  WcStatus st = WcStatus::kSuccess;
  if (h.length != 0) {  // zero-length: no rkey check, as in verbs
    rc::Region r;
    const bool valid = dev_.mrs.lookup(h.rkey, &r);
    st = rc::checkRemote(valid, r, WrOpcode::kRdmaRead, h.remote_addr, h.length);
  }
  const uint32_t length = st == WcStatus::kSuccess ? h.length : 0;
  if (st == WcStatus::kSuccess) {
    // fetch_add: with caller-side progress, pollers serve other QPs of this device too.
    dev_.bytes.fetch_add(length, std::memory_order_relaxed);
    dev_.target_read_bytes.fetch_add(length, std::memory_order_relaxed);
    dev_.target_reads.fetch_add(1, std::memory_order_relaxed);
  }
  if (!queueResponse(q, Opcode::kReadResp, h.seq, st, length, h.remote_addr, h.rkey)) {
    return RxResult::kBroken;
  }
  return RxResult::kContinue;
}

ServiceLoop::RxResult ServiceLoop::finishWrite(Conn& c) noexcept {
  QpCore& q = *c.qp;
  if (c.rx_status == WcStatus::kSuccess) {
    dev_.bytes.fetch_add(c.cur.length, std::memory_order_relaxed);
    if (c.cur.opcode == Opcode::kWriteReq) {  // a SEND lands in a receive, not a target range
      dev_.target_write_bytes.fetch_add(c.cur.length, std::memory_order_relaxed);
      dev_.target_writes.fetch_add(1, std::memory_order_relaxed);
    }
  }
  c.rx = Conn::Rx::kHeader;
  const bool send = c.cur.opcode == Opcode::kSendReq;
  if (send && c.recv_taken) finishReceive(c);
  if (!queueResponse(q, send ? Opcode::kSendAck : Opcode::kWriteAck, c.cur.seq, c.rx_status, 0, 0,
                     0)) {
    return RxResult::kBroken;
  }
  return RxResult::kContinue;
}

// The receive a SEND took completes: its bytes placed, or why not.
void ServiceLoop::finishReceive(Conn& c) noexcept {
  QpCore& q = *c.qp;
  if (c.rx_status != WcStatus::kSuccess && c.recv_status == WcStatus::kSuccess) {
    c.recv_status = WcStatus::kLocalProtection;  // the buffer went away under the payload
    c.rx_status = WcStatus::kRemoteOperation;
  }
  Cqe e;
  e.wc.wr_id = c.recv_wr_id;
  e.wc.status = c.recv_status;
  e.wc.opcode = WrOpcode::kRecv;
  e.wc.qp_num = q.qp_num;
  e.wc.byte_len = c.recv_status == WcStatus::kSuccess ? c.cur.length : 0;
  e.qp_slot = q.slot;
  e.qp_gen = q.gen;
  e.seq = static_cast<uint32_t>(q.rq_taken - 1);
  e.recv = true;
  q.recv_cq->push(e);  // false only if the CQ overflowed, which admission rules out
  c.recv_taken = false;
}

// A SEND's header: it takes the oldest posted receive, or is refused as a receiver
// that is not ready (no RNR retry: docs/fabric.md, "Two-sided messages").
ServiceLoop::RxResult ServiceLoop::startSend(Conn& c) noexcept {
  QpCore& q = *c.qp;
  const Header& h = c.cur;
  c.recv_taken = false;
  c.recv_status = WcStatus::kSuccess;
  if (q.max_recv_wr == 0 || q.rq_taken == q.rq_posted.load(std::memory_order_acquire) ||
      q.state.load(std::memory_order_acquire) == QpState::kError) {
    c.rx_status = WcStatus::kRnrRetryExceeded;
  } else {
    const RecvSlot& r = q.rq[q.rq_taken & q.rq_mask];
    ++q.rq_taken;
    c.recv_taken = true;
    c.recv_wr_id = r.wr_id;
    const uint64_t room = r.num_sge != 0 ? r.sge.length : 0;
    rc::Region region;
    if (h.length > room) {
      c.recv_status = WcStatus::kLocalLength;
    } else if (h.length != 0 && (!dev_.mrs.lookup(r.sge.lkey, &region) ||
                                 !rc::inside(region.addr, region.length, r.sge.addr, h.length) ||
                                 !(region.access & kAccessLocalWrite))) {
      c.recv_status = WcStatus::kLocalProtection;
    }
    if (c.recv_status != WcStatus::kSuccess) c.rx_status = WcStatus::kRemoteOperation;
    // The payload goes where a WRITE's would: the receive buffer, pinned by its lkey.
    c.cur.remote_addr = r.sge.addr;
    c.cur.rkey = r.sge.lkey;
  }
  if (h.length == 0) return finishWrite(c);
  c.rx = c.rx_status == WcStatus::kSuccess ? Conn::Rx::kWritePayload : Conn::Rx::kDiscard;
  return RxResult::kContinue;
}

// In ERR the receives not yet taken complete flushed, in order.
void ServiceLoop::flushReceives(QpCore& q) noexcept {
  const uint64_t posted = q.rq_posted.load(std::memory_order_acquire);
  while (q.rq_taken < posted) {
    Cqe e;
    e.wc.wr_id = q.rq[q.rq_taken & q.rq_mask].wr_id;
    e.wc.status = WcStatus::kFlushed;
    e.wc.opcode = WrOpcode::kRecv;
    e.wc.qp_num = q.qp_num;
    e.qp_slot = q.slot;
    e.qp_gen = q.gen;
    e.seq = static_cast<uint32_t>(q.rq_taken);
    e.recv = true;
    ++q.rq_taken;
    q.recv_cq->push(e);
  }
}

ServiceLoop::RxResult ServiceLoop::finishRead(Conn& c) noexcept {
  QpCore& q = *c.qp;
  WrSlot& w = q.wr(q.done);
  w.status = c.rx_status;
  w.final = true;
  c.rx = Conn::Rx::kHeader;
  return completeInOrder(q) ? RxResult::kQpError : RxResult::kContinue;
}

ServiceLoop::RxResult ServiceLoop::onHeader(Conn& c) noexcept {
  QpCore& q = *c.qp;
  Header h;
  c.hdr_got = 0;
  if (parseHeader(c.hdr, kMaxWireLength, &h) != ParseResult::kOk) return RxResult::kBroken;
  c.cur = h;
  c.rx_off = 0;
  c.rx_status = WcStatus::kSuccess;
  if (isRequest(h.opcode)) {
    if (h.seq != c.peer_seq) return RxResult::kBroken;
    ++c.peer_seq;
    if (h.opcode == Opcode::kReadReq) return serveRead(c);
    if (h.opcode == Opcode::kSendReq) return startSend(c);
    if (h.length == 0) return finishWrite(c);
    rc::Region r;
    const bool valid = dev_.mrs.lookup(h.rkey, &r);
    c.rx_status = rc::checkRemote(valid, r, WrOpcode::kRdmaWrite, h.remote_addr, h.length);
    // A refused WRITE's payload is still on the stream: read past it, place nothing.
    c.rx = c.rx_status == WcStatus::kSuccess ? Conn::Rx::kWritePayload : Conn::Rx::kDiscard;
    return RxResult::kContinue;
  }
  // A response: for the oldest WR not yet answered, which must have been sent.
  if (q.done >= q.tail.load(std::memory_order_acquire) || h.seq != q.done) {
    return RxResult::kBroken;
  }
  WrSlot& w = q.wr(q.done);
  if (w.final) return RxResult::kBroken;
  const WrOpcode op = h.opcode == Opcode::kWriteAck  ? WrOpcode::kRdmaWrite
                      : h.opcode == Opcode::kSendAck ? WrOpcode::kSend
                                                     : WrOpcode::kRdmaRead;
  if (w.opcode != op) return RxResult::kBroken;
  if (h.opcode == Opcode::kReadResp && h.status == WcStatus::kSuccess) {
    if (h.length != w.length) return RxResult::kBroken;
    if (h.length != 0) {
      c.rx = Conn::Rx::kReadPayload;
      return RxResult::kContinue;
    }
  }
  w.status = h.status;
  w.final = true;
  return completeInOrder(q) ? RxResult::kQpError : RxResult::kContinue;
}

// Receives payload (and the next header behind it) into its place: the WRITE's
// target range, the READ's local SGEs, or nowhere (kDiscard). Device memory is received
// into the service thread's staging buffer and copied to the GPU before the call
// returns, as far as the recvmsg got (tcp_staging.h).
ServiceLoop::RxResult ServiceLoop::readPayload(Conn& c, bool caller) noexcept {
  // The scratch buffer is the service thread's (shared by all its streams).
  if (c.rx == Conn::Rx::kDiscard) return caller ? RxResult::kHandOff : discardPayload(c);
  QpCore& q = *c.qp;
  const uint64_t remaining = c.cur.length - c.rx_off;
  RxPlan plan;
  PinSet pins(dev_.mrs);
  if (c.rx == Conn::Rx::kWritePayload) {
    // The region stays registered for this call; if it went away since the check,
    // the rest of the WRITE is refused (remote access) and read past.
    if (!pins.add(c.cur.rkey)) {
      c.rx = Conn::Rx::kDiscard;
      c.rx_status = WcStatus::kRemoteAccess;
      return RxResult::kContinue;
    }
    plan.target(dev_, dev_.mrs.gpuOfPinned(c.cur.rkey), c.cur.remote_addr + c.rx_off, remaining);
  } else {
    const WrSlot& w = q.wr(q.done);
    const Sge* s = q.sges(q.done);
    uint64_t skip = c.rx_off;
    for (uint32_t i = 0; i < w.num_sge && plan.open(); ++i) {
      if (skip >= s[i].length) {
        skip -= s[i].length;
        continue;
      }
      if (!pins.add(s[i].lkey)) {  // our buffer was deregistered under the READ
        c.rx = Conn::Rx::kDiscard;
        c.rx_status = WcStatus::kLocalProtection;
        return RxResult::kContinue;
      }
      plan.target(dev_, dev_.mrs.gpuOfPinned(s[i].lkey), s[i].addr + skip, s[i].length - skip);
      skip = 0;
    }
  }
  // The staging receive buffer is the service thread's: device memory is its work.
  if (caller && plan.nstaged != 0) return RxResult::kHandOff;
  // The next header rides along when the payload iovecs reach the payload's end.
  if (plan.covered == remaining) plan.iov[plan.n++] = iovec{c.hdr, kHeaderBytes};
  msghdr mh{};
  mh.msg_iov = plan.iov;
  mh.msg_iovlen = static_cast<size_t>(plan.n);
  // datapath-lint: allow(syscall) the receive itself, straight into registered memory
  const ssize_t got = ::recvmsg(c.fd, &mh, MSG_DONTWAIT);
  if (got == 0) return RxResult::kClosed;
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return RxResult::kAgain;
    return errno == EINTR ? RxResult::kContinue : RxResult::kClosed;
  }
  c.rx_bytes += static_cast<uint64_t>(got);
  const uint64_t placed = std::min<uint64_t>(static_cast<uint64_t>(got), remaining);
  // Staged bytes reach the GPU before anything completes (the pins still hold).
  if (!plan.unstage(dev_, placed)) {
    c.rx_status =
        c.rx == Conn::Rx::kWritePayload ? WcStatus::kRemoteAccess : WcStatus::kLocalProtection;
    c.rx = Conn::Rx::kDiscard;
  }
  pins.release();
  c.rx_off += placed;
  c.hdr_got = static_cast<size_t>(static_cast<uint64_t>(got) - placed);
  if (c.rx_off < c.cur.length) return RxResult::kContinue;
  const bool inbound = c.cur.opcode == Opcode::kWriteReq || c.cur.opcode == Opcode::kSendReq;
  return inbound ? finishWrite(c) : finishRead(c);
}

ServiceLoop::RxResult ServiceLoop::discardPayload(Conn& c) noexcept {
  const uint64_t remaining = c.cur.length - c.rx_off;
  // Refused bytes: MSG_TRUNC drops them in the kernel; the buffer only bounds them.
  const size_t want = static_cast<size_t>(std::min<uint64_t>(remaining, kDiscardBytes));
  // datapath-lint: allow(syscall) the receive itself
  const ssize_t got = ::recv(c.fd, discard_.get(), want, MSG_DONTWAIT | MSG_TRUNC);
  if (got == 0) return RxResult::kClosed;
  if (got < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return RxResult::kAgain;
    return errno == EINTR ? RxResult::kContinue : RxResult::kClosed;
  }
  c.rx_bytes += static_cast<uint64_t>(got);
  c.rx_off += static_cast<uint64_t>(got);
  if (c.rx_off < c.cur.length) return RxResult::kContinue;
  if (c.cur.opcode == Opcode::kWriteReq || c.cur.opcode == Opcode::kSendReq) return finishWrite(c);
  return finishRead(c);
}

void RxPlan::target(DeviceState& dev, int gpu, uint64_t addr, uint64_t length) noexcept {
  if (gpu < 0) {
    iov[n++] = iovec{reinterpret_cast<void*>(addr), length};
    covered += length;
    return;
  }
  StagingPool* pool = dev.staging.load(std::memory_order_acquire);
  const uint64_t room = pool->bufferBytes() - staged;
  if (room == 0) {
    full = true;
    return;
  }
  const uint64_t take = std::min(length, room);
  staging[nstaged++] = Staging{gpu, addr, covered, staged, take};
  iov[n++] = iovec{pool->receiveBuffer() + staged, take};
  covered += take;
  staged += take;
  if (take < length) full = true;
}

bool RxPlan::unstage(DeviceState& dev, uint64_t placed) noexcept {
  if (nstaged == 0) return true;
  StagingPool* pool = dev.staging.load(std::memory_order_acquire);
  bool ok = true;
  for (int i = 0; i < nstaged && ok; ++i) {
    const Staging& s = staging[i];
    if (placed <= s.offset) break;
    const uint64_t bytes = std::min(s.length, placed - s.offset);
    ok = pool->copy(s.gpu, reinterpret_cast<void*>(s.addr), pool->receiveBuffer() + s.at, bytes);
  }
  return ok;
}

ServiceLoop::RxResult ServiceLoop::readStream(Conn& c, bool caller) noexcept {
  QpCore& q = *c.qp;
  const uint64_t start = c.rx_bytes;
  const uint64_t budget = caller ? kCallerTurnBytes : kTurnBytes;
  const uint64_t responses = q.rsp_tail.load(std::memory_order_relaxed);
  RxResult r = RxResult::kContinue;
  while (c.rx_bytes - start < budget) {
    if (c.rx == Conn::Rx::kHeader) {
      if (c.hdr_got < kHeaderBytes) {
        // datapath-lint: allow(syscall) the receive itself
        const ssize_t got = ::recv(c.fd, c.hdr + c.hdr_got, kHeaderBytes - c.hdr_got, MSG_DONTWAIT);
        if (got == 0) {
          r = RxResult::kClosed;
          break;
        }
        if (got < 0) {
          if (errno == EINTR) continue;
          r = (errno == EAGAIN || errno == EWOULDBLOCK) ? RxResult::kAgain : RxResult::kClosed;
          break;
        }
        c.rx_bytes += static_cast<uint64_t>(got);
        c.hdr_got += static_cast<size_t>(got);
        if (c.hdr_got < kHeaderBytes) continue;
      }
      r = onHeader(c);
    } else {
      r = readPayload(c, caller);
    }
    if (r != RxResult::kContinue) break;
  }
  if (r == RxResult::kContinue) r = RxResult::kMore;  // the turn's budget ran out
  // Responses queued by this turn leave now (unless a poster holds the stream: then it
  // sends them when it gives the stream back).
  if (q.rsp_tail.load(std::memory_order_relaxed) != responses && kickTx(q) == TxResult::kFault) {
    if (r == RxResult::kAgain || r == RxResult::kMore) r = RxResult::kTxFault;
  }
  return r;
}

}  // namespace tent::fabric::tcp
