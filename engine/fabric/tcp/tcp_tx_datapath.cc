// The tcp provider's send stream: one per QP, written by whoever holds `tx_busy` -
// the poster right after postSend (the common case: no thread hand-off), or the
// service thread when EPOLLOUT says a full socket buffer drained, when it queued a
// response, or when the connection came up with WRs waiting.
//
// Payloads go from registered memory straight into sendmsg (header and payload
// iovecs, several messages per call); each region is pinned for the call, so a
// deregistration waits for it and never races the copy into the socket buffer.
//
// No wake-up is lost: every kick counts itself in `tx_kicks` before it tries to take
// the stream; the holder re-reads the count after giving the stream back and drains
// again if it moved. A drain that ends in EAGAIN leaves SOCK_NOSPACE set, so the
// socket's edge-triggered EPOLLOUT fires once space frees up.
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include "fabric/tcp/tcp_internal.h"

namespace tent::fabric::tcp {

namespace {

constexpr int kMaxIov = 64;
constexpr int kMaxMsgs = 32;

struct Msg {
  bool response = false;
  uint64_t bytes = 0;  // bytes of the message in this call's iovecs
};

struct Gather {
  iovec iov[kMaxIov];
  int niov = 0;
  Msg msgs[kMaxMsgs];
  int nmsg = 0;
  uint64_t total = 0;
  bool fault = false;

