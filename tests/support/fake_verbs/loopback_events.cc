// The loopback fake's async events: a queue per context behind an eventfd (its
// async_fd), readable while events wait; get_async_event never blocks (EAGAIN), as
// on a real context whose async_fd the caller made non-blocking.
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "loopback_internal.h"

namespace tent::fabric::testing::loopback {

ContextState* openContextState() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return nullptr;
  auto* s = new ContextState();
  s->event_fd = fd;
  return s;
}

void closeContextState(ContextState* state) noexcept {
  if (state == nullptr) return;
  close(state->event_fd);
  delete state;
}

int getAsyncEvent(ibv_context* ctx, ibv_async_event* event) {
  ContextState* s = stateOf(ctx);
  if (s == nullptr || event == nullptr) {
    errno = EINVAL;
    return -1;
  }
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  *event = s->events.front();
  s->events.pop_front();
  if (s->events.empty()) {  // not readable until the next event
    uint64_t count = 0;
    (void)!read(s->event_fd, &count, sizeof(count));
  }
  return 0;
}

void ackAsyncEvent(ibv_async_event* event) {
  if (event == nullptr) return;
  if (Fabric* f = currentFabric()) f->counters.async_acks.fetch_add(1);
}

namespace {
void pushEvent(ContextState& s, const ibv_async_event& e) {
  std::lock_guard<std::mutex> lock(s.mu);
  s.events.push_back(e);
  const uint64_t one = 1;
  (void)!write(s.event_fd, &one, sizeof(one));
}
}  // namespace

}  // namespace tent::fabric::testing::loopback

namespace tent::fabric::testing {

void LoopbackVerbs::injectAsyncEvent(ibv_context* context, ibv_event_type type, uint8_t port) {
  loopback::ContextState* s = loopback::stateOf(context);
  if (s == nullptr) return;
  ibv_async_event e{};
  e.event_type = type;
  if (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_PORT_ACTIVE || type == IBV_EVENT_GID_CHANGE ||
      type == IBV_EVENT_LID_CHANGE)
    e.element.port_num = port;
  if (type == IBV_EVENT_DEVICE_FATAL) s->fatal.store(true, std::memory_order_release);
  loopback::pushEvent(*s, e);
}

void LoopbackVerbs::holdCompletions(ibv_context* context, bool held) {
  if (loopback::ContextState* s = loopback::stateOf(context))
    s->held.store(held, std::memory_order_release);
}

bool LoopbackVerbs::replaceGid(const std::string& device, int index, const std::string& gid_text) {
  for (auto& d : fabric_->devices) {
    if (d->spec.name != device) continue;
    if (index < 0 || index >= loopback::kGidTableLength || !d->gid_used[index]) return false;
    ibv_gid gid{};
    if (inet_pton(AF_INET6, gid_text.c_str(), gid.raw) != 1) return false;
    std::lock_guard<std::mutex> lock(d->gid_mu);
    d->gids[index].gid = gid;
    return true;
  }
  return false;
}

}  // namespace tent::fabric::testing
