// Internal objects of the tcp provider (private to engine/fabric/tcp). docs/fabric.md,
// "tcp provider", says what runs where; in short:
//
//   poster (any thread, one per QP at a time)  checks and queues WRs, then sends them
//       itself with a non-blocking sendmsg when it gets the QP's send stream (tx_busy);
//   service thread (one per device, epoll)     accepts and sets up connections, serves
//       the peer's requests (places WRITE payloads, sends READ payloads), matches
//       responses to WRs, pushes completions in order, continues sends a full socket
//       buffer cut short, and fails WRs of silent peers after the retry budget;
//   pollers (any threads)                      pop completions from the CQ ring; a poll
//       that finds it empty progresses the CQ's QPs with WRs outstanding itself
//       (caller-side progress, tcp_progress_datapath.cc): one non-blocking turn of the
//       QP's receive side, so a round trip need not wait for the service thread.
//
// The receive side of a QP (its Conn's receive state machine, `done`, `error_seen`, the
// WR slots' outcomes, `rq_taken`, the responses it queues) has one owner at a time,
// `rx_owner`: the service thread (kRxService) or a poller (kRxCaller). A poller only
// tries (one compare-exchange; the loser leaves the QP alone); the service thread takes
// it for every path that touches that state (RxOwner), waiting out a poller's turn,
// which is a bounded run of non-blocking calls (as the CQ producer waits for a cell);
// while it waits (`rx_wanted`) pollers start no new turn on that QP, so it cannot starve. A
// poller sees the connection only through `rx_conn`, set and cleared by the service
// thread while it owns the receive side, so a closed connection is never touched. What
// a poller's turn cannot finish (end of stream, a protocol break, an error completion,
// a send-side fault, a refused payload to read past, device memory to stage) it leaves
// in `rx_handoff` and wakes the service thread, which acts on it before anyone reads
// that stream again; a turn that ran out of budget sets `rx_more` (the service thread
// reads on, as after its own turn; pollers may too).
//
// Ownership of a QP's fields: the poster writes its WR slots up to `tail` and publishes
// them; from then on only the service thread writes them (status, final), except
// that the tx stream reads the slots it sends. A flush that marks slots the tx might
// read first closes the connection (which waits for the tx stream to be released).
//
// Every wait has a waker. Who wakes whom, for each state a thread can be stopped in:
//   service thread in epoll_wait(-1) (nothing outstanding, nothing being set up)
//       <- a poster that publishes WRs sees `sleeping` and writes the eventfd (both
//          sides seq_cst: it sees the flag, or the service thread's last look sees
//          its tail); commands of the control path write the eventfd too;
//   service thread in a timed epoll_wait (WRs outstanding, a connection being set up)
//       <- its own tick (a quarter of the retry budget), besides the wakers above;
//   send stream stopped on a full socket (TxResult::kBlocked)
//       <- the socket's edge-triggered EPOLLOUT: the service thread kicks the stream;
//   send stream stopped for a staging buffer (TxResult::kStaging, tcp_staging.h)
//       <- whoever gives a buffer back sees the waiter count and writes the eventfd;
//          the service thread kicks every QP marked `staging_wait` (the count and
//          the free bits are seq_cst: the releaser sees the waiter, or the waiter's
//          second look sees the buffer and it retries at once);
//   a kick while another thread holds the send stream (tx_busy)
//       <- the holder: it re-reads tx_kicks after letting go and drains again;
//   responses queued by the service thread <- it kicks the send stream itself;
//   the receive side never waits (it has its own staging buffer);
//   the CQ producer waiting for a cell a poller took (tcp_cq.h)
//       <- that poller, two statements later (the producer spins, then yields);
//   the service thread waiting for a poller's turn on a receive side (RxOwner)
//       <- that poller, at the end of its turn (a few non-blocking calls);
//   a poller's hand-off (rx_handoff) <- it writes the eventfd after handing off;
//   posters on ENOMEM and pollers on an empty CQ: the caller's own loop; completions
//       come from the service thread, woken as above, or from the poller's own turn.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"
#include "fabric/tcp/tcp_cq.h"
#include "fabric/tcp/tcp_mr.h"
#include "fabric/tcp/tcp_staging.h"
#include "fabric/tcp/tcp_wire.h"

