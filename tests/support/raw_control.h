// A blocking control-protocol client for tests: speaks raw frames (one-shot v1
// requests, garbage, partial frames) and, when asked, the session handshake with or
// without a secret. Deliberately independent of the engine's own client.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "net/address.h"
#include "net/auth.h"
#include "wire/control_frames.h"

namespace tent::test {

struct RawFrame {
  metadata::FrameType type = metadata::FrameType::kError;
  std::vector<uint8_t> payload;
};

class RawControl {
 public:
  RawControl() = default;
  ~RawControl() { closeNow(); }
  RawControl(const RawControl&) = delete;
  RawControl& operator=(const RawControl&) = delete;

  bool connect(const std::string& host_port) {
    std::string host;
    uint16_t port = 0;
    if (!control::splitHostPort(host_port, &host, &port).ok()) return false;
    auto a = control::resolve(host, port);
    if (!a.ok()) return false;
    fd_ = ::socket(a->storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    control::tuneSocket(fd_);  // TCP_NODELAY: no Nagle wait between frames
    return ::connect(fd_, a->get(), a->length) == 0;
  }
  void closeNow() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

  bool sendBytes(const void* data, size_t n) {
    return ::send(fd_, data, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
  }
  bool send(metadata::FrameType type, std::vector<uint8_t> payload) {
    if (send_.active()) {
      auto tag = send_.tag(type, payload);
      payload.insert(payload.end(), tag.begin(), tag.end());
    }
    std::vector<uint8_t> frame(metadata::kFrameHeaderBytes);
    metadata::encodeFrameHeader(type, static_cast<uint32_t>(payload.size()), frame.data());
    frame.insert(frame.end(), payload.begin(), payload.end());
    return sendBytes(frame.data(), frame.size());
  }
  // The next frame, or an error (closed, timeout, bad frame).
  Result<RawFrame> recv(int timeout_ms = 5000) {
    uint8_t h[metadata::kFrameHeaderBytes];
    if (!readAll(h, sizeof h, timeout_ms)) return Status::Unavailable("closed or timed out");
    metadata::FrameHeader header;
    TENT_RETURN_IF_ERROR(metadata::parseFrameHeader(
        std::span<const uint8_t, metadata::kFrameHeaderBytes>(h, sizeof h),
        metadata::kMaxControlPayload, &header));
    RawFrame f{header.type, std::vector<uint8_t>(header.length)};
    if (header.length && !readAll(f.payload.data(), header.length, timeout_ms))
      return Status::Unavailable("truncated frame");
    if (recv_.active()) {
      if (f.payload.size() < metadata::kMacBytes) return Status::PermissionDenied("no tag");
      f.payload.resize(f.payload.size() - metadata::kMacBytes);
    }
    return f;
  }
  // True when the server closed (or reset) the connection within the timeout; frames
  // it sent before closing are skipped.
  bool closedByPeer(int timeout_ms = 5000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    uint8_t b[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd p{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
      if (::recv(fd_, b, sizeof b, 0) <= 0) return true;
    }
  }
  // HELLO / CHALLENGE / AUTH / AUTH_OK; with `secret` (may be empty) as the client's.
  Status handshake(const control::Secret& secret) {
    metadata::Hello hello;
    hello.client_nonce = control::randomNonce();
    if (!send(metadata::FrameType::kHello, metadata::encodeHello(hello)))
      return Status::Unavailable("send HELLO");
    auto c = recv();
    if (!c.ok()) return c.status();
    if (c->type == metadata::FrameType::kError) return metadata::parseError(c->payload);
    auto ch = metadata::parseChallenge(c->payload);
    if (!ch.ok()) return ch.status();
    metadata::AuthMessage auth;
    if (!secret.empty()) {
      auth.has_proof = true;
      auth.client_proof = secret.clientProof(hello.client_nonce, ch->server_nonce);
    }
    if (!send(metadata::FrameType::kAuth, metadata::encodeAuth(auth)))
      return Status::Unavailable("send AUTH");
    auto ok = recv();
    if (!ok.ok()) return ok.status();
    if (ok->type == metadata::FrameType::kError) return metadata::parseError(ok->payload);
    if (!secret.empty()) {
      auto key = secret.sessionKey(hello.client_nonce, ch->server_nonce);
      send_ = control::FrameSigner(key, control::kClientToServer);
      recv_ = control::FrameSigner(key, control::kServerToClient);
    }
    return Status::OK();
  }
  Result<RawFrame> request(metadata::FrameType type, std::vector<uint8_t> payload) {
    if (!send(type, std::move(payload))) return Status::Unavailable("send");
    return recv();
  }

 private:
  bool readAll(uint8_t* p, size_t n, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (n > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd pfd{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&pfd, 1, static_cast<int>(left)) <= 0) return false;
      const ssize_t r = ::recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
  control::FrameSigner send_, recv_;
};

// One v1 request on a fresh connection.
inline Result<RawFrame> oneShot(const std::string& to, metadata::FrameType type,
                                std::vector<uint8_t> payload) {
  RawControl c;
  if (!c.connect(to)) return Status::Unavailable("cannot connect to " + to);
  return c.request(type, std::move(payload));
}

}  // namespace tent::test
