#include "control/control_plane.h"

#include <algorithm>
#include <random>

#include "net/address.h"
#include "control/endpoint_manager.h"
#include "control/passive_endpoints.h"
#include "control/peer_segments.h"
#include "model/control_requests.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "model/segment_table.h"
#include "net/address.h"
#include "fleet/registry.h"
#include "tent/log.h"
#include "wire/segment_descriptor.h"

namespace tent::control {

namespace {
constexpr uint64_t kReclaimStepNs = 1'000'000;  // drain / free poll while something is pending
}

// The server's questions, answered on the loop by the parts of the control plane.
class ControlPlane::Handler final : public ServerHandler {
 public:
  explicit Handler(ControlPlane& plane) : plane_(plane) {}
  std::vector<uint8_t> descriptorFor(uint16_t version) override {
    return plane_.deps_.local.encodedDescriptor(version);
  }
  Result<metadata::BootstrapMessage> acceptBootstrap(
      ServerSession* session, const metadata::BootstrapMessage& request) override {
    return plane_.passive_->accept(session ? session->id() : 0, request);
  }
  void release(ServerSession& session, const metadata::ReleaseMessage& m) override {
    plane_.passive_->release(session.id(), m);
  }
  void sessionClosed(ServerSession& session) override {
    plane_.passive_->sessionClosed(session.id());
  }
  bool holdsEndpoints(const ServerSession& session) override {
    return plane_.passive_ && plane_.passive_->heldBy(session.id()) != 0;
  }

 private:
  ControlPlane& plane_;
};

// The datapath's request ring: woken through its eventfd.
class RequestsHandler final : public EventLoop::Handler {
 public:
  explicit RequestsHandler(ControlPlane& plane) : plane_(plane) {}
  void onEvents(uint32_t) override { plane_.drainRequests(); }

 private:
  ControlPlane& plane_;
};

ControlPlane::ControlPlane(ControlPlaneDeps deps)
    : deps_(std::move(deps)), resources_(deps_.contexts.size()) {}

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(ControlPlaneDeps deps) {
  std::unique_ptr<ControlPlane> p(new ControlPlane(std::move(deps)));
  TENT_RETURN_IF_ERROR(p->init());
  return p;
}

Status ControlPlane::init() {
  const auto& b = deps_.config.bootstrap;
  if (!b.auth.secret_file.empty()) {
    TENT_ASSIGN_OR_RETURN(secret_, Secret::load(b.auth.secret_file));
  }
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(b.listen, &host, &port).withContext("bootstrap.listen"));
  TENT_ASSIGN_OR_RETURN(loop_, EventLoop::create());
  calls_ = std::make_unique<LoopCalls>(*loop_);
  handler_ = std::make_unique<Handler>(*this);
  ServerOptions so;
  so.secret = secret_;
  so.max_connections = b.max_connections;
  so.max_connections_per_source = b.max_connections_per_source;
  so.handshake_timeout_ns = uint64_t{b.handshake_timeout_ms} * 1'000'000;
  so.io_timeout_ns = uint64_t{b.io_timeout_ms} * 1'000'000;
  // An initiator whose control thread stalls keeps its passive endpoints here for as
  // long as our sessions to a slow peer keep theirs (peer_timeout_ms).
  so.idle_timeout_ns = std::max(uint64_t{b.keepalive_ms} * 1'000'000 * 4 + so.io_timeout_ns,
                                uint64_t{b.peer_timeout_ms} * 1'000'000);
  auto server = ControlServer::create(*loop_, host, port, so, *handler_, counters_);
  if (!server.ok()) return server.status().withContext("control listener");
  server_ = std::move(server).value();
  segment_name_ = joinHostPort(b.advertise_host.empty() ? host : b.advertise_host, server_->port());
  TENT_RETURN_IF_ERROR(startFleet(host));
  instance_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
  deps_.local.setIdentity(segment_name_, instance_);
  passive_ = std::make_unique<PassiveEndpoints>(*this);
  endpoints_ = std::make_unique<EndpointManager>(*this);
  peers_ = std::make_unique<PeerSegments>(*this);
  // Our own listener, for the loopback session (a wildcard listen is reached on loopback).
  const bool wildcard = host == "0.0.0.0" || host == "::";
  TENT_ASSIGN_OR_RETURN(
      SocketAddress own,
      resolve(wildcard ? (host == "::" ? "::1" : "127.0.0.1") : host, server_->port()));
  requests_handler_ = std::make_unique<RequestsHandler>(*this);
  TENT_RETURN_IF_ERROR(server_->start());
  TENT_RETURN_IF_ERROR(loop_->add(deps_.requests.wakeFd(), EPOLLIN, requests_handler_.get()));
  device_events_ = std::make_unique<DeviceEvents>(*loop_, deps_.contexts, [this] {
    if (!stopped_.load()) publishLocal();
  });
  TENT_RETURN_IF_ERROR(device_events_->start());
  loop_->start("tent-control");
  // Transfers to LOCAL_SEGMENT_ID bootstrap through our own listener: have that
  // session up before the engine is handed out.
  auto up =
      calls_->run<Result<SegmentId>>(openBudgetNs(), "loopback session to " + segment_name_,
                                     "bootstrap.connect_timeout_ms + io_timeout_ms",
                                     [this, own](Completer<Result<SegmentId>> done) {
                                       peers_->startLocal(segment_name_, own, std::move(done));
                                     });
  if (!up.ok()) return up.status();
  startRegistration();
  return Status::OK();
}

