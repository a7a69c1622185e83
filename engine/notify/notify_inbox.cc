#include "notify/notify_inbox.h"

#include <algorithm>

#include "notify/notify_link.h"

namespace tent::notify {

void Inbox::attach(NotifyLink* link) {
  std::lock_guard lock(mu_);
  links_.push_back(link);
}

void Inbox::detach(NotifyLink* link) {
  std::lock_guard lock(mu_);
  std::erase(links_, link);
}

void Inbox::pushLocked(const std::string& sender, const uint8_t* data, size_t length) {
  queue_.push_back({sender, std::string(reinterpret_cast<const char*>(data), length)});
  bytes_ += length;
  counters_.received.fetch_add(1, std::memory_order_relaxed);
  counters_.received_bytes.fetch_add(length, std::memory_order_relaxed);
}

size_t Inbox::passLocked() {
  size_t moved = 0;
  for (NotifyLink* link : links_) moved += link->pollIntoLocked(*this);
  return moved;
}

std::vector<Notification> Inbox::take() {
  std::lock_guard lock(mu_);
  passLocked();
  std::vector<Notification> out(std::make_move_iterator(queue_.begin()),
                                std::make_move_iterator(queue_.end()));
  queue_.clear();
  bytes_ = 0;
  // Room again: what waited in the links' receive buffers comes in now, so their
  // credits go back to the senders at once rather than on the next call.
  passLocked();
  return out;
}

size_t Inbox::attached() const {
  std::lock_guard lock(mu_);
  return links_.size();
}

uint64_t Inbox::held() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

}  // namespace tent::notify