namespace tent::fabric::tcp {

inline constexpr uint32_t kMaxSendWr = 32768;
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxRecvWr = 32768;
inline constexpr uint32_t kMaxDevices = 64;
// Accepted connections that have not yet named a QP, per device (a bound against a
// flood of idle connections).
inline constexpr uint32_t kMaxUnclaimedConnections = 1024;

struct DeviceState;
class ServiceLoop;
struct Conn;

// ---- a queue pair's send queue ------------------------------------------------------

struct WrSlot {
  uint64_t wr_id = 0;
  uint32_t length = 0;  // sum of the SGE lengths
  uint32_t num_sge = 0;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  bool signaled = true;
  bool final = false;  // `status` is the WR's outcome
  WcStatus status = WcStatus::kSuccess;
  uint8_t header[kHeaderBytes] = {};  // the request as it goes on the wire
};

// A response the responder owes its peer: made by the service thread, sent by
// whoever holds the QP's send stream.
struct Response {
  uint64_t seq = 0;
  Opcode opcode = Opcode::kWriteAck;
  WcStatus status = WcStatus::kSuccess;
  uint32_t length = 0;  // payload bytes (0: header only)
  uint64_t addr = 0;    // READ_RESP payload, in a region of ours
  uint32_t key = 0;     // that region, pinned around each sendmsg
  uint8_t header[kHeaderBytes] = {};

  void encode() noexcept {
    Header h;
    h.opcode = opcode;
    h.status = status;
    h.length = length;
    h.seq = seq;
    encodeHeader(h, header);
  }
};

enum class TxResult : uint8_t {
  kIdle,     // nothing left to send
  kBlocked,  // the socket buffer is full: EPOLLOUT continues
  kClosed,   // no connection (not yet, or not any more)
  kFault,    // a region went away under a send: the service thread must act
  kStaging,  // a GPU payload waits for a staging buffer: a release kicks the QP again
};

enum class Role : uint8_t { kUnset, kConnector, kAcceptor };

// A posted receive (one SGE).
struct RecvSlot {
  uint64_t wr_id = 0;
  Sge sge;
  uint32_t num_sge = 0;
};

struct QpCore {
  QpCore(std::shared_ptr<DeviceState> dev, std::shared_ptr<CqCore> cq, uint32_t slot, uint16_t gen,
         const QpInitAttr& attr, std::shared_ptr<CqCore> recv_cq = nullptr);

  WrSlot& wr(uint64_t seq) noexcept { return slots[seq & mask]; }
  Sge* sges(uint64_t seq) noexcept { return sge_pool.get() + (seq & mask) * max_sge; }
  // WRs released by polling (low 32 bits of the count); the poster's ENOMEM check.
  uint32_t released() const noexcept;

  const std::shared_ptr<DeviceState> dev;
  const std::shared_ptr<CqCore> cq;
  const uint32_t slot;
  const uint16_t gen;
  const uint32_t qp_num;
  const uint32_t max_send_wr;
  const uint32_t max_sge;
  const uint64_t mask;
  std::atomic<QpState> state{QpState::kReset};
  std::unique_ptr<WrSlot[]> slots;
  std::unique_ptr<Sge[]> sge_pool;

  // The receive queue (max_recv_wr 0: none). The receive poster writes slots and
  // rq_posted; the service thread takes them in order (rq_taken) and pushes their
  // completions to recv_cq; a polled one releases its slot (the device's recv_words).
  const std::shared_ptr<CqCore> recv_cq;
  const uint32_t max_recv_wr;
  const uint64_t rq_mask;
  std::unique_ptr<RecvSlot[]> rq;
  std::atomic<bool> recv_posting{false};
  std::atomic<uint64_t> rq_posted{0};
  uint64_t rq_taken = 0;  // whoever owns the receive side (rx_owner)
  uint32_t rqReleased() const noexcept;

  // The poster.
  std::atomic<bool> posting{false};
  uint64_t post_tail = 0;
  std::atomic<uint64_t> tail{0};  // WRs published to the service thread and the tx

