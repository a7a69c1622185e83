// One control connection (either end): a non-blocking TCP socket carrying frames,
// stepped by the event loop. It never blocks: it reads what has arrived, writes what
// the socket takes, and closes itself when a deadline passes -
//   a frame that started arriving must complete within the I/O timeout (a slow
//   sender cannot hold it half-read), queued output must drain within the I/O
//   timeout (a peer that does not read is dropped), and the owner's own deadline
//   (handshake, keepalive answer) applies on top.
// Frames over the payload limit in force (small until the session authenticates)
// and, once a session key is set, frames whose tag does not verify close it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "net/auth.h"
#include "net/control_stats.h"
#include "net/event_loop.h"
#include "wire/control_frames.h"

namespace tent::control {

class Connection final : public EventLoop::Handler {
 public:
  class Owner {
   public:
    virtual ~Owner() = default;
    virtual void onConnected(Connection&) {}
    virtual void onFrame(Connection& c, metadata::FrameType type, std::vector<uint8_t> payload) = 0;
    // Called once, after the socket is closed. The owner may destroy the connection
    // later (not from inside this call: defer it with EventLoop::post).
    virtual void onClosed(Connection& c, const Status& why) = 0;
  };

  // Takes ownership of `fd` (non-blocking). `connecting`: a connect(2) is in progress.
  Connection(EventLoop& loop, int fd, Owner& owner, uint64_t io_timeout_ns, bool connecting);
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Status start();

  void send(metadata::FrameType type, std::vector<uint8_t> payload);
  // Closes once everything queued has been written (one-shot replies).
  void closeAfterFlush();
  void close(const Status& why);
  bool closed() const noexcept { return fd_ < 0; }

  void setMaxPayload(uint32_t bytes) noexcept { max_payload_ = bytes; }
  // Counts the bytes and frames this connection receives and sends into `counters`.
  void countTraffic(ControlCounters& counters) noexcept { traffic_ = &counters; }
  // From now on frames are tagged (send) and checked (receive).
  void setSigners(FrameSigner send, FrameSigner receive);
  // The owner's deadline (0: none); passing it closes with `what`.
  void setDeadline(uint64_t at_ns, std::string what);
  uint64_t bytesQueued() const noexcept { return queued_bytes_; }

 private:
  void onEvents(uint32_t events) override;
  void finishConnect();
  void readFrames();
  bool deliver();  // false when the connection closed
  void writeQueued();
  void updateInterest();
  void rearm();
  void onTimer();

  EventLoop& loop_;
  int fd_;
  Owner& owner_;
  const uint64_t io_timeout_ns_;
  bool connecting_;
  bool close_after_flush_ = false;
  bool want_write_ = false;
  uint32_t max_payload_ = metadata::kMaxUnauthenticatedPayload;
  FrameSigner send_signer_, recv_signer_;
  ControlCounters* traffic_ = nullptr;

  uint8_t header_[metadata::kFrameHeaderBytes];
  size_t header_have_ = 0;
  metadata::FrameHeader current_;
  std::vector<uint8_t> payload_;
  size_t payload_have_ = 0;
  bool in_payload_ = false;

  std::deque<std::vector<uint8_t>> out_;
  size_t out_offset_ = 0;
  uint64_t queued_bytes_ = 0;

  uint64_t frame_deadline_ = 0;  // a started frame completes by then
  uint64_t write_deadline_ = 0;  // queued output drains by then
  uint64_t owner_deadline_ = 0;
  std::string owner_deadline_what_;
  uint64_t timer_ = 0;
  uint64_t timer_at_ = 0;
};

}  // namespace tent::control
