#include "net/server.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "net/address.h"
#include "wire/bootstrap.h"
#include "tent/log.h"
#include "wire/bootstrap.h"

namespace tent::control {

using metadata::FrameType;

// ---- session ------------------------------------------------------------------------

ServerSession::ServerSession(ControlServer& server, int fd, PeerSource source)
    : server_(server),
      conn_(server.loop_, fd, *this, server.options_.io_timeout_ns, false),
      id_(server.next_session_id_++),
      source_(std::move(source)) {
  conn_.setDeadline(clock::monotonicNs() + server.options_.handshake_timeout_ns,
                    "no complete handshake within bootstrap.handshake_timeout_ms");
  conn_.countTraffic(server.stats_);
}

void ServerSession::touch() {
  conn_.setDeadline(clock::monotonicNs() + server_.options_.idle_timeout_ns,
                    "session idle (no keepalive) for too long");
}

void ServerSession::reply(FrameType type, std::vector<uint8_t> payload) {
  conn_.send(type, std::move(payload));
  if (one_shot_) conn_.closeAfterFlush();
}

void ServerSession::refuse(const Status& why, bool auth_failure) {
  ControlCounters::bump(auth_failure ? server_.stats_.auth_failures
                                     : server_.stats_.frames_rejected);
  TENT_DEBUG(kEngine, "control: refusing connection %lu: %s", static_cast<unsigned long>(id_),
             why.toString().c_str());
  state_ = State::kClosing;
  conn_.send(FrameType::kError, metadata::encodeError(why));
  conn_.closeAfterFlush();
}

void ServerSession::onFrame(Connection&, FrameType type, std::vector<uint8_t> payload) {
  switch (state_) {
    case State::kNew:
      return onFirstFrame(type, payload);
    case State::kChallenged:
      if (type != FrameType::kAuth)
        return refuse(Status::PermissionDenied("expected AUTH after CHALLENGE"), true);
      return onAuth(payload);
    case State::kOpen:
      touch();
      return onRequest(type, payload);
    case State::kClosing:
      return;
  }
}

void ServerSession::onFirstFrame(FrameType type, std::vector<uint8_t>& payload) {
  if (type == FrameType::kHello) return onHello(payload);
  if (type != FrameType::kGetDescriptor && type != FrameType::kBootstrap)
    return refuse(Status::InvalidArgument(std::string("unexpected first frame ") +
                                          metadata::frameTypeName(type)),
                  false);
  if (!server_.options_.secret.empty())
    return refuse(
        Status::PermissionDenied("authentication required: this engine has a cluster secret "
                                 "(bootstrap.auth.secret_file); one-shot requests are refused"),
        true);
  one_shot_ = true;
  opened_ = true;
  state_ = State::kOpen;
  conn_.setDeadline(0, "");
  onRequest(type, payload);
}

void ServerSession::onHello(const std::vector<uint8_t>& payload) {
  auto hello = metadata::parseHello(payload);
  if (!hello.ok()) return refuse(hello.status(), false);
  if (hello->version < metadata::kSessionProtocolVersion)
    return refuse(Status::NotSupported("session protocol version " +
                                       std::to_string(hello->version) + " is not supported"),
                  false);
  client_nonce_ = hello->client_nonce;
  const auto& own = server_.stats_.loopback_nonce;
  if (!loopback_ && own && *own == client_nonce_) {
    loopback_ = true;  // our own client's HELLO: the loopback session, not a peer
    ControlCounters::bump(server_.stats_.loopback_connections_open);
  }
  server_nonce_ = randomNonce();
  metadata::Challenge c;
  c.auth_required = !server_.options_.secret.empty();
  c.server_nonce = server_nonce_;
  if (c.auth_required)
    c.server_proof = server_.options_.secret.serverProof(client_nonce_, server_nonce_);
  conn_.send(FrameType::kChallenge, metadata::encodeChallenge(c));
  state_ = State::kChallenged;
}

void ServerSession::onAuth(const std::vector<uint8_t>& payload) {
  auto auth = metadata::parseAuth(payload);
  if (!auth.ok()) return refuse(auth.status(), true);
  const Secret& secret = server_.options_.secret;
  if (!secret.empty()) {
    if (!auth->has_proof)
      return refuse(Status::PermissionDenied("authentication required: this engine has a cluster "
                                             "secret and the peer presented none"),
                    true);
    if (!equalMacs(auth->client_proof, secret.clientProof(client_nonce_, server_nonce_)))
      return refuse(Status::PermissionDenied("authentication failed: the peer's proof does not "
                                             "match this engine's cluster secret"),
                    true);
  }
  // Every frame from AUTH_OK on is tagged with the session key (the client keys its
  // side right after sending AUTH).
  if (!secret.empty()) {
    std::vector<uint8_t> key = secret.sessionKey(client_nonce_, server_nonce_);
    conn_.setSigners(FrameSigner(key, kServerToClient), FrameSigner(key, kClientToServer));
  }
  conn_.send(FrameType::kAuthOk, {});
  open();
}

void ServerSession::open() {
  state_ = State::kOpen;
  opened_ = true;
  conn_.setMaxPayload(metadata::kMaxControlPayload);
  touch();
}

void ServerSession::onRequest(FrameType type, const std::vector<uint8_t>& payload) {
  ServerHandler& h = server_.handler_;
  switch (type) {
    case FrameType::kGetDescriptor: {
      auto version = metadata::parseDescriptorRequest(payload);
      if (!version.ok()) return refuse(version.status(), false);
      descriptor_version_ = *version;
      return reply(FrameType::kDescriptor, h.descriptorFor(*version));
    }
    case FrameType::kBootstrap: {
      auto req = metadata::parseBootstrap(payload);
      if (!req.ok()) {
        ControlCounters::bump(server_.stats_.frames_rejected);
        return reply(FrameType::kError, metadata::encodeError(req.status()));
      }
      auto answer = h.acceptBootstrap(one_shot_ ? nullptr : this, *req);
      if (!answer.ok()) return reply(FrameType::kError, metadata::encodeError(answer.status()));
      return reply(FrameType::kBootstrapReply, metadata::encodeBootstrap(*answer, answer->version));
    }
    case FrameType::kKeepalive:
      if (one_shot_) break;
      return conn_.send(FrameType::kKeepaliveReply, {});
    case FrameType::kRelease: {
      if (one_shot_) break;
      auto m = metadata::parseRelease(payload);
      if (!m.ok()) return refuse(m.status(), false);
      return h.release(*this, *m);
    }
    default:
      break;
  }
  refuse(Status::InvalidArgument(std::string("unexpected frame ") + metadata::frameTypeName(type)),
         false);
}

void ServerSession::evict() {
  conn_.close(Status::ResourceExhausted("evicted: the listener is at its connection cap"));
}

void ServerSession::pushDescriptor(std::vector<uint8_t> bytes) {
  conn_.send(FrameType::kDescriptorUpdate, std::move(bytes));
}

void ServerSession::onClosed(Connection&, const Status& why) {
  if (why.code() == StatusCode::kTimeout) ControlCounters::bump(server_.stats_.deadline_closures);
  if (why.code() == StatusCode::kInvalidArgument)
    ControlCounters::bump(server_.stats_.frames_rejected);
  if (why.code() == StatusCode::kPermissionDenied)
    ControlCounters::bump(server_.stats_.auth_failures);
  // A session refused or evicted after it opened is closing by now, and may have
  // bootstrapped endpoints all the same: the handler frees them.
  const bool was_session = opened_ && !one_shot_;
  state_ = State::kClosing;
  if (was_session) server_.handler_.sessionClosed(*this);
  server_.forget(this);
}

// ---- listener -----------------------------------------------------------------------

namespace {

// Out of descriptors, accept stops until some close: the table cap never comes into
// play, and idle sessions are not evicted for a newcomer. Said once per process.
void warnIfDescriptorsRunOutFirst(uint32_t max_connections) {
  constexpr rlim_t kOtherDescriptors = 256;  // devices, shm, eventfds, the application's
  static std::atomic<bool> warned{false};
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY ||
      nofile.rlim_cur >= rlim_t{max_connections} + kOtherDescriptors || warned.exchange(true))
    return;
  TENT_WARN(kEngine,
            "control: bootstrap.max_connections %u is more than the descriptor limit leaves "
            "(RLIMIT_NOFILE %lu, about %lu used otherwise): when descriptors run out the "
            "listener stops accepting instead of making room; raise the limit (ulimit -n) or "
            "lower bootstrap.max_connections",
            max_connections, static_cast<unsigned long>(nofile.rlim_cur),
            static_cast<unsigned long>(kOtherDescriptors));
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::create(EventLoop& loop,
                                                             const std::string& host, uint16_t port,
                                                             ServerOptions options,
                                                             ServerHandler& handler,
                                                             ControlCounters& stats) {
  std::unique_ptr<ControlServer> s(new ControlServer(loop, std::move(options), handler, stats));
  TENT_ASSIGN_OR_RETURN(s->listen_fd_, listenOn(host, port, 1024, &s->port_));
  warnIfDescriptorsRunOutFirst(s->options_.max_connections);
  return s;
}

ControlServer::~ControlServer() {
  closeAll();
  if (listen_fd_ >= 0) {
    if (accepting_) loop_.remove(listen_fd_);
    ::close(listen_fd_);
  }
}

Status ControlServer::start() {
  return loop_.add(listen_fd_, EPOLLIN, this);
}

void ControlServer::closeAll() {
  auto sessions = std::move(sessions_);
  sessions_.clear();
  per_source_ = SourceCounts{};
  const auto loopback =
      std::count_if(sessions.begin(), sessions.end(), [](const auto& s) { return s->loopback(); });
  stats_.loopback_connections_open.fetch_sub(static_cast<uint64_t>(loopback),
                                             std::memory_order_relaxed);
  stats_.connections_open.fetch_sub(sessions.size(), std::memory_order_relaxed);
  // Destroying a session closes its socket without callbacks (the handler is
  // shutting down too).
}

void ControlServer::forget(ServerSession* session) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(),
                         [&](const auto& p) { return p.get() == session; });
  if (it == sessions_.end()) return;
  std::shared_ptr<ServerSession> dying(std::move(*it));  // destroyed after this event
  sessions_.erase(it);
  per_source_.remove(dying->source().key);
  if (dying->loopback()) stats_.loopback_connections_open.fetch_sub(1, std::memory_order_relaxed);
  stats_.connections_open.fetch_sub(1, std::memory_order_relaxed);
  loop_.post([dying] {});
}

