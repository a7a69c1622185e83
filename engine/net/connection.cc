#include "net/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tent::control {

namespace {
constexpr int kFramesPerEvent = 64;  // then let other connections run
}

Connection::Connection(EventLoop& loop, int fd, Owner& owner, uint64_t io_timeout_ns,
                       bool connecting)
    : loop_(loop), fd_(fd), owner_(owner), io_timeout_ns_(io_timeout_ns), connecting_(connecting) {}

Connection::~Connection() {
  if (timer_ != 0) loop_.cancelTimer(timer_);
  if (fd_ >= 0) {
    loop_.remove(fd_);
    ::close(fd_);
  }
}

Status Connection::start() {
  if (connecting_) write_deadline_ = clock::monotonicNs() + io_timeout_ns_;  // connect timeout
  want_write_ = connecting_;  // registered for EPOLLOUT only until connect completes
  TENT_RETURN_IF_ERROR(loop_.add(fd_, connecting_ ? EPOLLOUT : EPOLLIN, this));
  rearm();
  return Status::OK();
}

void Connection::setSigners(FrameSigner send, FrameSigner receive) {
  send_signer_ = std::move(send);
  recv_signer_ = std::move(receive);
}

void Connection::setDeadline(uint64_t at_ns, std::string what) {
  owner_deadline_ = at_ns;
  owner_deadline_what_ = std::move(what);
  rearm();
}

void Connection::send(metadata::FrameType type, std::vector<uint8_t> payload) {
  if (closed()) return;
  if (send_signer_.active()) {
    const metadata::Mac tag = send_signer_.tag(type, payload);
    payload.insert(payload.end(), tag.begin(), tag.end());
  }
  std::vector<uint8_t> frame(metadata::kFrameHeaderBytes);
  metadata::encodeFrameHeader(type, static_cast<uint32_t>(payload.size()), frame.data());
  frame.insert(frame.end(), payload.begin(), payload.end());
  if (out_.empty()) write_deadline_ = clock::monotonicNs() + io_timeout_ns_;
  queued_bytes_ += frame.size();
  out_.push_back(std::move(frame));
  if (!connecting_) writeQueued();
  if (!closed()) {
    updateInterest();
    rearm();
  }
}

void Connection::closeAfterFlush() {
  close_after_flush_ = true;
  if (out_.empty()) close(Status::OK());
}

void Connection::close(const Status& why) {
  if (closed()) return;
  loop_.remove(fd_);
  ::close(fd_);
  fd_ = -1;
  if (timer_ != 0) loop_.cancelTimer(timer_);
  timer_ = 0;
  owner_.onClosed(*this, why);
}