  // The send stream: whoever holds tx_busy sends (tcp_tx_datapath.cc).
  std::atomic<uint32_t> tx_busy{0};
  std::atomic<uint64_t> tx_kicks{0};
  std::atomic<bool> established{false};  // fd may be written to
  std::atomic<int> fd{-1};
  uint64_t tx_seq = 0;    // next request to send
  uint64_t rsp_head = 0;  // next response to send
  enum class Partial : uint8_t { kNone, kRequest, kResponse } partial = Partial::kNone;
  uint64_t partial_off = 0;  // bytes of the partial message already sent
  // A request whose local region went away before its first byte was sent: it and
  // every later request stay unsent (the service thread fails it).
  std::atomic<uint64_t> tx_stop{UINT64_MAX};
  // A message was cut short (its region went away mid-send): the connection must close.
  std::atomic<bool> tx_abort{false};
  std::atomic<uint64_t> tx_bytes{0};  // bytes written, for the no-progress check
  // The send stream waits for a staging buffer (tcp_staging.h): the service thread
  // kicks it when one is given back.
  std::atomic<bool> staging_wait{false};

  // Responses: entries and rsp_tail written by the receive side's owner, rsp_sent by the tx.
  std::unique_ptr<Response[]> rsp;
  uint64_t rsp_mask = 0;
  std::atomic<uint64_t> rsp_tail{0};
  std::atomic<uint64_t> rsp_sent{0};

  // A connection that was set up and is gone (peer closed, reset, timed out, rejected):
  // the QP's WRs fail with retry-exceeded from then on, as to a dead peer.
  std::atomic<bool> conn_lost{false};
  // modifyToError: every WR not yet completed is flushed.
  std::atomic<bool> flush_requested{false};

  // The receive side's owner (the head comment): a poller takes it with one
  // compare-exchange or leaves the QP alone; the service thread waits for it (RxOwner).
  static constexpr uint32_t kRxFree = 0, kRxCaller = 1, kRxService = 2;
  std::atomic<uint32_t> rx_owner{kRxFree};
  // The service thread waits for the receive side: pollers take no new turn on the QP
  // until it had it (a poller polling in a tight loop would otherwise starve it).
  std::atomic<bool> rx_wanted{false};
  // The open connection, for pollers: set (openStream) and cleared (closeConn) by the
  // service thread while it owns the receive side. Read by pollers only while they own it.
  std::atomic<Conn*> rx_conn{nullptr};
  // What a poller's turn left for the service thread (ServiceLoop::RxResult; 0: nothing).
  std::atomic<uint8_t> rx_handoff{0};
  // A poller's turn ran out of budget with bytes left: the service thread reads on
  // (pollers may too; unlike rx_handoff this does not stop them).
  std::atomic<bool> rx_more{false};
  // `done` as pollers and the sleeping check may read it without owning the receive side.
  std::atomic<uint64_t> done_pub{0};
  // The send CQ's list of QPs that its pollers progress (CqCore::addProgress).
  std::atomic<QpCore*> progress_next{nullptr};

  // Whoever owns the receive side (rx_owner).
  uint64_t done = 0;  // WRs below are completed (their CQE pushed, or unsignaled successes)
  bool error_seen = false;
  // Service thread only.
  bool watched = false;        // had WRs outstanding (or a connection in set-up) at the last tick
  uint64_t seen_progress = 0;  // bytes moved and WRs completed, at the last tick
  uint64_t progress_ns = 0;    // when that last changed
  Role role = Role::kUnset;
  QpRemote remote;
  Conn* conn = nullptr;
  // The traffic class for the connection's socket (IP_TOS / IPV6_TCLASS), from RTR's
  // QpRemote::traffic; 0 = the system default, nothing set.
  uint8_t traffic_class = 0;
};

// ---- one TCP connection (service thread only) ----------------------------------------

struct Conn {
  enum class Stage : uint8_t {
    kConnecting,  // we connect: waiting for the connect to finish
    kAwaitAck,    // we connected and sent HELLO: the first bytes back are HELLO_ACK
    kAwaitHello,  // accepted: waiting for the peer's HELLO
    kPending,     // accepted with a HELLO for a QP not yet RTR: waiting for it
    kOpen,        // messages flow
  };
  enum class Rx : uint8_t { kHeader, kWritePayload, kReadPayload, kDiscard };

  int fd = -1;
  Stage stage = Stage::kConnecting;
  std::shared_ptr<QpCore> qp;
  uint8_t hello_buf[kHelloBytes] = {};
  size_t hello_got = 0;
  Hello hello;               // kPending: the hello waiting for its QP
  uint64_t deadline_ns = 0;  // kAwaitHello / kPending