  bool room(uint32_t pieces) const noexcept {
    return nmsg < kMaxMsgs && niov + static_cast<int>(pieces) <= kMaxIov;
  }
  // Adds [p, p+n) minus the first `*skip` bytes.
  void piece(const void* p, uint64_t n, uint64_t* skip) noexcept {
    if (*skip >= n) {
      *skip -= n;
      return;
    }
    iov[niov].iov_base = const_cast<uint8_t*>(static_cast<const uint8_t*>(p) + *skip);
    iov[niov].iov_len = n - *skip;
    total += n - *skip;
    msgs[nmsg].bytes += n - *skip;
    *skip = 0;
    ++niov;
  }
};

// A request from `offset` on. false: it does not fit this call, or its local region
// went away (then tx_stop or tx_abort is set and g.fault).
bool addRequest(QpCore& q, uint64_t seq, uint64_t offset, PinSet& pins, Gather& g) noexcept {
  WrSlot& w = q.wr(seq);
  const bool payload = w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kSend;
  if (!g.room(1 + (payload ? w.num_sge : 0))) return false;
  if (payload) {
    const Sge* s = q.sges(seq);
    for (uint32_t i = 0; i < w.num_sge; ++i) {
      if (s[i].length != 0 && !pins.add(s[i].lkey)) {
        if (pins.full()) return false;  // the next call takes it
        if (offset == 0) {
          uint64_t none = UINT64_MAX;
          q.tx_stop.compare_exchange_strong(none, seq, std::memory_order_acq_rel);
        } else {
          q.tx_abort.store(true, std::memory_order_release);
        }
        g.fault = true;
        return false;
      }
    }
  }
  g.msgs[g.nmsg] = Msg{false, 0};
  uint64_t skip = offset;
  g.piece(w.header, kHeaderBytes, &skip);
  if (payload) {
    const Sge* s = q.sges(seq);
    for (uint32_t i = 0; i < w.num_sge; ++i) {
      if (s[i].length != 0) g.piece(reinterpret_cast<const void*>(s[i].addr), s[i].length, &skip);
    }
  }
  ++g.nmsg;
  return true;
}

// A response from `offset` on. A READ response whose region went away before its
// first byte left becomes a remote access error; after that the connection must go.
bool addResponse(QpCore& q, uint64_t index, uint64_t offset, PinSet& pins, Gather& g) noexcept {
  Response& r = q.rsp[index & q.rsp_mask];
  if (!g.room(2)) return false;
  if (r.length != 0 && !pins.add(r.key)) {
    if (pins.full()) return false;
    if (offset != 0) {
      q.tx_abort.store(true, std::memory_order_release);
      g.fault = true;
      return false;
    }
    r.status = WcStatus::kRemoteAccess;
    r.length = 0;
    r.encode();
  }
  g.msgs[g.nmsg] = Msg{true, 0};
  uint64_t skip = offset;
  g.piece(r.header, kHeaderBytes, &skip);
  if (r.length != 0) g.piece(reinterpret_cast<const void*>(r.addr), r.length, &skip);
  ++g.nmsg;
  return true;
}

void gather(QpCore& q, PinSet& pins, Gather& g) noexcept {
  uint64_t rsp = q.rsp_head;
  uint64_t req = q.tx_seq;
  const uint64_t rsp_end = q.rsp_tail.load(std::memory_order_acquire);
  // A message cut short by a full socket buffer goes on first.
  if (q.partial == QpCore::Partial::kResponse) {
    if (!addResponse(q, rsp++, q.partial_off, pins, g)) return;
  } else if (q.partial == QpCore::Partial::kRequest) {
    if (!addRequest(q, req++, q.partial_off, pins, g)) return;
  }
  while (rsp < rsp_end) {
    if (!addResponse(q, rsp++, 0, pins, g)) return;
  }
  const uint64_t tail = q.tail.load(std::memory_order_acquire);
  while (req < tail && req < q.tx_stop.load(std::memory_order_acquire) && !q.wr(req).final) {
    if (!addRequest(q, req++, 0, pins, g)) return;
  }
}

// Moves the cursors past what sendmsg took.
void advance(QpCore& q, const Gather& g, uint64_t sent) noexcept {
  for (int i = 0; i < g.nmsg && sent > 0; ++i) {
    const Msg& m = g.msgs[i];
    const bool continued = q.partial != QpCore::Partial::kNone;
    if (sent >= m.bytes) {
      sent -= m.bytes;
      if (m.response) {
        ++q.rsp_head;
      } else {
        ++q.tx_seq;
      }
      q.partial = QpCore::Partial::kNone;
      q.partial_off = 0;
    } else {
      q.partial = m.response ? QpCore::Partial::kResponse : QpCore::Partial::kRequest;
      q.partial_off = (continued && i == 0 ? q.partial_off : 0) + sent;
      sent = 0;
    }
  }
  q.rsp_sent.store(q.rsp_head, std::memory_order_release);
}

TxResult drain(QpCore& q) noexcept {
  if (!q.established.load(std::memory_order_seq_cst)) return TxResult::kClosed;
  if (q.tx_abort.load(std::memory_order_acquire)) return TxResult::kFault;
  const int fd = q.fd.load(std::memory_order_acquire);
  for (;;) {
    Gather g;
    PinSet pins(q.dev->mrs);
    gather(q, pins, g);
    if (g.nmsg == 0) return g.fault ? TxResult::kFault : TxResult::kIdle;
    msghdr mh{};
    mh.msg_iov = g.iov;
    mh.msg_iovlen = static_cast<size_t>(g.niov);
    // datapath-lint: allow(syscall) the send itself: header and payload from registered memory
    const ssize_t n = ::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    pins.release();
    if (n < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: EPOLLOUT continues. Any other error ends the connection, which the
      // service thread sees on the socket (EPOLLERR / EPOLLHUP).
      return TxResult::kBlocked;
    }
    q.tx_bytes.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    advance(q, g, static_cast<uint64_t>(n));
    if (g.fault) return TxResult::kFault;
  }
}

}  // namespace

TxResult kickTx(QpCore& q) noexcept {
  for (;;) {
    q.tx_kicks.fetch_add(1, std::memory_order_seq_cst);
    if (q.tx_busy.exchange(1, std::memory_order_seq_cst) != 0) return TxResult::kIdle;
    const uint64_t seen = q.tx_kicks.load(std::memory_order_seq_cst);
    const TxResult r = drain(q);
    q.tx_busy.store(0, std::memory_order_seq_cst);
    if (r == TxResult::kFault || r == TxResult::kClosed) return r;
    if (q.tx_kicks.load(std::memory_order_seq_cst) == seen) return r;
  }
}

}  // namespace tent::fabric::tcp
