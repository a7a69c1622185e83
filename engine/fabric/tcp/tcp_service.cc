// The tcp provider's service thread: one per device, one epoll loop. It plays the
// NIC's processor: serves the peers' requests, completes our WRs, finishes sends a full
// socket buffer cut short, and fails WRs whose peer went silent. It sleeps in
// epoll_wait; with nothing outstanding it sleeps without a timeout (an idle device
// costs nothing), otherwise it wakes every quarter budget to check for progress.
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/clock.h"
#include "base/cpu_relax.h"
#include "fabric/tcp/tcp_internal.h"
#include "tent/log.h"

namespace tent::fabric::tcp {

DeviceState::~DeviceState() {
  loop.reset();  // stops the thread first, if the provider did not
}

ServiceLoop::~ServiceLoop() {
  stop();
  if (epfd_ >= 0) close(epfd_);
  if (evfd_ >= 0) close(evfd_);
}

Status ServiceLoop::start(int listen_fd) {
  listen_fd_ = listen_fd;
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  evfd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epfd_ < 0 || evfd_ < 0) {
    return Status::IoError(std::string("tcp: epoll/eventfd: ") + std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &kEventTag;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, evfd_, &ev) != 0) {
    return Status::IoError(std::string("tcp: epoll_ctl: ") + std::strerror(errno));
  }
  ev.data.ptr = &kListenTag;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) {
    return Status::IoError(std::string("tcp: epoll_ctl: ") + std::strerror(errno));
  }
  discard_ = std::make_unique<uint8_t[]>(kDiscardBytes);
  tick_ns_ = std::clamp<uint64_t>(dev_.retry_budget_ns / 4, 1'000'000, 250'000'000);
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = true;
  }
  thread_ = std::thread([this] { run(); });
  return Status::OK();
}

void ServiceLoop::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!running_ || stopping_) return;
    stopping_ = true;
  }
  wake();
  thread_.join();
  {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
  }
  cv_.notify_all();
}

// ---- the receive side's owner ------------------------------------------------------------

