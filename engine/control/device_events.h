// Device events on the control loop: every device that reports events (a verbs
// context's async fd, the soft provider's injected events) is watched by the loop,
// which reads them when its descriptor turns readable - no thread sleeps on them.
//   fatal          the context is dead: its rail is down for good; the pollers that
//                  own its slices and its direct lanes fail them (no completion comes)
//   port down / up its rail is paused (nothing new is routed to it) / resumed
//   address change the descriptor, which names the device's current address, is
//                  published again, so new connections use the new address
// See docs/engine.md, "Failure model".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fabric/fabric.h"
#include "net/event_loop.h"

namespace tent::rdma {
class RdmaContext;
}

namespace tent::control {

struct DeviceEventCounters {
  std::atomic<uint64_t> fatal{0};
  std::atomic<uint64_t> port_down{0};
  std::atomic<uint64_t> port_up{0};
  std::atomic<uint64_t> address_changes{0};
};

class DeviceEvents {
 public:
  // `republish` runs on the loop after an address change.
  DeviceEvents(EventLoop& loop, std::vector<rdma::RdmaContext*> contexts,
               std::function<void()> republish);
  ~DeviceEvents();
  DeviceEvents(const DeviceEvents&) = delete;
  DeviceEvents& operator=(const DeviceEvents&) = delete;

  // Loop thread: watches every context's event descriptor / stops watching.
  Status start();
  void stop() noexcept;
  const DeviceEventCounters& counters() const noexcept { return counters_; }

 private:
  class Watch;
  void drain(rdma::RdmaContext& ctx);
  void handle(rdma::RdmaContext& ctx, fabric::DeviceEventType type);

  EventLoop& loop_;
  std::vector<rdma::RdmaContext*> contexts_;
  std::function<void()> republish_;
  std::vector<std::unique_ptr<Watch>> watches_;
  DeviceEventCounters counters_;
};

}  // namespace tent::control
