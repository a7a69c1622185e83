#include "control/control_plane.h"

#include <chrono>
#include <random>

#include "net/address.h"
#include "control/endpoint_manager.h"
#include "control/passive_endpoints.h"
#include "control/peer_segments.h"
#include "model/control_requests.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "model/segment_table.h"
#include "tent/log.h"

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
  handler_ = std::make_unique<Handler>(*this);
  ServerOptions so;
  so.secret = secret_;
  so.max_connections = b.max_connections;
  so.handshake_timeout_ns = uint64_t{b.handshake_timeout_ms} * 1'000'000;
  so.io_timeout_ns = uint64_t{b.io_timeout_ms} * 1'000'000;
  so.idle_timeout_ns = uint64_t{b.keepalive_ms} * 1'000'000 * 4 + so.io_timeout_ns;
  auto server = ControlServer::create(*loop_, host, port, so, *handler_, counters_);
  if (!server.ok()) return server.status().withContext("control listener");
  server_ = std::move(server).value();
  segment_name_ = joinHostPort(b.advertise_host.empty() ? host : b.advertise_host, server_->port());
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
  loop_->start("tent-control");
  // Transfers to LOCAL_SEGMENT_ID bootstrap through our own listener: have that
  // session up before the engine is handed out.
  auto promise = std::make_shared<std::promise<Result<SegmentId>>>();
  auto future = promise->get_future();
  loop_->post([this, own, promise] {
    peers_->startLocal(segment_name_, own,
                       [promise](Result<SegmentId> r) { promise->set_value(std::move(r)); });
  });
  auto up = future.get();
  return up.ok() ? Status::OK() : up.status();
}

ControlPlane::~ControlPlane() {
  shutdown();
}

void ControlPlane::shutdown() {
  if (stopped_.exchange(true) || !loop_) return;
  // Everything the loop owns is torn down on the loop, then it stops.
  loop_->post([this] {
    peers_->closeAll();
    server_->closeAll();
    endpoints_.reset();  // frees every active endpoint: the pollers are detached
    passive_.reset();
    peers_->reclaimAll();
    loop_->remove(deps_.requests.wakeFd());
    loop_->stop();
  });
  loop_->join();
}

void ControlPlane::drainRequests() {
  deps_.requests.drainWake();
  while (rdma::EndpointSlot* slot = deps_.requests.next()) {
    if (endpoints_) endpoints_->handle(slot);
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
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(name, &host, &port));
  // Resolved here, once, on the caller's thread: the loop never blocks on DNS.
  auto address = resolve(host, port);
  if (!address.ok()) return address.status().withContext("open segment " + name);
  auto promise = std::make_shared<std::promise<Result<SegmentId>>>();
  auto future = promise->get_future();
  loop_->post([this, name, a = *address, promise] {
    peers_->open(name, a, [promise](Result<SegmentId> r) { promise->set_value(std::move(r)); });
  });
  return future.get();
}

Status ControlPlane::closeSegment(SegmentId id) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  return call<Status>([this, id] { return peers_->close(id); });
}

Status ControlPlane::refreshSegment(SegmentId id) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  loop_->post([this, id, promise] {
    peers_->refresh(id, [promise](Status s) { promise->set_value(std::move(s)); });
  });
  return future.get();
}

void ControlPlane::refreshSoon(SegmentId id) noexcept {
  if (stopped_.load()) return;
  const uint64_t now = clock::monotonicNs();
  const uint64_t gap = uint64_t{deps_.config.bootstrap.descriptor_refresh_ms} * 1'000'000;
  uint64_t last = last_refresh_ns_.load(std::memory_order_relaxed);
  if (now - last < gap || !last_refresh_ns_.compare_exchange_strong(last, now)) return;
  loop_->post([this, id] { peers_->refresh(id, [](Status) {}); });
}

void ControlPlane::localChanged() {
  if (stopped_.load()) return;
  call<int>([this] {
    peers_->localChanged();
    server_->pushDescriptor([this](uint16_t v) { return deps_.local.encodedDescriptor(v); });
    return 0;
  });
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
  out->control.connections_open = get(counters_.connections_open);
  out->control.connections_refused = get(counters_.connections_refused);
  out->control.auth_failures = get(counters_.auth_failures);
  out->control.frames_rejected = get(counters_.frames_rejected);
  out->control.deadline_closures = get(counters_.deadline_closures);
}

}  // namespace tent::control
