// The control plane: one event-loop thread that owns the listener, the control
// sessions, and every endpoint's lifecycle. Nothing here runs on an lcore or on a
// caller's datapath; nothing waits on one peer while another is ready.
//
//   segments  - one client session per open peer segment: connect, authenticate,
//               fetch the descriptor, keep it fresh (pushed updates), notice the peer
//               going away, reconnect with backoff (requests fail at once meanwhile).
//   endpoints - connect (bootstrap over the session), ready, retire (reset, eviction,
//               peer gone), drain, free after an EBR grace period; caps per context.
//   passive   - the target side of peers' endpoints, owned by the session that
//               bootstrapped them and freed with it.
// See docs/engine.md, "Control plane" and "Endpoint lifecycle".
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "net/auth.h"
#include "net/control_stats.h"
#include "net/event_loop.h"
#include "net/server.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {
class RdmaContext;
class SegmentTable;
class ControlRequests;
class LocalMemory;
struct SegmentRecord;
}  // namespace tent::rdma

namespace tent::control {

class EndpointManager;
class PassiveEndpoints;
class PeerSegments;

struct ControlPlaneDeps {
  const config::Config& config;
  std::vector<rdma::RdmaContext*> contexts;
  std::vector<uint32_t> rail_poller_of_context;  // posting index per context
  std::vector<uint32_t> background_pollers;      // posting indices
  rdma::SegmentTable& segments;
  rdma::ControlRequests& requests;
  rdma::LocalMemory& local;
  bool direct_enabled = true;  // endpoints get (and advertise) a direct QP
};

// Resource counts, written on the loop, read by stats() from any thread.
struct ResourceCounters {
  std::atomic<uint64_t> endpoints_live{0};
  std::atomic<uint64_t> endpoints_retired{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint64_t> evictions{0};
  std::vector<std::atomic<uint64_t>> qps;  // per context
  explicit ResourceCounters(size_t contexts) : qps(contexts) {}
};

class ControlPlane {
 public:
  static Result<std::unique_ptr<ControlPlane>> create(ControlPlaneDeps deps);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // This engine's segment name ("host:port" of its listener).
  const std::string& segmentName() const noexcept { return segment_name_; }
  uint64_t instance() const noexcept { return instance_; }

  // ---- API threads (each waits for the loop, bounded by the bootstrap timeouts) ----
  Result<SegmentId> openSegment(const std::string& name);
  Status closeSegment(SegmentId id);
  // Fetches the peer's descriptor again and waits for it.
  Status refreshSegment(SegmentId id);
  // Asks for a refetch without waiting (a request missed the cached descriptor).
  void refreshSoon(SegmentId id) noexcept;
  // The local memory changed: republish our descriptor (local record, sessions).
  void localChanged();
  void fillStats(EngineStats* out) const;
  // Stops the loop: sessions closed, every endpoint freed. Pollers must be detached.
  void shutdown();

  // ---- loop thread (the parts talk to each other through these) ----
  EventLoop& loop() noexcept { return *loop_; }
  const config::Config& config() const noexcept { return deps_.config; }
  const ControlPlaneDeps& deps() const noexcept { return deps_; }
  ResourceCounters& resources() noexcept { return resources_; }
  ControlCounters& counters() noexcept { return counters_; }
  const Secret& secret() const noexcept { return secret_; }
  EndpointManager& endpoints() noexcept { return *endpoints_; }
  PeerSegments& peers() noexcept { return *peers_; }
  // Polls draining endpoints and retired records (1 ms steps while any is pending).
  void armReclaim();
  void reclaim();
  void drainRequests();
  // Runs `fn` on the loop and waits for its result.
  template <typename T, typename Fn>
  T call(Fn fn);

 private:
  explicit ControlPlane(ControlPlaneDeps deps);
  Status init();
  class Handler;

  ControlPlaneDeps deps_;
  std::string segment_name_;
  uint64_t instance_ = 0;
  Secret secret_;
  ControlCounters counters_;
  ResourceCounters resources_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<PassiveEndpoints> passive_;
  std::unique_ptr<EndpointManager> endpoints_;
  std::unique_ptr<PeerSegments> peers_;
  std::unique_ptr<EventLoop::Handler> requests_handler_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> last_refresh_ns_{0};
  uint64_t reclaim_timer_ = 0;
};

template <typename T, typename Fn>
T ControlPlane::call(Fn fn) {
  if (loop_->inLoopThread()) return fn();
  auto promise = std::make_shared<std::promise<T>>();
  auto future = promise->get_future();
  loop_->post([promise, fn = std::move(fn)]() mutable { promise->set_value(fn()); });
  return future.get();
}

}  // namespace tent::control
