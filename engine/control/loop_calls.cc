#include "control/loop_calls.h"

#include <vector>

namespace tent::control {

Status callTimeout(const std::string& what, uint64_t timeout_ns, const std::string& budget) {
  return Status::Timeout(what + ": no answer within " + std::to_string(timeout_ns / 1'000'000) +
                         " ms (" + budget + ")");
}

LoopCalls::~LoopCalls() {
  abortAll(Status::Canceled("the control plane is gone"));
}

bool LoopCalls::add(uint64_t* id, std::shared_ptr<detail::CallState> call, Status* refused) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) {
    *refused = *aborted_;
    return false;
  }
  *id = next_id_++;
  calls_.emplace(*id, Entry{std::move(call), 0, {}});
  return true;
}

bool LoopCalls::arm(uint64_t id, uint64_t deadline_ns, const Status& timeout,
                    std::function<void()> on_timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = calls_.find(id);
  if (it == calls_.end()) return false;  // aborted: the engine is closing
  // A waiter that gave up already still gets its work done (a close, a republish);
  // the deadline has passed then, so the timer runs the cleanup on the next turn.
  it->second.on_timeout = std::move(on_timeout);
  it->second.timer = loop_.addTimer(deadline_ns, [this, id, timeout] { expire(id, timeout); });
  return true;
}

void LoopCalls::expire(uint64_t id, const Status& timeout) {
  std::function<void()> cleanup;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    // The waiter completes it with the named Timeout at the same deadline; this one
    // only matters if the waiter has not woken yet.
    (void)it->second.call->fail(timeout);
    cleanup = std::move(it->second.on_timeout);
    calls_.erase(it);
  }
  if (cleanup) cleanup();
}

void LoopCalls::abortAll(const Status& why) {
  std::vector<std::shared_ptr<detail::CallState>> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) aborted_ = why;
    for (auto& [id, e] : calls_) open.push_back(e.call);
    calls_.clear();  // their timers find nothing to expire
  }
  for (auto& c : open) (void)c->fail(why);
}

size_t LoopCalls::openCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_.size();
}

size_t LoopCalls::startedCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, e] : calls_) n += e.timer != 0 ? 1 : 0;
  return n;
}

}  // namespace tent::control