ServerSession* ControlServer::evictionCandidate(const std::string* source) {
  ServerSession* idle = nullptr;
  for (auto& s : sessions_) {
    if (source != nullptr && s->source().key != *source) continue;
    // Still in its handshake, or already closing: the first to go.
    if (!s->authenticated() || s->state() == ServerSession::State::kClosing) return s.get();
    if (idle == nullptr && !handler_.holdsEndpoints(*s)) idle = s.get();
  }
  return idle;
}

bool ControlServer::evictFor(const std::string* source) {
  ServerSession* victim = evictionCandidate(source);
  if (victim == nullptr) return false;
  if (victim->authenticated()) {
    ControlCounters::bump(stats_.sessions_evicted);
    ++room_.idle_evicted;
  } else {
    ControlCounters::bump(stats_.connections_refused);
    ++room_.unauthenticated_evicted;
  }
  victim->evict();  // forgets it: the table shrinks now
  return true;
}

bool ControlServer::admit(const PeerSource& source) {
  bool ok = true;
  if (per_source_.count(source.key) >= options_.max_connections_per_source) {
    ControlCounters::bump(stats_.source_cap_hits);
    ++room_.source_cap_hits;
    room_.last_source = source.text;
    ok = evictFor(&source.key);
  }
  if (ok && sessions_.size() >= options_.max_connections) {
    room_.last_source = source.text;
    ok = evictFor(nullptr);
  }
  if (!ok) {
    ControlCounters::bump(stats_.connections_refused);
    ++room_.refused;
  }
  reportRoom();
  return ok;
}

