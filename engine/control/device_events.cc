#include "control/device_events.h"

#include "model/rdma_context.h"
#include "tent/log.h"

namespace tent::control {

class DeviceEvents::Watch final : public EventLoop::Handler {
 public:
  Watch(DeviceEvents& owner, rdma::RdmaContext& ctx, int fd) : owner_(owner), ctx_(ctx), fd_(fd) {}
  void onEvents(uint32_t) override { owner_.drain(ctx_); }
  int fd() const noexcept { return fd_; }

 private:
  DeviceEvents& owner_;
  rdma::RdmaContext& ctx_;
  int fd_;
};

DeviceEvents::DeviceEvents(EventLoop& loop, std::vector<rdma::RdmaContext*> contexts,
                           std::function<void()> republish)
    : loop_(loop), contexts_(std::move(contexts)), republish_(std::move(republish)) {}

DeviceEvents::~DeviceEvents() = default;

Status DeviceEvents::start() {
  for (rdma::RdmaContext* ctx : contexts_) {
    const int fd = ctx->device().eventFd();
    if (fd < 0) continue;
    auto watch = std::make_unique<Watch>(*this, *ctx, fd);
    TENT_RETURN_IF_ERROR(loop_.add(fd, EPOLLIN, watch.get())
                             .withContext("watching device events of " + ctx->name()));
    watches_.push_back(std::move(watch));
    // Events that came before the watch (level-triggered: the loop sees them anyway).
  }
  return Status::OK();
}

void DeviceEvents::stop() noexcept {
  for (const auto& w : watches_) loop_.remove(w->fd());
  watches_.clear();
}

void DeviceEvents::drain(rdma::RdmaContext& ctx) {
  fabric::DeviceEventType type;
  while (ctx.device().nextEvent(&type)) handle(ctx, type);
}

void DeviceEvents::handle(rdma::RdmaContext& ctx, fabric::DeviceEventType type) {
  using fabric::DeviceEventType;
  switch (type) {
    case DeviceEventType::kFatal:
      // Counted after it took effect: a reader that sees the count sees the state.
      if (!ctx.dead()) {
        // The pollers see it at their next pass over the device's CQs and lanes.
        ctx.markDead();
        TENT_ERROR(kEngine,
                   "device %s reported a fatal error: its transfers fail, nothing more is "
                   "routed to it (the engine must be recreated to use it again)",
                   ctx.name().c_str());
      }
      counters_.fatal.fetch_add(1, std::memory_order_release);
      return;
    case DeviceEventType::kPortDown:
      ctx.setPortDown(true);
      counters_.port_down.fetch_add(1, std::memory_order_release);
      TENT_WARN(kEngine, "device %s: port down, its rail is paused", ctx.name().c_str());
      return;
    case DeviceEventType::kPortUp:
      ctx.setPortDown(false);
      counters_.port_up.fetch_add(1, std::memory_order_release);
      TENT_INFO(kEngine, "device %s: port up%s", ctx.name().c_str(),
                ctx.dead() ? " (the device is dead: it stays unused)" : ", its rail resumes");
      return;
    case DeviceEventType::kAddressChange:
      TENT_INFO(kEngine, "device %s: address changed, publishing the new one", ctx.name().c_str());
      if (republish_) republish_();
      counters_.address_changes.fetch_add(1, std::memory_order_release);
      return;
  }
}

}  // namespace tent::control
