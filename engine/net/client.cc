#include "net/client.h"

#include <unistd.h>

#include "tent/log.h"
#include "wire/segment_descriptor.h"

namespace tent::control {

using metadata::FrameType;

ClientSession::ClientSession(EventLoop& loop, std::string name, SocketAddress address,
                             const Secret& secret, ClientOptions options, ControlCounters& stats,
                             Listener& listener)
    : loop_(loop),
      name_(std::move(name)),
      address_(address),
      secret_(secret),
      options_(options),
      stats_(stats),
      listener_(listener) {}

ClientSession::~ClientSession() {
  if (keepalive_timer_ != 0) loop_.cancelTimer(keepalive_timer_);
  if (slow_timer_ != 0) loop_.cancelTimer(slow_timer_);
  reported_down_ = true;  // no callbacks from a session being destroyed
  if (conn_ && !conn_->closed()) {
    countClosed();
    conn_.reset();
  }
}

void ClientSession::start() {
  bool in_progress = false;
  auto fd = startConnect(address_, &in_progress);
  if (!fd.ok()) {
    loop_.post([this, s = fd.status()] { fail(s); });
    return;
  }
  conn_ = std::make_unique<Connection>(loop_, *fd, *this, options_.io_timeout_ns, in_progress);
  conn_->countTraffic(stats_);
  ControlCounters::bump(stats_.connections_open);
  if (options_.loopback) ControlCounters::bump(stats_.loopback_connections_open);
  conn_->setDeadline(clock::monotonicNs() + options_.connect_timeout_ns,
                     "no session within bootstrap.connect_timeout_ms");
  Status s = conn_->start();
  if (!s.ok()) return conn_->close(s);
  if (!in_progress) onConnected(*conn_);
}

void ClientSession::onConnected(Connection& c) {
  client_nonce_ = randomNonce();
  if (options_.loopback) stats_.loopback_nonce = client_nonce_;
  metadata::Hello hello;
  hello.client_nonce = client_nonce_;
  state_ = State::kHello;
  c.send(FrameType::kHello, metadata::encodeHello(hello));
}

void ClientSession::onFrame(Connection&, FrameType type, std::vector<uint8_t> payload) {
  last_activity_ns_ = clock::monotonicNs();
  if (slow_) setSlow(false);  // it speaks again
  if (type == FrameType::kError && state_ != State::kOpen) {
    Status peer = metadata::parseError(payload);
    return fail(Status(peer.code(), "peer " + name_ + ": " + peer.message()));
  }
  switch (state_) {
    case State::kHello:
      if (type != FrameType::kChallenge)
        return fail(Status::InvalidArgument("peer " + name_ + " answered HELLO with " +
                                            metadata::frameTypeName(type)));
      return onChallenge(payload);
    case State::kAuth:
      if (type != FrameType::kAuthOk)
        return fail(Status::InvalidArgument("peer " + name_ + ": expected AUTH_OK"));
      return onOpen();
    case State::kOpen:
      if (type == FrameType::kDescriptorUpdate)
        return listener_.onDescriptorUpdate(*this, std::move(payload));
      if (in_flight_.empty())
        return fail(Status::InvalidArgument("peer " + name_ + " sent an unsolicited " +
                                            metadata::frameTypeName(type)));
      if (type == FrameType::kError) return answerHead(metadata::parseError(payload));
      return answerHead(Reply{type, std::move(payload)});
    default:
      return;
  }
}

void ClientSession::onChallenge(const std::vector<uint8_t>& payload) {
  auto c = metadata::parseChallenge(payload);
  if (!c.ok()) return fail(c.status().withContext("peer " + name_));
  metadata::AuthMessage auth;
  if (!secret_.empty()) {
    if (!c->auth_required)
      return fail(
          Status::PermissionDenied("authentication failed: peer " + name_ +
                                   " does not authenticate, but this engine has a cluster secret"));
    if (!equalMacs(c->server_proof, secret_.serverProof(client_nonce_, c->server_nonce)))
      return fail(Status::PermissionDenied("authentication failed: peer " + name_ +
                                           " does not hold this engine's cluster secret"));
    auth.has_proof = true;
    auth.client_proof = secret_.clientProof(client_nonce_, c->server_nonce);
  } else if (c->auth_required) {
    return fail(Status::PermissionDenied("authentication required: peer " + name_ +
                                         " has a cluster secret; set bootstrap.auth.secret_file"));
  }
  conn_->send(FrameType::kAuth, metadata::encodeAuth(auth));
  if (!secret_.empty()) {
    std::vector<uint8_t> key = secret_.sessionKey(client_nonce_, c->server_nonce);
    conn_->setSigners(FrameSigner(key, kClientToServer), FrameSigner(key, kServerToClient));
  }
  state_ = State::kAuth;
}

void ClientSession::onOpen() {
  state_ = State::kOpen;
  conn_->setMaxPayload(metadata::kMaxControlPayload);
  conn_->setDeadline(0, "");
  if (!options_.fetch_descriptor) {
    reported_up_ = true;
    armKeepalive();
    listener_.onSessionUp(*this, {});
    sendNext();
    return;
  }
  // The first request of every session: the descriptor, and with it the session is up.
  ControlCounters::bump(stats_.descriptor_fetches);
  in_flight_.push_front(Pending{
      FrameType::kGetDescriptor, {}, [this](Result<Reply> r) {
        if (!r.ok()) return fail(r.status());
        if (r->type != FrameType::kDescriptor)
          return fail(Status::InvalidArgument("peer " + name_ + " answered GET_DESCRIPTOR with " +
                                              metadata::frameTypeName(r->type)));
        reported_up_ = true;
        listener_.onSessionUp(*this, std::move(r->payload));
        sendNext();
      }});
  conn_->send(FrameType::kGetDescriptor,
              metadata::encodeDescriptorRequest(metadata::kDescriptorVersion));
  armAnswerDeadline();
  armKeepalive();
}

void ClientSession::request(FrameType type, std::vector<uint8_t> payload, ReplyFn done) {
  if (state_ == State::kDown) {
    done(Status::Unavailable("control session to " + name_ + " is down"));
    return;
  }
  queued_.push_back(Pending{type, std::move(payload), std::move(done)});
  if (state_ == State::kOpen) sendNext();
}

void ClientSession::notify(FrameType type, std::vector<uint8_t> payload) {
  if (state_ == State::kOpen) conn_->send(type, std::move(payload));
}

void ClientSession::sendNext() {
  // Pipelined: everything queued goes out now, answers come back in order.
  while (state_ == State::kOpen && !queued_.empty()) {
    const bool first = in_flight_.empty();
    // In flight before it is sent: a send that fails at once fails the session, and
    // fail() answers what is in flight - a request held aside here went unanswered
    // (an endpoint's BOOTSTRAP: the endpoint and its QPs were never freed).
    in_flight_.push_back(std::move(queued_.front()));
    queued_.pop_front();
    conn_->send(in_flight_.back().type, in_flight_.back().payload);
    if (state_ != State::kOpen) return;
    in_flight_.back().payload.clear();
    if (first) armAnswerDeadline();
  }
}

void ClientSession::answerHead(Result<Reply> reply) {
  Pending p = std::move(in_flight_.front());
  in_flight_.pop_front();
  armAnswerDeadline();
  p.done(std::move(reply));
}

void ClientSession::armAnswerDeadline() {
  if (slow_timer_ != 0) loop_.cancelTimer(slow_timer_);
  slow_timer_ = 0;
  if (in_flight_.empty()) return conn_->setDeadline(0, "");
  const uint64_t now = clock::monotonicNs();
  // Until the session is up (the first descriptor) an open must not wait longer than
  // io_timeout; once up, a slow answer is tolerated up to peer_timeout.
  const uint64_t limit = reported_up_ && options_.peer_timeout_ns > options_.io_timeout_ns
                             ? options_.peer_timeout_ns
                             : options_.io_timeout_ns;
  conn_->setDeadline(now + limit, limit == options_.io_timeout_ns
                                      ? "peer did not answer in time"
                                      : "peer answered nothing within bootstrap.peer_timeout_ms");
  if (limit == options_.io_timeout_ns) return;
  slow_timer_ = loop_.addTimer(now + options_.io_timeout_ns, [this] {
    slow_timer_ = 0;
    if (state_ == State::kOpen && !in_flight_.empty()) setSlow(true);
  });
}

void ClientSession::setSlow(bool slow) {
  slow_ = slow;
  listener_.onSessionSlow(*this, slow);
}

void ClientSession::armKeepalive() {
  keepalive_timer_ = loop_.addTimer(clock::monotonicNs() + options_.keepalive_ns, [this] {
    keepalive_timer_ = 0;
    if (state_ != State::kOpen) return;
    if (in_flight_.empty() && queued_.empty())
      request(FrameType::kKeepalive, {}, [](Result<Reply>) {});
    armKeepalive();
  });
}

void ClientSession::close(const Status& why) {
  fail(why);
}

void ClientSession::fail(const Status& why) {
  if (state_ == State::kDown) return;
  state_ = State::kDown;
  if (keepalive_timer_ != 0) loop_.cancelTimer(keepalive_timer_);
  keepalive_timer_ = 0;
  if (slow_timer_ != 0) loop_.cancelTimer(slow_timer_);
  slow_timer_ = 0;
  if (conn_ && !conn_->closed()) conn_->close(why);  // -> onClosed, which reports
  auto pending = std::move(in_flight_);
  for (auto& p : queued_) pending.push_back(std::move(p));
  queued_.clear();
  for (auto& p : pending) p.done(why.ok() ? Status::Unavailable("session closed") : why);
  if (!reported_down_) {
    reported_down_ = true;
    listener_.onSessionDown(*this, why);
  }
}

void ClientSession::countClosed() noexcept {
  // The loopback count first: stats() never sees more loopback ends than connections.
  if (options_.loopback) ControlCounters::bump(stats_.loopback_connections_open, -1);
  ControlCounters::bump(stats_.connections_open, -1);
}

void ClientSession::onClosed(Connection&, const Status& why) {
  countClosed();
  if (why.code() == StatusCode::kTimeout) ControlCounters::bump(stats_.deadline_closures);
  fail(why.ok() ? Status::Unavailable("control session to " + name_ + " closed") : why);
}

}  // namespace tent::control
