// Calls from API threads into the control loop, each completed exactly once.
//
// An API thread that needs the loop (openSegment, closeSegment, a descriptor
// refetch, a local memory change, engine start-up) registers a call with a deadline
// taken from the config, posts its work to the loop and waits. The call completes
// exactly once, by whichever comes first:
//   - the loop's answer (success or failure), through the call's Completer;
//   - its deadline: a timer on the loop completes it with Timeout (and runs the
//     work's cleanup), and the waiting thread checks the same deadline itself, so a
//     stalled or stopped loop cannot hold it either;
//   - shutdown: abortAll() completes every call still open with the reason given
//     (Canceled: the engine is closing), and every later call completes at once
//     with it.
// An answer that comes after the call completed is dropped. Work whose waiter gave
// up before the loop came to it still runs (a close, a republish still happen; an
// open is cleaned up by its timeout hook); work of an aborted call does not.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "base/clock.h"
#include "net/event_loop.h"
#include "tent/status.h"

namespace tent::control {

namespace detail {
// One call's outcome, set once. Type-erased so that the table can fail any call.
class CallState {
 public:
  virtual ~CallState() = default;
  virtual bool fail(const Status& why) = 0;  // false: it had completed already
  virtual bool done() const = 0;
};

// R: the call's outcome, Status or Result<T>.
template <typename R>
class TypedCall final : public CallState {
 public:
  bool complete(R r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (result_) return false;
      result_.emplace(std::move(r));
    }
    cv_.notify_all();
    return true;
  }
  bool fail(const Status& why) override { return complete(R(why)); }
  bool done() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return result_.has_value();
  }
  // Waits until the call completed or `deadline_ns` (clock::monotonicNs) passed; in
  // the latter case completes it with `timeout` first. Returns the outcome.
  R wait(uint64_t deadline_ns, const Status& timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!result_) {
      const uint64_t now = clock::monotonicNs();
      if (now >= deadline_ns) {
        result_.emplace(timeout);
        break;
      }
      cv_.wait_for(lock, std::chrono::nanoseconds(deadline_ns - now));
    }
    return *result_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<R> result_;
};
}  // namespace detail

class LoopCalls;

// The loop's handle on one call: answers it (once; later answers are dropped).
// Copyable; cheap to keep in a list of waiters. R: Status or Result<T>.
template <typename R>
class Completer {
 public:
  Completer() = default;
  void operator()(R r) const;
  // The call completed already (answered, timed out or aborted): nobody waits.
  bool abandoned() const { return !call_ || call_->done(); }

 private:
  friend class LoopCalls;
  Completer(std::shared_ptr<detail::TypedCall<R>> call, LoopCalls* table, uint64_t id)
      : call_(std::move(call)), table_(table), id_(id) {}
  std::shared_ptr<detail::TypedCall<R>> call_;
  LoopCalls* table_ = nullptr;
  uint64_t id_ = 0;
};

class LoopCalls {
 public:
  explicit LoopCalls(EventLoop& loop) : loop_(loop) {}
  ~LoopCalls();
  LoopCalls(const LoopCalls&) = delete;
  LoopCalls& operator=(const LoopCalls&) = delete;

  // ---- API thread ----
  // Runs `work` on the loop with a Completer and waits for the call to complete, at
  // most `timeout_ns`. `what` names the call in its Timeout status ("open segment
  // x:1") and `budget` says where the bound comes from ("bootstrap.io_timeout_ms").
  // `on_timeout` (optional) runs on the loop when the deadline passes first.
  // R: the outcome, Status or Result<T>.
  template <typename R>
  R run(uint64_t timeout_ns, const std::string& what, const std::string& budget,
        std::function<void(Completer<R>)> work, std::function<void()> on_timeout = {});

  // ---- any thread ----
  // Completes every open call with `why`; every later run() completes at once with it.
  void abortAll(const Status& why);
  size_t openCalls() const;
  // Open calls whose work has started on the loop (armed): anything posted to the loop
  // after this is seen runs after that work.
  size_t startedCalls() const;

  // ---- loop thread (through Completer) ----
  // Completes call `id` with `complete()` and, if that answered it, forgets it - one
  // step for observers of openCalls().
  template <typename Complete>
  void answer(uint64_t id, Complete complete);

 private:
  struct Entry {
    std::shared_ptr<detail::CallState> call;
    uint64_t timer = 0;
    std::function<void()> on_timeout;
  };
  // Registers a call; false (and nothing registered) once abortAll() ran.
  bool add(uint64_t* id, std::shared_ptr<detail::CallState> call, Status* refused);
  // On the loop: arms the call's deadline timer; false when the call was aborted.
  bool arm(uint64_t id, uint64_t deadline_ns, const Status& timeout,
           std::function<void()> on_timeout);
  void expire(uint64_t id, const Status& timeout);

  EventLoop& loop_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> calls_;
  uint64_t next_id_ = 1;
  std::optional<Status> aborted_;
};

Status callTimeout(const std::string& what, uint64_t timeout_ns, const std::string& budget);

template <typename R>
void Completer<R>::operator()(R r) const {
  if (!call_) return;
  if (table_ == nullptr) {
    (void)call_->complete(std::move(r));
    return;
  }
  table_->answer(id_, [&] { return call_->complete(std::move(r)); });
}

template <typename Complete>
void LoopCalls::answer(uint64_t id, Complete complete) {
  uint64_t timer = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!complete()) return;  // answered already: timed out or canceled
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    timer = it->second.timer;
    calls_.erase(it);
  }
  // Answers come from the loop thread; one from elsewhere leaves its timer to expire.
  if (timer != 0 && loop_.inLoopThread()) loop_.cancelTimer(timer);
}

template <typename R>
R LoopCalls::run(uint64_t timeout_ns, const std::string& what, const std::string& budget,
                 std::function<void(Completer<R>)> work, std::function<void()> on_timeout) {
  auto call = std::make_shared<detail::TypedCall<R>>();
  uint64_t id = 0;
  Status refused;
  if (!add(&id, call, &refused)) return refused;
  const uint64_t deadline = clock::monotonicNs() + timeout_ns;
  const Status timeout = callTimeout(what, timeout_ns, budget);
  loop_.post([this, call, id, deadline, timeout, work = std::move(work),
              on_timeout = std::move(on_timeout)]() mutable {
    if (!arm(id, deadline, timeout, std::move(on_timeout))) return;  // aborted
    work(Completer<R>(call, this, id));
  });
  return call->wait(deadline, timeout);
}

}  // namespace tent::control