// A poller's turn is a bounded run of non-blocking calls that depends on nobody, so it
// always ends; spin briefly, then yield (on a small, oversubscribed machine the poller
// may have been preempted inside its turn).
ServiceLoop::RxOwner::RxOwner(QpCore& q) noexcept : q_(q) {
  if (q.rx_owner.load(std::memory_order_relaxed) == QpCore::kRxService) return;  // ours already
  constexpr unsigned kSpinsBeforeYield = 64;
  unsigned spins = 0;
  for (;;) {
    uint32_t free = QpCore::kRxFree;
    if (q.rx_owner.compare_exchange_weak(free, QpCore::kRxService, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
      break;
    }
    // Pollers start no new turn on this QP until we had it.
    if (spins == 0) q.rx_wanted.store(true, std::memory_order_seq_cst);
    if (++spins < kSpinsBeforeYield) {
      cpuRelax();
    } else {
      sched_yield();
    }
  }
  if (spins != 0) q.rx_wanted.store(false, std::memory_order_relaxed);
  took_ = true;
}

ServiceLoop::RxOwner::~RxOwner() {
  if (took_) q_.rx_owner.store(QpCore::kRxFree, std::memory_order_release);
}

// What a poller's turn left (rx_handoff): acted on as if this thread had read it.
void ServiceLoop::takeHandOff(QpCore& q) {
  RxOwner own(q);
  const auto r = static_cast<RxResult>(q.rx_handoff.exchange(0, std::memory_order_relaxed));
  const bool more = q.rx_more.exchange(false, std::memory_order_relaxed);
  if (q.conn == nullptr || q.conn->closed) return;
  if (r != RxResult::kContinue) {
    onRxResult(q.conn, r);
  } else if (more) {
    onRxResult(q.conn, RxResult::kMore);
  }
}

// ---- commands from the control path ------------------------------------------------

uint64_t ServiceLoop::submit(CmdKind kind, std::shared_ptr<QpCore> qp) {
  std::unique_lock<std::mutex> g(mu_);
  const uint64_t ticket = next_ticket_++;
  if (!running_ || stopping_) {
    // The device is closed: no thread to hand it to, nothing left to connect.
    Cmd cmd{kind, std::move(qp), ticket};
    if (kind == CmdKind::kRtr || kind == CmdKind::kError) {
      cmd.qp->conn_lost.store(true, std::memory_order_release);
    }
    done_ticket_ = std::max(done_ticket_, ticket);
    return ticket;
  }
  cmds_.push_back(Cmd{kind, std::move(qp), ticket});
  g.unlock();
  wake();
  return ticket;
}

void ServiceLoop::attach(std::shared_ptr<QpCore> qp) {
  submit(CmdKind::kAttach, std::move(qp));
}
void ServiceLoop::rtr(std::shared_ptr<QpCore> qp) {
  submit(CmdKind::kRtr, std::move(qp));
}
void ServiceLoop::error(std::shared_ptr<QpCore> qp) {
  submit(CmdKind::kError, std::move(qp));
}
void ServiceLoop::detach(std::shared_ptr<QpCore> qp) {
  const uint64_t ticket = submit(CmdKind::kDetach, std::move(qp));
  std::unique_lock<std::mutex> g(mu_);
  cv_.wait(g, [&] { return done_ticket_ >= ticket || !running_; });
}

void ServiceLoop::runCommands() {
  std::vector<Cmd> cmds;
  {
    std::lock_guard<std::mutex> g(mu_);
    cmds.swap(cmds_);
  }
  if (cmds.empty()) return;
  for (const Cmd& c : cmds) handle(c);
  {
    std::lock_guard<std::mutex> g(mu_);
    done_ticket_ = std::max(done_ticket_, cmds.back().ticket);
  }
  cv_.notify_all();
}

void ServiceLoop::handle(const Cmd& cmd) {
  QpCore& q = *cmd.qp;
  switch (cmd.kind) {
    case CmdKind::kAttach:
      qps_[q.qp_num] = cmd.qp;
      break;
    case CmdKind::kRtr:
      if (q.role == Role::kConnector) {
        startConnect(cmd.qp);
      } else {
        claimPending(cmd.qp);
      }
      break;
    case CmdKind::kError:
      processQp(q);
      break;
    case CmdKind::kDetach:
      if (q.conn != nullptr) closeConn(q.conn);
      for (auto& [ptr, conn] : conns_) {
        if (!conn->closed && conn->stage == Conn::Stage::kPending && conn->hello.dst_qp == q.qp_num)
          reject(conn.get(), RejectReason::kNoSuchQp);
      }
      qps_.erase(q.qp_num);
      break;
  }
}

// ---- the loop ----------------------------------------------------------------------------

void ServiceLoop::run() {
  constexpr int kEvents = 64;
  epoll_event events[kEvents];
  for (;;) {
    runCommands();
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stopping_) break;
    }
    serviceReady();
    const int n = epoll_wait(epfd_, events, kEvents, waitTimeoutMs());
    sleeping_.store(false, std::memory_order_seq_cst);
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      void* tag = events[i].data.ptr;
      if (tag == &kEventTag) {
        eventfd_t value;
        (void)eventfd_read(evfd_, &value);
        woken = true;
      } else if (tag == &kListenTag) {
        acceptAll();
      } else {
        handleEvent(static_cast<Conn*>(tag), events[i].events);
      }
    }
    if (woken) {
      runCommands();
      scanQps();
    }
    checkTimers(clock::monotonicNs());
    freeClosed();
  }
  shutdownAll();
}