void ControlServer::reportRoom() {
  constexpr uint64_t kReportPeriodNs = 5'000'000'000;  // one line per 5 s, not per connection
  const std::string line =
      room_.takeLine(clock::monotonicNs(), kReportPeriodNs, options_.max_connections,
                     options_.max_connections_per_source);
  if (!line.empty()) TENT_WARN(kEngine, "%s", line.c_str());
}

void ControlServer::acceptBackoff() {
  loop_.remove(listen_fd_);
  accepting_ = false;
  backoff_ns_ = backoff_ns_ == 0 ? 10'000'000 : std::min<uint64_t>(backoff_ns_ * 2, 1'000'000'000);
  const uint64_t now = clock::monotonicNs();
  if (now - last_warning_ns_ > 5'000'000'000ull) {  // one line per 5 s, not per attempt
    last_warning_ns_ = now;
    TENT_WARN(kEngine, "control: out of file descriptors; accepting again in %lu ms",
              static_cast<unsigned long>(backoff_ns_ / 1'000'000));
  }
  loop_.addTimer(clock::monotonicNs() + backoff_ns_,
                 [this] { accepting_ = loop_.add(listen_fd_, EPOLLIN, this).ok(); });
}

void ControlServer::onEvents(uint32_t) {
  for (;;) {
    sockaddr_storage from{};
    socklen_t from_length = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        return acceptBackoff();
      return;  // EAGAIN, or a connection that died before we took it
    }
    backoff_ns_ = 0;
    PeerSource source = sourceOf(from, from_length);
    if (!admit(source)) {
      ::close(fd);
      continue;
    }
    tuneSocket(fd);
    auto session = std::make_unique<ServerSession>(*this, fd, std::move(source));
    if (!session->start().ok()) continue;
    per_source_.add(session->source().key);
    sessions_.push_back(std::move(session));
    ControlCounters::bump(stats_.connections_open);
  }
}

}  // namespace tent::control
