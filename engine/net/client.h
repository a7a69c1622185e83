// The client end of a control session: one per open peer segment, kept for as long
// as the segment is open. It connects without blocking, authenticates both ways
// (when a secret is configured), fetches the descriptor, then carries bootstraps and
// RELEASE notices, answers in order; sends a keepalive when idle; and hands pushed
// descriptor updates to its listener. Losing it (peer died, restarted, or answered
// nothing for peer_timeout) is reported once; the control plane reconnects with
// backoff. Once up, a peer that misses io_timeout but not peer_timeout is slow, not
// lost: reported as such, and as recovered when it answers again.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/address.h"
#include "net/auth.h"
#include "net/connection.h"
#include "net/control_stats.h"
#include "net/event_loop.h"
#include "wire/control_frames.h"

namespace tent::control {

struct ClientOptions {
  uint64_t connect_timeout_ns = 3'000'000'000;  // connect + handshake + first descriptor
  uint64_t io_timeout_ns = 3'000'000'000;       // each request's answer: later, it is slow
  uint64_t keepalive_ns = 1'000'000'000;
  // Once up, no answer for this long fails the session; 0: io_timeout_ns (no slack).
  uint64_t peer_timeout_ns = 0;
  // false: the descriptor is known already (a metadata blob, an etcd entry): the
  // session is up once authenticated, and onSessionUp gets no bytes.
  bool fetch_descriptor = true;
  // The engine's own loopback session (to its own listener): counted apart from
  // peers' connections, and its server end knows it by its HELLO nonce.
  bool loopback = false;
};

class ClientSession final : public Connection::Owner {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void onSessionUp(ClientSession& s, std::vector<uint8_t> descriptor) = 0;
    virtual void onDescriptorUpdate(ClientSession& s, std::vector<uint8_t> descriptor) = 0;
    // Once; the session may be destroyed afterwards (deferred).
    virtual void onSessionDown(ClientSession& s, const Status& why) = 0;
    // An up session's oldest request missed io_timeout (slow = true), or the peer
    // answered again (false). The session stays up either way.
    virtual void onSessionSlow(ClientSession& s, bool slow) {
      (void)s;
      (void)slow;
    }
  };
  struct Reply {
    metadata::FrameType type = metadata::FrameType::kError;
    std::vector<uint8_t> payload;
  };
  using ReplyFn = std::function<void(Result<Reply>)>;

  ClientSession(EventLoop& loop, std::string name, SocketAddress address, const Secret& secret,
                ClientOptions options, ControlCounters& stats, Listener& listener);
  ~ClientSession() override;
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  void start();
  bool up() const noexcept { return state_ == State::kOpen; }
  bool slow() const noexcept { return slow_; }
  const std::string& name() const noexcept { return name_; }
  // Queued until the session is open; every callback runs exactly once (with an
  // error when the session goes down first).
  void request(metadata::FrameType type, std::vector<uint8_t> payload, ReplyFn done);
  void notify(metadata::FrameType type, std::vector<uint8_t> payload);
  void close(const Status& why);

  void onConnected(Connection& c) override;
  void onFrame(Connection& c, metadata::FrameType type, std::vector<uint8_t> payload) override;
  void onClosed(Connection& c, const Status& why) override;

 private:
  enum class State : uint8_t { kConnecting, kHello, kAuth, kOpen, kDown };
  void countClosed() noexcept;  // the connection's end, in the open counts
  struct Pending {
    metadata::FrameType type;
    std::vector<uint8_t> payload;
    ReplyFn done;
  };
  void onChallenge(const std::vector<uint8_t>& payload);
  void onOpen();
  void sendNext();
  void answerHead(Result<Reply> reply);
  // The oldest request in flight was sent now: its answer deadline (and, once up,
  // the slow mark at io_timeout). No request in flight: none.
  void armAnswerDeadline();
  void setSlow(bool slow);
  void armKeepalive();
  void fail(const Status& why);

  EventLoop& loop_;
  std::string name_;
  SocketAddress address_;
  const Secret& secret_;
  ClientOptions options_;
  ControlCounters& stats_;
  Listener& listener_;
  std::unique_ptr<Connection> conn_;
  State state_ = State::kConnecting;
  bool reported_down_ = false;
  metadata::Nonce client_nonce_{};
  std::deque<Pending> queued_;     // not sent yet
  std::deque<Pending> in_flight_;  // sent, answered in this order
  uint64_t keepalive_timer_ = 0;
  uint64_t slow_timer_ = 0;
  bool reported_up_ = false;
  bool slow_ = false;
  uint64_t last_activity_ns_ = 0;
};

}  // namespace tent::control