uint64_t ControlPlane::openBudgetNs() const noexcept {
  const auto& b = deps_.config.bootstrap;
  return (uint64_t{b.connect_timeout_ms} + b.io_timeout_ms) * 1'000'000;
}

ControlPlane::~ControlPlane() {
  shutdown();
}

void ControlPlane::cancelWaits() {
  stopped_.store(true);
  if (calls_) calls_->abortAll(Status::Canceled("the engine is closing"));
}

void ControlPlane::shutdown() {
  if (shut_down_.exchange(true) || !loop_) return;
  cancelWaits();  // no call waits on the loop from here on, none starts
  // Everything the loop owns is torn down on the loop, then it stops.
  auto teardown = [this] {
    registry_.reset();
    peers_->closeAll();
    server_->closeAll();
    endpoints_.reset();  // frees every active endpoint: the pollers are detached
    passive_.reset();
    peers_->reclaimAll();
    loop_->remove(deps_.requests.wakeFd());
    if (device_events_) device_events_->stop();
    loop_->stop();
  };
  loop_->post([this, teardown] {
    if (!registry_) return teardown();
    // Our entry is revoked first (peers' watches see us go at once), within one
    // request budget; the teardown runs once, whichever comes first.
    auto once = std::make_shared<bool>(false);
    auto finish = [this, once, teardown] {
      if (*once) return;
      *once = true;
      loop_->post(teardown);
    };
    loop_->addTimer(clock::monotonicNs() + lookupBudgetNs(), finish);
    registry_->stop(finish);
  });
  loop_->join();
}

void ControlPlane::drainRequests() {
  deps_.requests.drainWake();
  rdma::ControlRequest r;
  while (deps_.requests.next(&r)) {
    if (r.connect != nullptr) {
      if (endpoints_) endpoints_->handle(r.connect);
    } else if (!stopped_.load()) {
      peers_->refresh(r.refresh, [](Status) {});  // a request missed the cached descriptor
    }
  }
}

void ControlPlane::armReclaim() {
  if (reclaim_timer_ != 0) return;
  reclaim_timer_ = loop_->addTimer(clock::monotonicNs() + kReclaimStepNs, [this] {
    reclaim_timer_ = 0;
    reclaim();
  });
}

void ControlPlane::reclaim() {
  // First the queued requests: a slot of a record about to be freed may be in the ring.
  drainRequests();
  if (endpoints_) endpoints_->step();
  peers_->reclaim();
  if ((endpoints_ && endpoints_->busy()) || peers_->busy()) armReclaim();
}