int ServiceLoop::waitTimeoutMs() {
  if (ready_ != nullptr) return 0;
  const uint64_t now = clock::monotonicNs();
  if (!watched_) {
    // About to sleep without a timeout: say so, then look once more. A poster that
    // published WRs before it could see the flag is found by this look; one after it
    // sees the flag and wakes us.
    sleeping_.store(true, std::memory_order_seq_cst);
    if (!anyWatched(now)) return -1;
    sleeping_.store(false, std::memory_order_seq_cst);
    watched_ = true;
    next_tick_ = now + tick_ns_;
  }
  if (next_tick_ <= now) return 0;
  return static_cast<int>((next_tick_ - now + 999'999) / 1'000'000);
}

bool ServiceLoop::anyWatched(uint64_t now) {
  (void)now;
  for (auto& [ptr, conn] : conns_) {
    if (!conn->closed && conn->stage != Conn::Stage::kOpen) return true;
  }
  for (auto& [num, q] : qps_) {
    if (q->done_pub.load(std::memory_order_seq_cst) != q->tail.load(std::memory_order_seq_cst)) {
      return true;
    }
  }
  return false;
}

void ServiceLoop::serviceReady() {
  Conn* list = ready_;
  ready_ = nullptr;
  while (list != nullptr) {
    Conn* c = list;
    list = c->next_ready;
    c->next_ready = nullptr;
    c->ready = false;
    if (!c->closed) handleEvent(c, EPOLLIN);
  }
}

void ServiceLoop::handleEvent(Conn* c, uint32_t events) {
  if (c->closed) return;
  switch (c->stage) {
    case Conn::Stage::kConnecting:
      onConnected(c);
      return;
    case Conn::Stage::kAwaitHello:
    case Conn::Stage::kAwaitAck:
      readHello(c);
      return;
    case Conn::Stage::kPending:
      // Bytes wait in the socket until the QP reaches RTR; only a close matters now.
      if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) closeConn(c);
      return;
    case Conn::Stage::kOpen:
      break;
  }
  QpCore& q = *c->qp;
  RxOwner own(q);  // a poller's turn on this stream ends first
  if ((events & EPOLLOUT) && kickTx(q) == TxResult::kFault) {
    processQp(q);
    if (c->closed) return;
  }
  // A poller's turn stopped where the service thread must act: that comes first.
  const auto handed = static_cast<RxResult>(q.rx_handoff.exchange(0, std::memory_order_relaxed));
  if (handed != RxResult::kContinue) {
    onRxResult(c, handed);
    return;
  }
  if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))) return;
  onRxResult(c, readStream(*c, /*caller=*/false));
}

void ServiceLoop::onRxResult(Conn* c, RxResult r) {
  QpCore& q = *c->qp;
  switch (r) {
    case RxResult::kContinue:
    case RxResult::kAgain:
      break;
    case RxResult::kMore:
    case RxResult::kHandOff:
      if (!c->ready) {
        c->ready = true;
        c->next_ready = ready_;
        ready_ = c;
      }
      break;
    case RxResult::kClosed:
      failConn(c, "the peer closed the connection");
      break;
    case RxResult::kBroken:
      failConn(c, "the peer broke the wire protocol");
      break;
    case RxResult::kQpError:
      stopStream(q);
      completeInOrder(q);
      break;
    case RxResult::kTxFault:
      processQp(q);
      break;
  }
}

void ServiceLoop::freeClosed() {
  for (Conn* c : closed_) conns_.erase(c);
  closed_.clear();
}

// ---- per QP -----------------------------------------------------------------------------

void ServiceLoop::scanQps() {
  // A staging buffer was given back while send streams waited for one: kick them.
  StagingPool* pool = dev_.staging.load(std::memory_order_acquire);
  const bool staging = pool != nullptr && pool->takeWaiters();
  for (auto& [num, q] : qps_) {
    if (staging && q->staging_wait.exchange(false, std::memory_order_seq_cst)) (void)kickTx(*q);
    RxOwner own(*q);
    takeHandOff(*q);
    processQp(*q);
  }
}

void ServiceLoop::stopStream(QpCore& q) {
  if (q.conn != nullptr) closeConn(q.conn);
}

void ServiceLoop::processQp(QpCore& q) {
  RxOwner own(q);
  if (q.flush_requested.load(std::memory_order_seq_cst)) {
    // modifyToError, or the device closing: everything not yet completed is flushed, in
    // order, and the QP takes no more posts.
    q.state.store(QpState::kError, std::memory_order_seq_cst);
    stopStream(q);
    q.error_seen = true;
    completeInOrder(q);
    if (q.max_recv_wr != 0) flushReceives(q);
    return;
  }
  if (q.tx_abort.load(std::memory_order_acquire) && q.conn != nullptr) {
    failConn(q.conn, "a registered region went away while a message from it was being sent");
    return;
  }
  const uint64_t stop = q.tx_stop.load(std::memory_order_acquire);
  if (stop != UINT64_MAX && stop >= q.done && !q.wr(stop).final) {
    q.wr(stop).status = WcStatus::kLocalProtection;  // its local region went away
    q.wr(stop).final = true;
  }
  if (q.conn_lost.load(std::memory_order_acquire) &&
      q.done < q.tail.load(std::memory_order_acquire) && !q.wr(q.done).final) {
    q.wr(q.done).status = WcStatus::kRetryExceeded;
    q.wr(q.done).final = true;
  }
  if (completeInOrder(q)) {
    stopStream(q);
    completeInOrder(q);
  }
  if (q.conn_lost.load(std::memory_order_acquire) && q.conn == nullptr) breakIdleQp(q);
  if (q.max_recv_wr != 0 && q.state.load(std::memory_order_acquire) == QpState::kError) {
    flushReceives(q);
  }
}

