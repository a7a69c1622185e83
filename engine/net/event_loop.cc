#include "net/event_loop.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tent/log.h"

namespace tent::control {

namespace {
constexpr uint64_t kWakeToken = 0;
constexpr int kMaxEvents = 64;
}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd_ < 0) return Status::IoError(std::string("epoll_create1: ") + strerror(errno));
  loop->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (loop->wake_fd_ < 0) return Status::IoError(std::string("eventfd: ") + strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (epoll_ctl(loop->epfd_, EPOLL_CTL_ADD, loop->wake_fd_, &ev) != 0)
    return Status::IoError(std::string("epoll_ctl: ") + strerror(errno));
  loop->loop_thread_ = std::this_thread::get_id();
  return loop;
}

EventLoop::~EventLoop() {
  stop();
  join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epfd_ >= 0) ::close(epfd_);
}

Status EventLoop::add(int fd, uint32_t events, Handler* handler) {
  const uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0)
    return Status::IoError(std::string("epoll_ctl add: ") + strerror(errno));
  fds_[fd] = Registration{handler, token};
  token_fd_[token] = fd;
  return Status::OK();
}

Status EventLoop::modify(int fd, uint32_t events) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return Status::NotFound("fd not registered");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second.token;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0)
    return Status::IoError(std::string("epoll_ctl mod: ") + strerror(errno));
  return Status::OK();
}

void EventLoop::remove(int fd) noexcept {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  (void)epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  token_fd_.erase(it->second.token);
  fds_.erase(it);
}

uint64_t EventLoop::addTimer(uint64_t at_ns, Task task) {
  const uint64_t id = next_timer_++;
  timers_.emplace(std::make_pair(at_ns, id), std::move(task));
  timer_deadline_[id] = at_ns;
  return id;
}

void EventLoop::cancelTimer(uint64_t id) noexcept {
  auto it = timer_deadline_.find(id);
  if (it == timer_deadline_.end()) return;
  timers_.erase({it->second, id});
  timer_deadline_.erase(it);
}

void EventLoop::post(Task task) {
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    posted_.push_back(std::move(task));
  }
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void EventLoop::stop() {
  stopping_.store(true, std::memory_order_release);
  uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void EventLoop::start(const char* name) {
  thread_ = std::thread([this, name] {
    pthread_setname_np(pthread_self(), name);
    run();
  });
}

void EventLoop::join() {
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

int EventLoop::waitMs(uint64_t now) const {
  if (timers_.empty()) return 1000;
  const uint64_t next = timers_.begin()->first.first;
  if (next <= now) return 0;
  const uint64_t ms = (next - now + 999'999) / 1'000'000;
  return ms > 1000 ? 1000 : static_cast<int>(ms);
}

void EventLoop::runTimers(uint64_t now) {
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto it = timers_.begin();
    Task task = std::move(it->second);
    timer_deadline_.erase(it->first.second);
    timers_.erase(it);
    task();
  }
}

void EventLoop::runPosted() {
  std::deque<Task> tasks;
  {
    std::lock_guard<std::mutex> lock(posted_mu_);
    tasks.swap(posted_);
  }
  for (auto& t : tasks) t();
}

void EventLoop::run() {
  loop_thread_ = std::this_thread::get_id();
  epoll_event events[kMaxEvents];
  while (!stopping_.load(std::memory_order_acquire)) {
    const int n = epoll_wait(epfd_, events, kMaxEvents, waitMs(clock::monotonicNs()));
    if (n < 0 && errno != EINTR) {
      TENT_ERROR(kEngine, "control loop: epoll_wait: %s", strerror(errno));
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t token = events[i].data.u64;
      if (token == kWakeToken) {
        uint64_t drained;
        (void)!::read(wake_fd_, &drained, sizeof drained);
        continue;
      }
      auto fd = token_fd_.find(token);  // gone: removed by an earlier handler of this batch
      if (fd == token_fd_.end()) continue;
      fds_[fd->second].handler->onEvents(events[i].events);
    }
    runPosted();
    runTimers(clock::monotonicNs());
  }
  runPosted();  // tasks posted before stop() still run (they may hold promises)
}

}  // namespace tent::control
