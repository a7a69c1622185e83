// The tcp provider's connections, on the service thread: one per QP pair.
//
// Who connects: of the two QPs, the one whose (port identity, qp_num) is lower; both
// sides compute it alike from what modifyToRtr gave them (weConnect). It connects
// (non-blocking) when its QP reaches RTR and sends HELLO naming both QPs; posts made
// meanwhile wait in the send queue and follow the HELLO at once. The other side
// accepts; when the named QP is already RTR with that peer it answers HELLO_ACK and the
// connection is the QP's, otherwise (still RESET/INIT) the connection waits for it, at
// most one retry budget. Either side may reach RTR first.
#include <netinet/in.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "fabric/tcp/tcp_internal.h"
#include "tent/log.h"

namespace tent::fabric::tcp {

namespace {

bool sendAll(int fd, const uint8_t* p, size_t n) {
  // A fresh connection's send buffer is empty: 64 bytes go in one call.
  const ssize_t sent = ::send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  return sent == static_cast<ssize_t>(n);
}

}  // namespace

Conn* ServiceLoop::newConn(int fd, Conn::Stage stage) {
  auto conn = std::make_unique<Conn>();
  conn->fd = fd;
  conn->stage = stage;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.ptr = conn.get();
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    TENT_WARN(kFabric, "tcp %s: epoll_ctl: %s", dev_.info.name.c_str(), std::strerror(errno));
    close(fd);
    return nullptr;
  }
  Conn* raw = conn.get();
  conns_.emplace(raw, std::move(conn));
  return raw;
}

void ServiceLoop::closeConn(Conn* c) {
  if (c->closed) return;
  c->closed = true;
  if (c->stage == Conn::Stage::kAwaitHello || c->stage == Conn::Stage::kPending) --unclaimed_;
  if (c->ready) {
    for (Conn** p = &ready_; *p != nullptr; p = &(*p)->next_ready) {
      if (*p == c) {
        *p = c->next_ready;
        break;
      }
    }
    c->ready = false;
  }
  if (c->qp != nullptr) {
    QpCore& q = *c->qp;
    // After this no poller reaches the stream (rx_conn is cleared while we own it).
    RxOwner own(q);
    if (q.rx_conn.load(std::memory_order_relaxed) == c) {
      q.rx_conn.store(nullptr, std::memory_order_relaxed);
    }
    q.established.store(false, std::memory_order_seq_cst);
    // A sender inside sendmsg on this fd finishes its one call first; after this no
    // sender touches the fd (established is false).
    while (q.tx_busy.exchange(1, std::memory_order_seq_cst) != 0) sched_yield();
    q.fd.store(-1, std::memory_order_release);
    q.tx_busy.store(0, std::memory_order_seq_cst);
    if (q.conn == c) q.conn = nullptr;
  }
  epoll_ctl(epfd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  c->fd = -1;
  closed_.push_back(c);
}

void ServiceLoop::failConn(Conn* c, const char* why) {
  std::shared_ptr<QpCore> qp = c->qp;
  if (qp != nullptr) {
    TENT_INFO(kFabric, "tcp %s QP %u: connection to QP %u lost: %s", dev_.info.name.c_str(),
              qp->qp_num, qp->remote.qp_num, why);
  }
  closeConn(c);
  if (qp == nullptr) return;
  qp->conn_lost.store(true, std::memory_order_release);
  processQp(*qp);  // its outstanding WRs fail as to a dead peer
}

// ---- accepting ------------------------------------------------------------------------

void ServiceLoop::acceptAll() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // Out of descriptors or memory: the listener would report the same connection
        // again at once. Stop listening for events until the next tick.
        TENT_WARN(kFabric, "tcp %s: accept: %s; accepting again in %llu ms", dev_.info.name.c_str(),
                  std::strerror(errno), static_cast<unsigned long long>(tick_ns_ / 1'000'000));
        epoll_event ev{};
        ev.data.ptr = &kListenTag;
        epoll_ctl(epfd_, EPOLL_CTL_MOD, listen_fd_, &ev);
        listen_paused_ = true;
        watched_ = true;
        next_tick_ = clock::monotonicNs() + tick_ns_;
      }
      return;
    }
    if (unclaimed_ >= kMaxUnclaimedConnections || !tuneSocket(fd, dev_.retry_budget_ms).ok()) {
      close(fd);
      continue;
    }
    Conn* c = newConn(fd, Conn::Stage::kAwaitHello);
    if (c == nullptr) continue;
    ++unclaimed_;
    c->deadline_ns = clock::monotonicNs() + dev_.retry_budget_ns;
  }
}

