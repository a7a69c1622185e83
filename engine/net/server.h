// The control listener and the server end of control connections.
//
// Listener: accepts every pending connection per readiness event. A full table
// (`max_connections` open server connections, or `max_connections_per_source` from
// the new connection's address) makes room by closing, oldest first, a connection
// that has not finished its handshake, else a session that holds no endpoint (idle:
// nothing of the peer's would break); at the per-source cap only connections of that
// same source are candidates, so one address cannot push out anyone else's. Sessions
// holding endpoints are never closed for room: when nothing can go, the new
// connection is closed at once. Counted, and logged at most once per 5 s.
// When the process runs out of descriptors accept stops for a while instead of
// spinning (EMFILE/ENFILE back off from 10 ms to 1 s).
//
// ServerSession: the first frame decides what a connection is. HELLO opens a
// session (challenge-response first when a secret is set); GET_DESCRIPTOR or
// BOOTSTRAP is a one-shot v1 request, answered and closed - refused when a secret is
// set. Nothing is served before authentication; an unauthenticated connection must
// finish its handshake within `handshake_timeout`.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "net/admission.h"
#include "net/auth.h"
#include "net/connection.h"
#include "net/control_stats.h"
#include "net/event_loop.h"
#include "wire/bootstrap.h"
#include "wire/control_frames.h"

namespace tent::control {

class ServerSession;

// What the server asks of the engine (the control plane implements it, on the loop).
class ServerHandler {
 public:
  virtual ~ServerHandler() = default;
  virtual std::vector<uint8_t> descriptorFor(uint16_t max_version) = 0;
  // `session` is nullptr for a one-shot request.
  virtual Result<metadata::BootstrapMessage> acceptBootstrap(
      ServerSession* session, const metadata::BootstrapMessage& request) = 0;
  virtual void release(ServerSession& session, const metadata::ReleaseMessage& message) = 0;
  virtual void sessionClosed(ServerSession& session) = 0;
  // Whether the session holds endpoints of the peer (it is not idle): such a session
  // is never closed to make room.
  virtual bool holdsEndpoints(const ServerSession& session) = 0;
};

struct ServerOptions {
  Secret secret;
  uint32_t max_connections = 1024;
  uint32_t max_connections_per_source = 256;  // from one peer address
  uint64_t handshake_timeout_ns = 2'000'000'000;
  uint64_t io_timeout_ns = 3'000'000'000;
  uint64_t idle_timeout_ns = 30'000'000'000;  // no frame at all (keepalives included)
};

class ServerSession final : public Connection::Owner {
 public:
  enum class State : uint8_t { kNew, kChallenged, kOpen, kClosing };
  ServerSession(class ControlServer& server, int fd, PeerSource source);
  Status start() { return conn_.start(); }
  State state() const noexcept { return state_; }
  uint16_t descriptorVersion() const noexcept { return descriptor_version_; }
  bool wantsDescriptorUpdates() const noexcept { return descriptor_version_ != 0; }
  void pushDescriptor(std::vector<uint8_t> bytes);
  // Closes it to make room for a newer connection.
  void evict();
  uint64_t id() const noexcept { return id_; }
  const PeerSource& source() const noexcept { return source_; }
  // Authenticated (or a one-shot request accepted): it has been served.
  bool authenticated() const noexcept { return opened_; }
  // The server end of the engine's own loopback session (known from its HELLO).
  bool loopback() const noexcept { return loopback_; }

  void onFrame(Connection& c, metadata::FrameType type, std::vector<uint8_t> payload) override;
  void onClosed(Connection& c, const Status& why) override;

 private:
  void onFirstFrame(metadata::FrameType type, std::vector<uint8_t>& payload);
  void onHello(const std::vector<uint8_t>& payload);
  void onAuth(const std::vector<uint8_t>& payload);
  void onRequest(metadata::FrameType type, const std::vector<uint8_t>& payload);
  void open();
  void refuse(const Status& why, bool auth_failure);
  void reply(metadata::FrameType type, std::vector<uint8_t> payload);
  void touch();

  ControlServer& server_;
  Connection conn_;
  State state_ = State::kNew;
  bool one_shot_ = false;
  bool opened_ = false;  // reached kOpen (it stays true while closing)
  bool loopback_ = false;
  uint64_t id_;
  PeerSource source_;
  uint16_t descriptor_version_ = 0;  // 0: never asked for one
  metadata::Nonce client_nonce_{}, server_nonce_{};
};

class ControlServer final : public EventLoop::Handler {
 public:
  // Binds `host:port` (port 0: any free port). Runs on `loop`'s thread from start() on.
  static Result<std::unique_ptr<ControlServer>> create(EventLoop& loop, const std::string& host,
                                                       uint16_t port, ServerOptions options,
                                                       ServerHandler& handler,
                                                       ControlCounters& stats);
  ~ControlServer() override;
  Status start();  // loop thread
  uint16_t port() const noexcept { return port_; }
  // Every open session that asked for descriptors gets `encode(version)`.
  template <typename Encode>
  void pushDescriptor(Encode encode) {
    for (auto& s : sessions_)
      if (s->state() == ServerSession::State::kOpen && s->wantsDescriptorUpdates())
        s->pushDescriptor(encode(s->descriptorVersion()));
  }
  size_t sessionCount() const noexcept { return sessions_.size(); }
  void closeAll();

 private:
  friend class ServerSession;
  ControlServer(EventLoop& loop, ServerOptions options, ServerHandler& handler,
                ControlCounters& stats)
      : loop_(loop), options_(std::move(options)), handler_(handler), stats_(stats) {}
  void onEvents(uint32_t events) override;
  void acceptBackoff();
  // Room for one more connection from `source`; false when nothing may go.
  bool admit(const PeerSource& source);
  // Oldest first: a connection still in its handshake, else an idle session; of
  // `source` only when given. Null when every candidate holds endpoints.
  ServerSession* evictionCandidate(const std::string* source);
  bool evictFor(const std::string* source);
  void reportRoom();
  void forget(ServerSession* session);

  EventLoop& loop_;
  ServerOptions options_;
  ServerHandler& handler_;
  ControlCounters& stats_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  bool accepting_ = true;
  uint64_t backoff_ns_ = 0;
  uint64_t last_warning_ns_ = 0;
  uint64_t next_session_id_ = 1;
  std::list<std::unique_ptr<ServerSession>> sessions_;  // oldest first
  SourceCounts per_source_;
  RoomReport room_;
};

}  // namespace tent::control