void Connection::onEvents(uint32_t events) {
  if (connecting_) {
    finishConnect();
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readFrames();
  if (!closed() && (events & EPOLLOUT)) writeQueued();
  if (!closed()) {
    updateInterest();
    rearm();
  }
}

void Connection::finishConnect() {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return close(Status::Unavailable(std::string("connect: ") + strerror(err)));
  connecting_ = false;
  write_deadline_ = out_.empty() ? 0 : clock::monotonicNs() + io_timeout_ns_;
  owner_.onConnected(*this);
  if (closed()) return;
  writeQueued();
  if (!closed()) {
    updateInterest();
    rearm();
  }
}

void Connection::readFrames() {
  for (int frames = 0; frames < kFramesPerEvent && !closed();) {
    uint8_t* dst = in_payload_ ? payload_.data() + payload_have_ : header_ + header_have_;
    const size_t want =
        in_payload_ ? payload_.size() - payload_have_ : metadata::kFrameHeaderBytes - header_have_;
    if (want == 0 && in_payload_) {  // empty payload: complete already
      if (!deliver()) return;
      ++frames;
      continue;
    }
    const ssize_t n = ::recv(fd_, dst, want, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return close(n == 0 ? Status::Unavailable("connection closed by the peer")
                          : Status::Unavailable(std::string("recv: ") + strerror(errno)));
    }
    if (traffic_) ControlCounters::bump(traffic_->bytes_received, n);
    if (frame_deadline_ == 0) frame_deadline_ = clock::monotonicNs() + io_timeout_ns_;
    if (!in_payload_) {
      header_have_ += static_cast<size_t>(n);
      if (header_have_ < metadata::kFrameHeaderBytes) continue;
      Status s = metadata::parseFrameHeader(std::span<const uint8_t, metadata::kFrameHeaderBytes>(
                                                header_, metadata::kFrameHeaderBytes),
                                            max_payload_, &current_);
      if (!s.ok()) return close(s);
      payload_.assign(current_.length, 0);
      payload_have_ = 0;
      in_payload_ = true;
      continue;
    }
    payload_have_ += static_cast<size_t>(n);
    if (payload_have_ == payload_.size()) {
      if (!deliver()) return;
      ++frames;
    }
  }
}

bool Connection::deliver() {
  std::vector<uint8_t> payload = std::move(payload_);
  payload_.clear();
  in_payload_ = false;
  header_have_ = 0;
  frame_deadline_ = 0;
  if (recv_signer_.active()) {
    if (payload.size() < metadata::kMacBytes) {
      close(Status::PermissionDenied("control frame without its authentication tag"));
      return false;
    }
    metadata::Mac got{};
    std::memcpy(got.data(), payload.data() + payload.size() - metadata::kMacBytes,
                metadata::kMacBytes);
    payload.resize(payload.size() - metadata::kMacBytes);
    if (!equalMacs(got, recv_signer_.tag(current_.type, payload))) {
      close(Status::PermissionDenied("control frame failed authentication"));
      return false;
    }
  }
  if (traffic_) ControlCounters::bump(traffic_->frames_received);
  owner_.onFrame(*this, current_.type, std::move(payload));
  return !closed();
}

void Connection::writeQueued() {
  while (!out_.empty()) {
    const std::vector<uint8_t>& f = out_.front();
    const ssize_t n = ::send(fd_, f.data() + out_offset_, f.size() - out_offset_, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return close(Status::Unavailable(std::string("send: ") + strerror(errno)));
    out_offset_ += static_cast<size_t>(n);
    queued_bytes_ -= static_cast<uint64_t>(n);
    if (traffic_) ControlCounters::bump(traffic_->bytes_sent, n);
    if (out_offset_ == f.size()) {
      if (traffic_) ControlCounters::bump(traffic_->frames_sent);
      out_.pop_front();
      out_offset_ = 0;
      // Progress: the peer reads. The remaining output gets a fresh budget.
      write_deadline_ = out_.empty() ? 0 : clock::monotonicNs() + io_timeout_ns_;
    }
  }
  if (close_after_flush_) close(Status::OK());
}

void Connection::updateInterest() {
  const bool want = !out_.empty();
  if (want == want_write_) return;
  want_write_ = want;
  (void)loop_.modify(fd_, EPOLLIN | (want ? EPOLLOUT : 0u));
}

void Connection::rearm() {
  uint64_t next = 0;
  for (uint64_t d : {frame_deadline_, write_deadline_, owner_deadline_})
    if (d != 0 && (next == 0 || d < next)) next = d;
  if (next == timer_at_ && timer_ != 0) return;
  if (timer_ != 0) loop_.cancelTimer(timer_);
  timer_ = 0;
  timer_at_ = next;
  if (next != 0)
    timer_ = loop_.addTimer(next, [this] {
      timer_ = 0;
      timer_at_ = 0;
      onTimer();
    });
}

void Connection::onTimer() {
  const uint64_t now = clock::monotonicNs();
  if (frame_deadline_ != 0 && now >= frame_deadline_)
    return close(Status::Timeout("a frame did not arrive in full within the I/O timeout"));
  if (write_deadline_ != 0 && now >= write_deadline_)
    return close(Status::Timeout(connecting_ ? "connect did not complete in time"
                                             : "the peer did not read within the I/O timeout"));
  if (owner_deadline_ != 0 && now >= owner_deadline_)
    return close(Status::Timeout(owner_deadline_what_));
  rearm();
}

}  // namespace tent::control