Result<SegmentId> ControlPlane::openSegment(const std::string& name) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  if (name == segment_name_) return LOCAL_SEGMENT_ID;
  if (registry_) return openThroughEtcd(name);
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(name, &host, &port));
  // Resolved here, once, on the caller's thread: the loop never blocks on DNS.
  auto address = resolve(host, port);
  if (!address.ok()) return address.status().withContext("open segment " + name);
  return calls_->run<Result<SegmentId>>(
      openBudgetNs(), "open segment " + name, "bootstrap.connect_timeout_ms + io_timeout_ms",
      [this, name, a = *address](Completer<Result<SegmentId>> done) {
        peers_->open(name, a, std::move(done));
      },
      [this, name] { peers_->abandonOpen(name); });
}

Status ControlPlane::closeSegment(SegmentId id) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  return call<Status>("close segment " + std::to_string(id),
                      [this, id] { return peers_->close(id); });
}

Status ControlPlane::refreshSegment(SegmentId id) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  return calls_->run<Status>(uint64_t{deps_.config.bootstrap.io_timeout_ms} * 1'000'000,
                             "descriptor of segment " + std::to_string(id),
                             "bootstrap.io_timeout_ms", [this, id](Completer<Status> done) {
                               peers_->refresh(id, [done](Status s) { done(std::move(s)); });
                             });
}

void ControlPlane::stallForTest(std::shared_future<void> resume, std::function<void()> stalled) {
  loop_->post([resume, stalled = std::move(stalled)] {
    if (stalled) stalled();
    resume.wait();
  });
}

void ControlPlane::localChanged() {
  if (stopped_.load()) return;
  // A Timeout here (a stalled loop) leaves the task queued: it still runs.
  Status s = call<Status>("publish the local descriptor", [this] {
    publishLocal();
    return Status::OK();
  });
  if (!s.ok()) TENT_WARN(kEngine, "%s", s.toString().c_str());
}

void ControlPlane::publishLocal() {
  peers_->localChanged();
  if (registry_) registry_->updateOwn(deps_.local.encodedDescriptor(metadata::kDescriptorVersion));
  server_->pushDescriptor([this](uint16_t v) { return deps_.local.encodedDescriptor(v); });
}

void ControlPlane::fillStats(EngineStats* out) const {
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  out->resources.endpoints_live = get(resources_.endpoints_live);
  out->resources.endpoints_retired = get(resources_.endpoints_retired);
  out->resources.reconnects = get(resources_.reconnects);
  out->resources.evictions = get(resources_.evictions);
  out->resources.qps_live = 0;
  for (size_t c = 0; c < deps_.contexts.size(); ++c) {
    const uint64_t n = get(resources_.qps[c]);
    out->resources.qps_per_device[deps_.contexts[c]->name()] = n;
    out->resources.qps_live += n;
  }
  // Connections first, then the loopback ends among them: the loopback count rises
  // after and falls before its connection's, so only a session opening in between
  // can read one more; peers never read below 0.
  const uint64_t connections = get(counters_.connections_open);
  const uint64_t loopback = get(counters_.loopback_connections_open);
  out->control.connections_open = connections > loopback ? connections - loopback : 0;
  out->control.loopback_connections_open = loopback;
  out->control.bytes_received = get(counters_.bytes_received);
  out->control.bytes_sent = get(counters_.bytes_sent);
  out->control.frames_received = get(counters_.frames_received);
  out->control.frames_sent = get(counters_.frames_sent);
  out->control.connections_refused = get(counters_.connections_refused);
  out->control.auth_failures = get(counters_.auth_failures);
  out->control.frames_rejected = get(counters_.frames_rejected);
  out->control.deadline_closures = get(counters_.deadline_closures);
  out->control.sessions_evicted = get(counters_.sessions_evicted);
  out->control.source_cap_hits = get(counters_.source_cap_hits);
  fillFleetStats(out);
  if (device_events_) {
    const DeviceEventCounters& ev = device_events_->counters();
    out->device_events.fatal = get(ev.fatal);
    out->device_events.port_down = get(ev.port_down);
    out->device_events.port_up = get(ev.port_up);
    out->device_events.address_changes = get(ev.address_changes);
  }
  for (const rdma::RdmaContext* ctx : deps_.contexts)
    out->device_events.devices_down += ctx->down();
}

}  // namespace tent::control
