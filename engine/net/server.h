// The control listener and the server end of control connections.
//
// Listener: accepts every pending connection per readiness event; at
// `max_connections` open server connections the oldest one that has not finished
// its handshake is closed to make room, and when all have, the new one is closed at
// once (both counted as refused);
// when the process runs out of descriptors accept stops for a while instead of
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
};

struct ServerOptions {
  Secret secret;
  uint32_t max_connections = 1024;
  uint64_t handshake_timeout_ns = 2'000'000'000;
  uint64_t io_timeout_ns = 3'000'000'000;
  uint64_t idle_timeout_ns = 30'000'000'000;  // no frame at all (keepalives included)
};

class ServerSession final : public Connection::Owner {
 public:
  enum class State : uint8_t { kNew, kChallenged, kOpen, kClosing };
  ServerSession(class ControlServer& server, int fd);
  Status start() { return conn_.start(); }
  State state() const noexcept { return state_; }
  uint16_t descriptorVersion() const noexcept { return descriptor_version_; }
  bool wantsDescriptorUpdates() const noexcept { return descriptor_version_ != 0; }
  void pushDescriptor(std::vector<uint8_t> bytes);
  // Closes it to make room for a newer connection (it had not authenticated).
  void evict();
  uint64_t id() const noexcept { return id_; }

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
  uint64_t id_;
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
  bool evictOldestUnauthenticated();
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
  std::list<std::unique_ptr<ServerSession>> sessions_;
};

}  // namespace tent::control