// A QP whose connection is gone with nothing outstanding goes to ERR at once, as a
// NIC's QP does on a fatal async event: a TCP connection is the QP's transport context
// and, unlike a NIC's RC context across a link flap, never comes back. So the owner
// sees the QP is broken (state() is ERR, posts fail with EINVAL) and replaces it before
// the next request, instead of learning it from that request's retry-exceeded (a link
// that went down and up again: the idle QPs' keepalive ended their connections).
void ServiceLoop::breakIdleQp(QpCore& q) {
  if (q.error_seen) return;
  if (q.done != q.tail.load(std::memory_order_seq_cst)) return;  // that WR fails it
  // RTS only: a QP still in RTR is being connected by the control path, whose RTS step
  // must not race this; its first WR fails as to a dead peer.
  QpState expected = QpState::kRts;
  if (q.state.compare_exchange_strong(expected, QpState::kError, std::memory_order_seq_cst)) {
    // A WR published after the look above is flushed by the next pass (its poster sees
    // ERR and wakes us).
    q.error_seen = true;
    TENT_INFO(kFabric, "tcp %s QP %u: connection lost with nothing outstanding; QP in ERR",
              dev_.info.name.c_str(), q.qp_num);
  }
}

// ---- timers ------------------------------------------------------------------------------

void ServiceLoop::checkTimers(uint64_t now) {
  if (!watched_ || now < next_tick_) return;
  next_tick_ = now + tick_ns_;
  bool watched = false;
  if (listen_paused_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &kListenTag;
    epoll_ctl(epfd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    listen_paused_ = false;
  }
  for (auto& [ptr, conn] : conns_) {
    Conn* c = conn.get();
    if (c->closed) continue;
    if (c->stage == Conn::Stage::kAwaitHello || c->stage == Conn::Stage::kPending) {
      if (now >= c->deadline_ns) {
        if (c->stage == Conn::Stage::kPending) {
          reject(c, RejectReason::kTimeout);
        } else {
          closeConn(c);
        }
      } else {
        watched = true;
      }
    }
  }
  for (auto& [num, qp] : qps_) {
    QpCore& q = *qp;
    RxOwner own(q);
    const bool outstanding = q.done != q.tail.load(std::memory_order_acquire);
    const bool setting_up = q.conn != nullptr && q.conn->stage != Conn::Stage::kOpen;
    if (!outstanding && !setting_up) {
      q.watched = false;
      continue;
    }
    watched = true;
    const uint64_t progress = q.tx_bytes.load(std::memory_order_relaxed) + q.done +
                              (q.conn != nullptr ? q.conn->rx_bytes : 0);
    if (!q.watched || progress != q.seen_progress) {
      q.watched = true;
      q.seen_progress = progress;
      q.progress_ns = now;
      continue;
    }
    if (now - q.progress_ns < dev_.retry_budget_ns) continue;
    // The peer has been silent for the whole budget: a dead or partitioned peer.
    TENT_INFO(kFabric, "tcp %s QP %u: no progress for %u ms with WRs outstanding; failing them",
              dev_.info.name.c_str(), q.qp_num, dev_.retry_budget_ms);
    q.watched = false;
    if (q.conn != nullptr) {
      failConn(q.conn, "no progress within the retry budget");
    } else {
      q.conn_lost.store(true, std::memory_order_release);
      processQp(q);
    }
  }
  watched_ = watched;
}

// ---- shutdown ------------------------------------------------------------------------------

void ServiceLoop::shutdownAll() {
  for (auto& [ptr, conn] : conns_) {
    if (!conn->closed) closeConn(conn.get());
  }
  for (auto& [num, q] : qps_) {
    q->conn_lost.store(true, std::memory_order_release);
    q->flush_requested.store(true, std::memory_order_seq_cst);
    processQp(*q);
  }
  qps_.clear();
  closed_.clear();
  conns_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace tent::fabric::tcp
