// The control plane's event loop: one thread, epoll over sockets and eventfds, a
// timer queue, and tasks posted from other threads. Everything the control plane
// owns (connections, sessions, endpoint lifecycles) is touched only on this thread,
// so none of it needs a lock; nothing here ever waits on one peer.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/clock.h"
#include "tent/status.h"

namespace tent::control {

class EventLoop {
 public:
  using Task = std::function<void()>;
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual void onEvents(uint32_t events) = 0;  // EPOLLIN / EPOLLOUT / EPOLLERR / EPOLLHUP
  };

  static Result<std::unique_ptr<EventLoop>> create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // ---- loop thread ----
  // A handler removed (or destroyed after remove()) is never called again, even for
  // events already returned by the same epoll_wait.
  Status add(int fd, uint32_t events, Handler* handler);
  Status modify(int fd, uint32_t events);
  void remove(int fd) noexcept;
  uint64_t addTimer(uint64_t at_ns, Task task);
  void cancelTimer(uint64_t id) noexcept;
  // Runs until stop(); the calling thread becomes the loop thread.
  void run();
  bool inLoopThread() const noexcept { return std::this_thread::get_id() == loop_thread_; }

  // ---- any thread ----
  void post(Task task);
  void stop();
  // Starts run() on a thread of its own (named `name`), joined by join() / the destructor.
  void start(const char* name);
  void join();

 private:
  EventLoop() = default;
  void runTimers(uint64_t now);
  void runPosted();
  int waitMs(uint64_t now) const;

  int epfd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::thread::id loop_thread_;
  std::atomic<bool> stopping_{false};

  struct Registration {
    Handler* handler = nullptr;
    uint64_t token = 0;
  };
  std::unordered_map<int, Registration> fds_;
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, int> token_fd_;

  std::map<std::pair<uint64_t, uint64_t>, Task> timers_;  // (deadline, id)
  std::unordered_map<uint64_t, uint64_t> timer_deadline_;
  uint64_t next_timer_ = 1;

  std::mutex posted_mu_;
  std::deque<Task> posted_;
};

}  // namespace tent::control
