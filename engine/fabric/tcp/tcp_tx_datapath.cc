// The tcp provider's send stream: one per QP, written by whoever holds `tx_busy` -
// the poster right after postSend (the common case: no thread hand-off), or the
// service thread when EPOLLOUT says a full socket buffer drained, when it queued a
// response, or when the connection came up with WRs waiting.
//
// Payloads go from registered memory straight into sendmsg (header and payload
// iovecs, several messages per call); each region is pinned for the call, so a
// deregistration waits for it and never races the copy into the socket buffer.
// Device memory goes through a staging buffer instead (tcp_staging.h): copied in by
// the driver during the gather, held until the sendmsg returns; what the socket did not
// take is copied again at the next call, so no buffer waits on a full socket.
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
  bool whole = true;   // this call's iovecs reach the message's end
  uint64_t start = 0;  // the message's offset where this call's iovecs begin
  uint64_t bytes = 0;  // bytes of the message in this call's iovecs
};

struct Gather {
  iovec iov[kMaxIov];
  int niov = 0;
  Msg msgs[kMaxMsgs];
  int nmsg = 0;
  uint64_t total = 0;
  bool fault = false;
  // GPU payloads (tcp_staging.h): one send buffer at most per call, filled from the start.
  StagingPool* pool = nullptr;
  int staged = -1;
  uint64_t staged_used = 0;
  bool no_buffer = false;  // a GPU payload found every send buffer taken

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
  // Forgets the pieces of the message being added since the mark.
  void rollback(int mark_iov, uint64_t mark_total) noexcept {
    niov = mark_iov;
    total = mark_total;
    msgs[nmsg].bytes = 0;
  }
};

enum class Staged : uint8_t {
  kDone,        // the piece is in the call (or was sent before)
  kFull,        // the send buffer ran out before the piece's end: the call ends here
  kNoBuffer,    // every send buffer is taken
  kCopyFailed,  // the driver failed the device -> staging copy
};

// Device memory [p, p+n) minus the first `*skip` bytes: copied into this call's send
// buffer as far as it has room, and added from there.
Staged stagePiece(Gather& g, int gpu, uint64_t p, uint64_t n, uint64_t* skip) noexcept {
  if (*skip >= n) {
    *skip -= n;
    return Staged::kDone;
  }
  if (g.pool == nullptr) return Staged::kCopyFailed;  // a GPU region always made the pool
  if (g.staged < 0) {
    g.staged = g.pool->acquire();
    if (g.staged < 0) {
      g.no_buffer = true;
      return Staged::kNoBuffer;
    }
    g.staged_used = 0;
  }
  const uint64_t room = g.pool->bufferBytes() - g.staged_used;
  if (room == 0) return Staged::kFull;
  const uint64_t want = n - *skip;
  const uint64_t take = want < room ? want : room;
  uint8_t* dst = g.pool->buffer(g.staged) + g.staged_used;
  if (!g.pool->copy(gpu, dst, reinterpret_cast<const void*>(p + *skip), take)) {
    return Staged::kCopyFailed;
  }
  g.staged_used += take;
  *skip = 0;
  uint64_t none = 0;
  g.piece(dst, take, &none);
  return take == want ? Staged::kDone : Staged::kFull;
}

// Ends the message being added: in the call whole, in it cut short (the call is full,
// or waits for a send buffer), or not in it at all (nothing of it fits yet).
bool closeMsg(Gather& g, Staged st, uint64_t offset, int mark_iov, uint64_t mark_total) noexcept {
  if (st == Staged::kDone) {
    ++g.nmsg;
    return true;
  }
  // A message not started yet waits whole: its header alone would hold the stream
  // (responses could not pass it) until a buffer frees.
  if (st == Staged::kNoBuffer && offset == 0) g.rollback(mark_iov, mark_total);
  g.msgs[g.nmsg].whole = false;
  if (g.msgs[g.nmsg].bytes > 0) ++g.nmsg;
  return false;
}