  Rx rx = Rx::kHeader;
  uint8_t hdr[kHeaderBytes] = {};
  size_t hdr_got = 0;
  Header cur;  // the message being received
  // A SEND being received: the receive it took (if any) and that receive's status.
  bool recv_taken = false;
  uint64_t recv_wr_id = 0;
  WcStatus recv_status = WcStatus::kSuccess;
  uint64_t rx_off = 0;  // payload bytes of `cur` handled
  WcStatus rx_status = WcStatus::kSuccess;
  uint64_t peer_seq = 0;  // the next request number expected from the peer
  uint64_t rx_bytes = 0;

  Conn* next_ready = nullptr;  // more to read than one turn allows
  bool ready = false;
  bool closed = false;
};

class TcpQp final : public QueuePair {
 public:
  explicit TcpQp(std::shared_ptr<QpCore> core);
  ~TcpQp() override;

  uint32_t qpNum() const noexcept override { return q_->qp_num; }
  QpState state() const noexcept override { return q_->state.load(std::memory_order_acquire); }
  int postSend(const SendWr* wr, const SendWr** bad_wr) noexcept override;
  int postRecv(const RecvWr* wr, const RecvWr** bad_wr) noexcept override;
  uint32_t outstanding() const noexcept override;
  uint32_t maxSendWr() const noexcept override { return q_->max_send_wr; }

  Status modifyToInit() override;
  Status modifyToRtr(const QpRemote& remote) override;
  Status modifyToRts() override;
  Status modifyToError() override;

 private:
  int postChain(const SendWr* wr, const SendWr** bad_wr) noexcept;
  void afterPublish(bool failed) noexcept;
  Status transition(QpState from, QpState to);

  std::shared_ptr<QpCore> q_;
};

// ---- a device ---------------------------------------------------------------------------

struct DeviceState {
  DeviceInfo info;
  PortIdentity identity;
  std::string listen_text;  // "127.0.0.1:41234", for messages and linkModel()
  uint64_t retry_budget_ns = 0;
  uint32_t retry_budget_ms = 0;
  bool caller_progress = false;  // fabric.tcp.caller_progress: QPs join their CQ's progress list
  MrTable mrs;
  std::shared_ptr<QpWords> qp_words = std::make_shared<QpWords>();
  std::shared_ptr<QpWords> recv_words = std::make_shared<QpWords>();

  std::mutex ctrl_mutex;  // QP slots, CQ admission
  std::vector<uint16_t> qp_generation;
  // First in, first out: a slot comes back only after every other free one, so a
  // destroyed QP's unpolled completion cannot meet a live QP of the same generation.
  std::deque<uint32_t> free_qps;

  // GPU memory (tcp_staging.h): the pool is made by the first registration of device
  // memory (under staging_mutex) and published before that region's key, so a datapath
  // that holds a pin on a GPU region finds it.
  uint32_t staging_buffers = 0;
  uint64_t staging_buffer_bytes = 0;
  std::mutex staging_mutex;
  std::unique_ptr<StagingPool> staging_owner;
  std::atomic<StagingPool*> staging{nullptr};

  std::unique_ptr<ServiceLoop> loop;

  // Written by the service thread only.
  std::atomic<uint64_t> bytes{0};  // payload moved (sent and received)
  std::atomic<uint64_t> wrs{0};    // WRs completed, any status
  // Peers' WRITEs placed in our regions and READs served from them (the target side).
  std::atomic<uint64_t> target_write_bytes{0};
  std::atomic<uint64_t> target_writes{0};
  std::atomic<uint64_t> target_read_bytes{0};
  std::atomic<uint64_t> target_reads{0};
  std::atomic<uint64_t> contract_violations{0};

  explicit DeviceState(uint32_t max_mrs) : mrs(max_mrs) {}
  ~DeviceState();
};

// ---- the service thread ------------------------------------------------------------------

// Where one recvmsg puts a payload (tcp_rx_datapath.cc): host memory straight, device
// memory into the service thread's staging buffer, copied to the GPU after the call.
struct RxPlan {
  static constexpr int kMaxIov = static_cast<int>(kMaxSge) + 1;
  // No initialisers: the plan lives on the stack of every payload receive, and only
  // entries below nstaged are read.
  struct Staging {
    int gpu;
    uint64_t addr;    // the device memory
    uint64_t offset;  // its first byte's place among this call's payload bytes
    uint64_t at;      // and in the staging buffer
    uint64_t length;
  };
  iovec iov[kMaxIov + 1];
  int n = 0;
  uint64_t covered = 0;  // payload bytes the iovecs take
  Staging staging[kMaxIov];
  int nstaged = 0;
  uint64_t staged = 0;  // bytes of the staging buffer planned
  bool full = false;    // the staging buffer ran out: no more targets this call

