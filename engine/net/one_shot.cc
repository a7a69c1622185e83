#include "net/one_shot.h"

namespace tent::control {

void OneShotRequest::start(EventLoop& loop, const SocketAddress& to, metadata::FrameType type,
                           std::vector<uint8_t> payload, uint64_t timeout_ns,
                           ControlCounters& stats, Done done) {
  auto* r = new OneShotRequest(loop, stats, std::move(done));
  bool in_progress = false;
  auto fd = startConnect(to, &in_progress);
  if (!fd.ok()) {
    loop.post([r, s = fd.status()] { r->finish(s); });
    return;
  }
  r->conn_ = std::make_unique<Connection>(loop, *fd, *r, timeout_ns, in_progress);
  r->conn_->countTraffic(stats);
  ControlCounters::bump(stats.connections_open);
  r->conn_->setDeadline(clock::monotonicNs() + timeout_ns, "no answer within the probe's budget");
  r->conn_->setMaxPayload(metadata::kMaxControlPayload);
  Status s = r->conn_->start();
  if (!s.ok()) return r->conn_->close(s);
  r->conn_->send(type, std::move(payload));  // queued until the connect completes
}

void OneShotRequest::onFrame(Connection& c, metadata::FrameType type, std::vector<uint8_t> p) {
  finish(std::make_pair(type, std::move(p)));
  c.close(Status::OK());
}

void OneShotRequest::onClosed(Connection&, const Status& why) {
  ControlCounters::bump(stats_.connections_open, -1);
  finish(why.ok() ? Status::Unavailable("connection closed without an answer") : why);
}

void OneShotRequest::finish(Result<std::pair<metadata::FrameType, std::vector<uint8_t>>> r) {
  if (!done_) return;
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(r));
  // Deleted after this event: the connection may still be on the stack.
  loop_.post([this] { delete this; });
}

}  // namespace tent::control