// A request from `offset` on. false: it does not fit this call (or fits cut short), it
// waits for a send buffer, or its local memory failed it (then tx_stop or tx_abort is
// set and g.fault).
bool addRequest(QpCore& q, uint64_t seq, uint64_t offset, PinSet& pins, Gather& g) noexcept {
  WrSlot& w = q.wr(seq);
  const bool payload = w.opcode == WrOpcode::kRdmaWrite || w.opcode == WrOpcode::kSend;
  if (!g.room(1 + (payload ? w.num_sge : 0))) return false;
  const Sge* s = q.sges(seq);
  bool lost = false;  // a region went away, or a GPU copy failed
  if (payload) {
    for (uint32_t i = 0; i < w.num_sge && !lost; ++i) {
      if (s[i].length != 0 && !pins.add(s[i].lkey)) {
        if (pins.full()) return false;  // the next call takes it
        lost = true;
      }
    }
  }
  const int mark_iov = g.niov;
  const uint64_t mark_total = g.total;
  Staged st = Staged::kDone;
  if (!lost) {
    g.msgs[g.nmsg] = Msg{false, true, offset, 0};
    uint64_t skip = offset;
    g.piece(w.header, kHeaderBytes, &skip);
    for (uint32_t i = 0; payload && i < w.num_sge && st == Staged::kDone; ++i) {
      if (s[i].length == 0) continue;
      const int gpu = q.dev->mrs.gpuOfPinned(s[i].lkey);
      if (gpu < 0) {
        g.piece(reinterpret_cast<const void*>(s[i].addr), s[i].length, &skip);
      } else {
        st = stagePiece(g, gpu, s[i].addr, s[i].length, &skip);
      }
    }
    lost = st == Staged::kCopyFailed;
  }
  if (!lost) return closeMsg(g, st, offset, mark_iov, mark_total);
  g.rollback(mark_iov, mark_total);
  if (offset == 0) {
    uint64_t none = UINT64_MAX;
    q.tx_stop.compare_exchange_strong(none, seq, std::memory_order_acq_rel);
  } else {
    q.tx_abort.store(true, std::memory_order_release);
  }
  g.fault = true;
  return false;
}

// A response from `offset` on. A READ response whose region went away (or whose GPU
// copy failed) before its first byte left becomes a remote access error; after that the
// connection must go.
bool addResponse(QpCore& q, uint64_t index, uint64_t offset, PinSet& pins, Gather& g) noexcept {
  Response& r = q.rsp[index & q.rsp_mask];
  if (!g.room(2)) return false;
  bool lost = r.length != 0 && !pins.add(r.key);
  if (lost && pins.full()) return false;
  const int mark_iov = g.niov;
  const uint64_t mark_total = g.total;
  Staged st = Staged::kDone;
  if (!lost) {
    g.msgs[g.nmsg] = Msg{true, true, offset, 0};
    uint64_t skip = offset;
    g.piece(r.header, kHeaderBytes, &skip);
    if (r.length != 0) {
      const int gpu = q.dev->mrs.gpuOfPinned(r.key);
      if (gpu < 0) {
        g.piece(reinterpret_cast<const void*>(r.addr), r.length, &skip);
      } else {
        st = stagePiece(g, gpu, r.addr, r.length, &skip);
      }
    }
    lost = st == Staged::kCopyFailed;
    if (!lost) return closeMsg(g, st, offset, mark_iov, mark_total);
    g.rollback(mark_iov, mark_total);
  }
  if (offset != 0) {
    q.tx_abort.store(true, std::memory_order_release);
    g.fault = true;
    return false;
  }
  r.status = WcStatus::kRemoteAccess;
  r.length = 0;
  r.encode();
  g.msgs[g.nmsg] = Msg{true, true, 0, 0};
  uint64_t skip = 0;
  g.piece(r.header, kHeaderBytes, &skip);
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
    const uint64_t took = sent < m.bytes ? sent : m.bytes;
    sent -= took;
    if (took == m.bytes && m.whole) {
      if (m.response) {
        ++q.rsp_head;
      } else {
        ++q.tx_seq;
      }
      q.partial = QpCore::Partial::kNone;
      q.partial_off = 0;
    } else {
      q.partial = m.response ? QpCore::Partial::kResponse : QpCore::Partial::kRequest;
      q.partial_off = m.start + took;
    }
  }
  q.rsp_sent.store(q.rsp_head, std::memory_order_release);
}

// The call's send buffer goes back; a stream waiting for one is kicked by the service
// thread.
void giveBack(QpCore& q, Gather& g) noexcept {
  if (g.staged < 0) return;
  if (g.pool->release(g.staged)) q.dev->loop->wake();
  g.staged = -1;
}

TxResult drain(QpCore& q) noexcept {
  if (!q.established.load(std::memory_order_seq_cst)) return TxResult::kClosed;
  if (q.tx_abort.load(std::memory_order_acquire)) return TxResult::kFault;
  const int fd = q.fd.load(std::memory_order_acquire);
  StagingPool* const pool = q.dev->staging.load(std::memory_order_acquire);
  for (;;) {
    Gather g;
    g.pool = pool;
    PinSet pins(q.dev->mrs);
    gather(q, pins, g);
    if (g.nmsg == 0) {
      pins.release();
      giveBack(q, g);
      if (g.fault) return TxResult::kFault;
      if (!g.no_buffer) return TxResult::kIdle;
      q.staging_wait.store(true, std::memory_order_seq_cst);
      if (g.pool->wait()) continue;  // one was given back meanwhile
      return TxResult::kStaging;
    }
    msghdr mh{};
    mh.msg_iov = g.iov;
    mh.msg_iovlen = static_cast<size_t>(g.niov);
    // datapath-lint: allow(syscall) the send itself: header and payload from registered memory
    const ssize_t n = ::sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    pins.release();
    giveBack(q, g);
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