  bool open() const noexcept { return !full && n < kMaxIov; }
  void target(DeviceState& dev, int gpu, uint64_t addr, uint64_t length) noexcept;
  // Copies the staged part of the first `placed` payload bytes to the GPUs.
  bool unstage(DeviceState& dev, uint64_t placed) noexcept;
};

// epoll tags (data.ptr) of the two descriptors that are not connections.
inline char kEventTag = 0;
inline char kListenTag = 0;

class ServiceLoop {
 public:
  explicit ServiceLoop(DeviceState& dev) : dev_(dev) {}
  ~ServiceLoop();
  ServiceLoop(const ServiceLoop&) = delete;
  ServiceLoop& operator=(const ServiceLoop&) = delete;

  // Takes the listening socket and starts the thread.
  Status start(int listen_fd);
  // Closes every connection (their QPs' outstanding WRs are flushed) and joins.
  void stop();

  // Control path.
  void attach(std::shared_ptr<QpCore> qp);  // the QP can be named by a peer's HELLO
  void rtr(std::shared_ptr<QpCore> qp);     // connect, or adopt the peer's connection
  void error(std::shared_ptr<QpCore> qp);   // the QP went to ERR: flush, close
  void detach(std::shared_ptr<QpCore> qp);  // returns once the loop let go of the QP

  // Datapath: the loop looks at every QP soon (errors found at post time, a post to a
  // lost connection, the first post after the loop went to sleep, a poller's hand-off).
  void wake() noexcept;
  // A poller's turn on the receive side of `q` (caller-side progress): nothing when the
  // service thread or another poller owns it. true when it took the turn.
  bool callerTurn(QpCore& q) noexcept;
  bool sleeping() const noexcept { return sleeping_.load(std::memory_order_seq_cst); }

 private:
  enum class CmdKind : uint8_t { kAttach, kRtr, kError, kDetach };
  struct Cmd {
    CmdKind kind;
    std::shared_ptr<QpCore> qp;
    uint64_t ticket = 0;
  };

  void run();
  uint64_t submit(CmdKind kind, std::shared_ptr<QpCore> qp);
  void runCommands();
  void handle(const Cmd& cmd);
  void handleEvent(Conn* conn, uint32_t events);
  void serviceReady();
  void checkTimers(uint64_t now);
  bool anyWatched(uint64_t now);
  void scanQps();
  int waitTimeoutMs();
  void shutdownAll();
  void freeClosed();

  // Connections (tcp_service.cc, tcp_connect.cc).
  void acceptAll();
  void startConnect(const std::shared_ptr<QpCore>& qp);
  void onConnected(Conn* conn);
  void readHello(Conn* conn);
  void onHello(Conn* conn);
  void onHelloReply(Conn* conn);
  bool adopt(Conn* conn, const std::shared_ptr<QpCore>& qp, const Hello& hello);
  void reject(Conn* conn, RejectReason reason);
  void claimPending(const std::shared_ptr<QpCore>& qp);
  void openStream(Conn* conn, uint32_t peer_max_send_wr);
  Conn* newConn(int fd, Conn::Stage stage);
  void closeConn(Conn* conn);
  void failConn(Conn* conn, const char* why);

  // Per QP (tcp_service.cc).
  void processQp(QpCore& qp);
  void breakIdleQp(QpCore& qp);  // a lost connection, nothing outstanding: ERR
  void stopStream(QpCore& qp);

  // The stream (tcp_rx_datapath.cc): reads what the socket has, up to a turn's budget.
  enum class RxResult : uint8_t {
    kContinue,  // (internal) keep reading
    kAgain,     // the socket has nothing more for now
    kMore,      // the turn's budget ran out with bytes left: come back
    kClosed,    // end of stream or a socket error
    kBroken,    // the peer broke the protocol
    kQpError,   // an error completion moved the QP to ERR: close the stream
    kTxFault,   // the send stream needs the service thread (tx_stop / tx_abort)
    kHandOff,   // (a poller's turn) bytes the service thread reads: a refused payload
                // (its scratch buffer) or device memory (its staging buffer)
  };
  // The service thread's hold on a QP's receive side; re-entrant (only the service
  // thread writes kRxService, so finding it means this thread holds it).
  class RxOwner {
   public:
    explicit RxOwner(QpCore& q) noexcept;
    ~RxOwner();
    RxOwner(const RxOwner&) = delete;
    RxOwner& operator=(const RxOwner&) = delete;