void ServiceLoop::readHello(Conn* c) {
  while (c->hello_got < kHelloBytes) {
    const ssize_t n =
        ::recv(c->fd, c->hello_buf + c->hello_got, kHelloBytes - c->hello_got, MSG_DONTWAIT);
    if (n > 0) {
      c->hello_got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (c->stage == Conn::Stage::kAwaitAck) {
      failConn(c, n == 0 ? "closed before the hello was answered" : std::strerror(errno));
    } else {
      closeConn(c);
    }
    return;
  }
  if (c->stage == Conn::Stage::kAwaitHello) {
    onHello(c);
  } else {
    onHelloReply(c);
  }
}

void ServiceLoop::onHello(Conn* c) {
  Hello h;
  const ParseResult r = parseHello(c->hello_buf, &h);
  c->hello = h;
  if (r == ParseResult::kBadVersion) {
    reject(c, RejectReason::kVersion);
    return;
  }
  if (r != ParseResult::kOk || h.kind != HelloKind::kHello) {
    closeConn(c);  // not a tent tcp peer
    return;
  }
  if (!(h.dst == dev_.identity)) {
    reject(c, RejectReason::kMisdirected);
    return;
  }
  auto it = qps_.find(h.dst_qp);
  if (it == qps_.end()) {
    reject(c, RejectReason::kNoSuchQp);
    return;
  }
  const QpState st = it->second->state.load(std::memory_order_acquire);
  if (st == QpState::kReset || st == QpState::kInit) {
    c->stage = Conn::Stage::kPending;  // until its QP reaches RTR (claimPending)
    return;
  }
  if (adopt(c, it->second, h)) handleEvent(c, EPOLLIN);
}

bool ServiceLoop::adopt(Conn* c, const std::shared_ptr<QpCore>& qp, const Hello& h) {
  QpCore& q = *qp;
  if (q.role != Role::kAcceptor || q.remote.qp_num != h.src_qp || !(q.remote.port == h.src)) {
    reject(c, RejectReason::kWrongPeer);
    return false;
  }
  // A QP in ERR because a WR failed its checks at post time still sends the WRs before
  // that one; only a completed error, a flush or a lost connection ends it.
  if (q.conn != nullptr || q.error_seen || q.conn_lost.load(std::memory_order_acquire) ||
      q.flush_requested.load(std::memory_order_acquire)) {
    reject(c, RejectReason::kQpState);
    return false;
  }
  Hello ack;
  ack.kind = HelloKind::kAck;
  ack.src_qp = q.qp_num;
  ack.dst_qp = h.src_qp;
  ack.src = dev_.identity;
  ack.dst = h.src;
  ack.max_send_wr = q.max_send_wr;
  uint8_t buf[kHelloBytes];
  encodeHello(ack, buf);
  if (!sendAll(c->fd, buf, sizeof(buf))) {
    closeConn(c);
    return false;
  }
  --unclaimed_;
  c->qp = qp;
  q.conn = c;
  openStream(c, h.max_send_wr);
  return true;
}

void ServiceLoop::reject(Conn* c, RejectReason reason) {
  Hello h;
  h.kind = HelloKind::kReject;
  h.src_qp = c->hello.dst_qp;
  h.dst_qp = c->hello.src_qp;
  h.src = dev_.identity;
  h.dst = c->hello.src;
  h.reason = reason;
  uint8_t buf[kHelloBytes];
  encodeHello(h, buf);
  (void)sendAll(c->fd, buf, sizeof(buf));  // best effort: the close says it as well
  TENT_DEBUG(kFabric, "tcp %s: refused a connection for QP %u: %s", dev_.info.name.c_str(),
             c->hello.dst_qp, toString(reason));
  closeConn(c);
}

void ServiceLoop::claimPending(const std::shared_ptr<QpCore>& qp) {
  for (auto& [ptr, conn] : conns_) {
    Conn* c = conn.get();
    if (c->closed || c->stage != Conn::Stage::kPending || c->hello.dst_qp != qp->qp_num) continue;
    if (adopt(c, qp, c->hello)) handleEvent(c, EPOLLIN);  // what it sent meanwhile
  }
}

// ---- connecting ------------------------------------------------------------------------

void ServiceLoop::startConnect(const std::shared_ptr<QpCore>& qp) {
  QpCore& q = *qp;
  auto address = addressOf(q.remote.port);  // checked at RTR
  int fd = -1;
  if (address.ok()) {
    fd = socket(address->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  Status st = fd >= 0 ? tuneSocket(fd, dev_.retry_budget_ms)
                      : Status::IoError(std::string("socket: ") + std::strerror(errno));
  if (st.ok()) st = applyTrafficClass(fd, address->storage.ss_family, q.traffic_class);
  int rc = -1;
  if (st.ok()) {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&address->storage), address->length);
    if (rc != 0 && errno != EINPROGRESS) {
      st = Status::IoError("connect to " + toText(*address) + ": " + std::strerror(errno));
    }
  }
  Conn* c = st.ok() ? newConn(fd, Conn::Stage::kConnecting) : nullptr;
  if (c == nullptr) {
    if (fd >= 0 && !st.ok()) close(fd);
    TENT_INFO(kFabric, "tcp %s QP %u: cannot connect: %s", dev_.info.name.c_str(), q.qp_num,
              st.ok() ? "epoll" : st.message().c_str());
    q.conn_lost.store(true, std::memory_order_release);
    processQp(q);
    return;
  }
  c->qp = qp;
  q.conn = c;
  if (rc == 0) onConnected(c);  // otherwise EPOLLOUT says when
}

void ServiceLoop::onConnected(Conn* c) {
  if (c->stage != Conn::Stage::kConnecting) return;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) {
    failConn(c, std::strerror(err));
    return;
  }
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof(peer);
  if (getpeername(c->fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return;  // not yet
  QpCore& q = *c->qp;
  Hello h;
  h.kind = HelloKind::kHello;
  h.src_qp = q.qp_num;
  h.dst_qp = q.remote.qp_num;
  h.src = dev_.identity;
  h.dst = q.remote.port;
  h.max_send_wr = q.max_send_wr;
  uint8_t buf[kHelloBytes];
  encodeHello(h, buf);
  if (!sendAll(c->fd, buf, sizeof(buf))) {
    failConn(c, "cannot send the hello");
    return;
  }
  c->stage = Conn::Stage::kAwaitAck;
  // Requests may follow the hello at once; the peer reads them once it answered.
  q.fd.store(c->fd, std::memory_order_release);
  q.established.store(true, std::memory_order_seq_cst);
  if (kickTx(q) == TxResult::kFault) processQp(q);
}

void ServiceLoop::onHelloReply(Conn* c) {
  QpCore& q = *c->qp;
  Hello h;
  const ParseResult r = parseHello(c->hello_buf, &h);
  if (r != ParseResult::kOk) {
    failConn(c, r == ParseResult::kBadVersion ? "the peer speaks another wire version"
                                              : "malformed hello reply");
    return;
  }
  if (h.kind == HelloKind::kReject) {
    failConn(c, toString(h.reason));
    return;
  }
  if (h.kind != HelloKind::kAck || h.src_qp != q.remote.qp_num || h.dst_qp != q.qp_num) {
    failConn(c, "the hello reply names other QPs");
    return;
  }
  openStream(c, h.max_send_wr);
  handleEvent(c, EPOLLIN);  // what followed the reply
}

void ServiceLoop::openStream(Conn* c, uint32_t peer_max_send_wr) {
  QpCore& q = *c->qp;
  // Responses owed to the peer: at most its send queue depth at any time.
  const uint64_t cap = std::bit_ceil(uint64_t{std::clamp(peer_max_send_wr, 1u, kMaxSendWr)});
  q.rsp = std::make_unique<Response[]>(cap);
  q.rsp_mask = cap - 1;
  c->stage = Conn::Stage::kOpen;
  if (!q.established.load(std::memory_order_acquire)) {
    if (c->fd >= 0) {
      sockaddr_storage self{};
      socklen_t len = sizeof(self);
      if (getsockname(c->fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
        (void)applyTrafficClass(c->fd, self.ss_family, q.traffic_class);
      }
    }
    q.fd.store(c->fd, std::memory_order_release);
    q.established.store(true, std::memory_order_seq_cst);
  }
  {
    // Pollers may read the stream from now on (caller-side progress).
    RxOwner own(q);
    q.rx_conn.store(c, std::memory_order_release);
  }
  if (kickTx(q) == TxResult::kFault) processQp(q);
}

}  // namespace tent::fabric::tcp
