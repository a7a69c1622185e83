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
#include "control/device_events.h"
#include "control/loop_calls.h"
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

namespace tent::fleet {
class Registry;
struct FleetCounters;
struct Entry;
}  // namespace tent::fleet

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
  // host:port of our listener as peers dial it (published with our etcd entry and blob).
  const std::string& controlAddress() const noexcept { return advertised_address_; }
  uint64_t instance() const noexcept { return instance_; }

  // ---- API threads (each waits for the loop through LoopCalls: at most
  // connect_timeout_ms + io_timeout_ms for an open, io_timeout_ms for the others) ----
  Result<SegmentId> openSegment(const std::string& name);
  Status closeSegment(SegmentId id);
  // The metadata blob (fleet/entry.h): ours, and a peer's opened without fetching its
  // descriptor from its control port. See TransferEngine::localMetadata.
  Result<std::string> localMetadata();
  Result<SegmentId> addRemoteMetadata(std::string_view blob);
  // Fetches the peer's descriptor again and waits for it.
  Status refreshSegment(SegmentId id);
  // The local memory changed: republish our descriptor (local record, sessions).
  void localChanged();
  void fillStats(EngineStats* out) const;
  // Any thread, at once: every call waiting on the loop (an open in progress) returns
  // Canceled, and every later one fails at once; the loop keeps running until
  // shutdown(). The first step of closing the engine.
  void cancelWaits();
  // Stops the loop: sessions closed, every endpoint freed. Pollers must be detached.
  void shutdown();
  // Calls registered with the loop and not yet answered (tests: back to 0).
  size_t openCalls() const { return calls_ ? calls_->openCalls() : 0; }
  size_t startedCalls() const { return calls_ ? calls_->startedCalls() : 0; }

  // ---- loop thread (the parts talk to each other through these) ----
  EventLoop& loop() noexcept { return *loop_; }
  const config::Config& config() const noexcept { return deps_.config; }
  const ControlPlaneDeps& deps() const noexcept { return deps_; }
  ResourceCounters& resources() noexcept { return resources_; }
  ControlCounters& counters() noexcept { return counters_; }
  const Secret& secret() const noexcept { return secret_; }
  EndpointManager& endpoints() noexcept { return *endpoints_; }
  PeerSegments& peers() noexcept { return *peers_; }
  // metadata.backend etcd: the registry (nullptr with p2p).
  fleet::Registry* registry() noexcept { return registry_.get(); }
  fleet::FleetCounters& fleetCounters() noexcept { return *fleet_counters_; }
  // Polls draining endpoints and retired records (1 ms steps while any is pending).
  void armReclaim();
  void reclaim();
  void drainRequests();
  // Runs `fn` on the loop and waits for its result (Status or Result<T>), at most
  // bootstrap.io_timeout_ms; `what` names the call in a Timeout.
  template <typename R, typename Fn>
  R call(const std::string& what, Fn fn);
  // Test hook: the loop runs nothing else until `resume` is ready (a control thread
  // starved of CPU, or stopped in a debugger); `stalled` runs on the loop first.
  // Not part of the API.
  void stallForTest(std::shared_future<void> resume, std::function<void()> stalled = {});

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
  std::unique_ptr<LoopCalls> calls_;  // after loop_: destroyed before it
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<ControlServer> server_;
  std::unique_ptr<PassiveEndpoints> passive_;
  std::unique_ptr<EndpointManager> endpoints_;
  std::unique_ptr<PeerSegments> peers_;
  std::unique_ptr<EventLoop::Handler> requests_handler_;
  std::unique_ptr<DeviceEvents> device_events_;
  // The local descriptor changed (memory, a device's address): pushed to peers. Loop.
  void publishLocal();
  uint64_t openBudgetNs() const noexcept;
  Status startFleet(const std::string& host);
  void startRegistration();
  uint64_t lookupBudgetNs() const noexcept;
  void fillFleetStats(EngineStats* out) const;
  void onPeerEntry(const fleet::Entry& entry);
  Result<SegmentId> openThroughEtcd(const std::string& name);
  std::unique_ptr<fleet::FleetCounters> fleet_counters_;
  std::unique_ptr<fleet::Registry> registry_;  // after loop_: destroyed before it
  std::string advertised_address_;             // host:port of our listener, as peers dial it

  std::atomic<bool> stopped_{false};    // no new calls (cancelWaits)
  std::atomic<bool> shut_down_{false};  // the loop is stopped (shutdown)
  uint64_t reclaim_timer_ = 0;
};

template <typename R, typename Fn>
R ControlPlane::call(const std::string& what, Fn fn) {
  if (loop_->inLoopThread()) return fn();
  return calls_->run<R>(uint64_t{deps_.config.bootstrap.io_timeout_ms} * 1'000'000, what,
                        "bootstrap.io_timeout_ms",
                        [fn = std::move(fn)](Completer<R> done) mutable { done(fn()); });
}

}  // namespace tent::control