   private:
    QpCore& q_;
    bool took_ = false;
  };
  void onRxResult(Conn* c, RxResult r);
  void takeHandOff(QpCore& q);
  static constexpr size_t kDiscardBytes = 65536;
  RxResult readStream(Conn& conn, bool caller) noexcept;
  RxResult onHeader(Conn& conn) noexcept;
  RxResult readPayload(Conn& conn, bool caller) noexcept;
  RxResult discardPayload(Conn& conn) noexcept;
  RxResult serveRead(Conn& conn) noexcept;
  RxResult finishWrite(Conn& conn) noexcept;
  RxResult finishRead(Conn& conn) noexcept;
  bool queueResponse(QpCore& qp, Opcode op, uint64_t seq, WcStatus status, uint32_t length,
                     uint64_t addr, uint32_t key) noexcept;
  // Completes WRs in order from qp.done; true when an error completion closed the QP.
  RxResult startSend(Conn& c) noexcept;
  void finishReceive(Conn& c) noexcept;
  void flushReceives(QpCore& qp) noexcept;
  bool completeInOrder(QpCore& qp) noexcept;
  void pushCqe(QpCore& qp, uint64_t seq, const WrSlot& w) noexcept;

  DeviceState& dev_;
  int epfd_ = -1;
  int evfd_ = -1;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> sleeping_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Cmd> cmds_;
  uint64_t next_ticket_ = 1;
  uint64_t done_ticket_ = 0;
  bool running_ = false;
  bool stopping_ = false;

  // Service thread only.
  std::unordered_map<uint32_t, std::shared_ptr<QpCore>> qps_;  // by qp_num
  std::unordered_map<Conn*, std::unique_ptr<Conn>> conns_;
  uint32_t unclaimed_ = 0;  // connections in kAwaitHello / kPending
  Conn* ready_ = nullptr;
  std::vector<Conn*> closed_;  // closed during this turn, freed after it
  // Receives refused payload bytes with MSG_TRUNC (the kernel drops them; this only
  // bounds a call). Never holds a payload that is delivered.
  std::unique_ptr<uint8_t[]> discard_;
  bool watched_ = false;        // at the last tick, something had a deadline
  bool listen_paused_ = false;  // accept ran out of descriptors: resumed at the next tick
  uint64_t next_tick_ = 0;      // CLOCK_MONOTONIC ns
  uint64_t tick_ns_ = 0;
};

// ---- addresses (tcp_socket.cc) ------------------------------------------------------------

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// "10.0.0.5:7000" / "[fd00::5]:0" -> address (numeric only).
Result<SockAddr> parseListen(const std::string& text);
Result<SockAddr> parseHost(const std::string& host, uint16_t port);
std::string toText(const SockAddr& a);
uint16_t portOf(const SockAddr& a) noexcept;
// PortIdentity: gid = the IPv6 (or IPv4-mapped) address, lid = the TCP port.
PortIdentity identityOf(const SockAddr& a) noexcept;
Result<SockAddr> addressOf(const PortIdentity& id);
// Per-connection options: TCP_NODELAY, TCP_USER_TIMEOUT and keepalive from the budget,
// non-blocking, close-on-exec.
Status tuneSocket(int fd, uint32_t retry_budget_ms);
// Wire priority: IP_TOS / IPV6_TCLASS on the connection (0: untouched).
Status applyTrafficClass(int fd, int family, uint8_t traffic_class);
// Who connects: the side whose (identity, qp_num) is lower. Both sides compute it alike.
bool weConnect(const PortIdentity& local, uint32_t local_qp, const QpRemote& remote) noexcept;

// ---- the send stream (tcp_tx_datapath.cc) -----------------------------------------------

// Takes the QP's send stream if nobody holds it and sends what is queued; whoever holds
// it when more is queued sends that too. Returns what the last drain found.
TxResult kickTx(QpCore& qp) noexcept;

}  // namespace tent::fabric::tcp
