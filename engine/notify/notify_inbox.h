// Inbox: the receiving side of notifications. Holds what arrived and was not taken
// yet, bounded by count and bytes (notify.inbox_count, notify.inbox_bytes). The
// passive notify links attach to it; take() and wait() move what their QPs received
// into it while it has room, so a full inbox leaves the messages in the links'
// receive buffers, their senders run out of credits and see back-pressure: nothing
// is dropped. Arrival order per sender holds (each sender uses one notify QP).
//
// No thread polls for notifications unless a caller asks: take() does one pass (a
// caller that waits calls it again under the engine's waiter policy, in the transport).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "tent/status.h"

namespace tent::notify {

class NotifyLink;

struct Notification {
  std::string sender;  // the sending engine's segment name
  std::string message;
};

// Counters of one engine, both directions.
struct Counters {
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> sent_bytes{0};
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> received_bytes{0};
  std::atomic<uint64_t> refused{0};          // sends refused by back-pressure (receiver full)
  std::atomic<uint64_t> unsupported{0};      // sends to a peer without the capability
  std::atomic<uint64_t> failed{0};           // not delivered: QP failed, SEND completed in error
  std::atomic<uint64_t> dropped_batches{0};  // batch notifications not sent: the batch failed
};

class Inbox {
 public:
  Inbox(uint64_t max_count, uint64_t max_bytes, Counters& counters)
      : max_count_(max_count), max_bytes_(max_bytes), counters_(counters) {}
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // A passive link starts / stops being polled (its endpoint became ready / retires).
  void attach(NotifyLink* link);
  void detach(NotifyLink* link);

  // Everything that arrived since the last call, oldest first per sender.
  std::vector<Notification> take();

  // For links, with the mutex held (pollIntoLocked).
  bool hasRoomLocked(size_t bytes) const noexcept {
    return queue_.size() < max_count_ && bytes_ + bytes <= max_bytes_;
  }
  void pushLocked(const std::string& sender, const uint8_t* data, size_t length);

  // The engine's counters (links count the SENDs that fail after they were posted).
  Counters& counters() const noexcept { return counters_; }
  size_t attached() const;
  uint64_t held() const;  // notifications waiting to be taken

 private:
  size_t passLocked();

  const uint64_t max_count_;
  const uint64_t max_bytes_;
  Counters& counters_;
  mutable std::mutex mu_;
  std::vector<NotifyLink*> links_;
  std::deque<Notification> queue_;
  uint64_t bytes_ = 0;
};

}  // namespace tent::notify
