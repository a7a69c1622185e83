// A one-shot (v1) request on the event loop: connect, send one frame, read one
// answer, close - the way v1 peers talk. The passive side uses it to check that the
// initiator of a sessionless (v1) bootstrap is still the process that sent it.
#pragma once

#include <functional>
#include <memory>

#include "net/address.h"
#include "net/connection.h"
#include "net/control_stats.h"
#include "net/event_loop.h"

namespace tent::control {

class OneShotRequest final : public Connection::Owner {
 public:
  using Done = std::function<void(Result<std::pair<metadata::FrameType, std::vector<uint8_t>>>)>;
  // Runs `done` exactly once on the loop; the request deletes itself afterwards.
  static void start(EventLoop& loop, const SocketAddress& to, metadata::FrameType type,
                    std::vector<uint8_t> payload, uint64_t timeout_ns, ControlCounters& stats,
                    Done done);

  void onFrame(Connection& c, metadata::FrameType type, std::vector<uint8_t> payload) override;
  void onClosed(Connection& c, const Status& why) override;

 private:
  OneShotRequest(EventLoop& loop, ControlCounters& stats, Done done)
      : loop_(loop), stats_(stats), done_(std::move(done)) {}
  void finish(Result<std::pair<metadata::FrameType, std::vector<uint8_t>>> r);

  EventLoop& loop_;
  ControlCounters& stats_;
  Done done_;
  std::unique_ptr<Connection> conn_;
};

}  // namespace tent::control
