// The control plane's side of fleet metadata (docs/engine.md, "Fleet metadata"):
// registration in etcd, openSegment through etcd, the watch's peer events, the
// metadata blob. Everything that touches the registry or the peers runs on the loop.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>

#include "base/clock.h"
#include "control/control_plane.h"
#include "control/peer_segments.h"
#include "fleet/registry.h"
#include "model/local_memory.h"
#include "net/address.h"
#include "tent/log.h"
#include "wire/segment_descriptor.h"

namespace tent::control {

namespace {

// An entry's address is numeric (startFleet publishes it so): resolved on the loop
// without a DNS query.
Result<SocketAddress> numericAddress(const std::string& host_port) {
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(host_port, &host, &port));
  return resolveNumeric(host, port);
}

}  // namespace

Status ControlPlane::startFleet(const std::string& host) {
  fleet_counters_ = std::make_unique<fleet::FleetCounters>();
  const auto& md = deps_.config.metadata;
  const auto& b = deps_.config.bootstrap;
  // The address peers dial, numeric so that their loops never wait on DNS.
  const std::string shown = b.advertise_host.empty() ? host : b.advertise_host;
  auto resolved = resolve(shown, server_->port());
  const bool etcd = md.backend == config::MetadataBackend::kEtcd;
  if (!resolved.ok() && etcd)
    return resolved.status().withContext("bootstrap.advertise_host (published in etcd)");
  if (!resolved.ok()) {  // p2p: only a blob carries it, and its reader resolves it
    advertised_address_ = joinHostPort(shown, server_->port());
    return Status::OK();
  }
  const SocketAddress& a = *resolved;
  char text[64] = {};
  std::string numeric;
  if (a.get()->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a.get())->sin6_addr, text,
              sizeof(text));
    numeric = joinHostPort(text, server_->port());
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a.get())->sin_addr, text,
              sizeof(text));
    numeric = joinHostPort(text, server_->port());
  }
  advertised_address_ = numeric;
  if (!etcd) return Status::OK();
  if (!md.name.empty()) segment_name_ = md.name;
  TENT_ASSIGN_OR_RETURN(registry_, fleet::Registry::create(*loop_, md, secret_, *fleet_counters_));
  return Status::OK();
}

// After the loop runs: registration is not waited for (etcd may be away at start;
// the loop keeps trying, and stats().fleet.store_up says when it is registered).
void ControlPlane::startRegistration() {
  if (!registry_) return;
  fleet::Entry own;
  own.name = segment_name_;
  own.instance = instance_;
  own.address = advertised_address_;
  loop_->post([this, own = std::move(own)]() mutable {
    own.descriptor = deps_.local.encodedDescriptor(metadata::kDescriptorVersion);
    fleet::Registry::PeerEvents events;
    events.changed = [this](const fleet::Entry& e) { onPeerEntry(e); };
    events.removed = [this](const std::string& name) {
      if (peers_->expire(name)) fleet::FleetCounters::bump(fleet_counters_->peers_expired);
    };
    registry_->start(std::move(own), std::move(events));
  });
}

void ControlPlane::onPeerEntry(const fleet::Entry& e) {
  auto address = numericAddress(e.address);
  if (!address.ok()) {
    TENT_WARN(kEngine, "fleet: entry of %s: %s", e.name.c_str(),
              address.status().toString().c_str());
    return;
  }
  if (peers_->readdress(e.name, *address, e.instance, e.descriptor))
    fleet::FleetCounters::bump(fleet_counters_->peers_readdressed);
}

uint64_t ControlPlane::lookupBudgetNs() const noexcept {
  const auto& e = deps_.config.metadata.etcd;
  return uint64_t{e.request_timeout_ms} * 1'000'000 * std::max<size_t>(e.endpoints.size(), 1);
}

Result<SegmentId> ControlPlane::openThroughEtcd(const std::string& name) {
  return calls_->run<Result<SegmentId>>(
      lookupBudgetNs() + openBudgetNs(), "open segment " + name,
      "metadata.etcd.request_timeout_ms x members + bootstrap.connect_timeout_ms + "
      "io_timeout_ms",
      [this, name](Completer<Result<SegmentId>> done) {
        if (auto id = peers_->upId(name)) return done(*id);  // cached: no etcd round trip
        registry_->lookup(name, [this, name, done](Result<fleet::Entry> e) {
          if (!e.ok()) return done(e.status());
          auto address = numericAddress(e->address);
          if (!address.ok()) return done(address.status().withContext("entry of " + name));
          peers_->openKnown(name, *address, e->instance, std::move(e->descriptor), done);
        });
      },
      [this, name] { peers_->abandonOpen(name); });
}

Result<std::string> ControlPlane::localMetadata() {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  return call<Result<std::string>>("local metadata", [this]() -> Result<std::string> {
    fleet::Entry own;
    own.name = segment_name_;
    own.instance = instance_;
    own.address = advertised_address_;
    own.descriptor = deps_.local.encodedDescriptor(metadata::kDescriptorVersion);
    return fleet::encodeBlob(own, secret_);
  });
}

Result<SegmentId> ControlPlane::addRemoteMetadata(std::string_view blob) {
  if (stopped_.load()) return Status::FailedPrecondition("engine is closing");
  auto entry = fleet::decodeBlob(blob, secret_);
  if (!entry.ok()) {
    if (entry.status().code() == StatusCode::kPermissionDenied)
      fleet::FleetCounters::bump(fleet_counters_->entries_refused);
    return entry.status().withContext("addRemoteMetadata");
  }
  if (entry->name == segment_name_ && entry->instance == instance_) return LOCAL_SEGMENT_ID;
  std::string host;
  uint16_t port = 0;
  TENT_RETURN_IF_ERROR(splitHostPort(entry->address, &host, &port));
  auto address = resolve(host, port);  // on the caller's thread: the loop never waits on DNS
  if (!address.ok()) return address.status().withContext("addRemoteMetadata " + entry->name);
  const std::string name = entry->name;
  auto id = calls_->run<Result<SegmentId>>(
      openBudgetNs(), "open segment " + name + " from its metadata",
      "bootstrap.connect_timeout_ms + io_timeout_ms",
      [this, e = std::move(entry).value(),
       a = *address](Completer<Result<SegmentId>> done) mutable {
        peers_->openKnown(e.name, a, e.instance, std::move(e.descriptor), std::move(done));
      },
      [this, name] { peers_->abandonOpen(name); });
  if (id.ok()) fleet::FleetCounters::bump(fleet_counters_->blobs_added);
  return id;
}

void ControlPlane::fillFleetStats(EngineStats* out) const {
  const fleet::FleetCounters& c = *fleet_counters_;
  auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  FleetStats& f = out->fleet;
  f.backend = std::string(config::toString(deps_.config.metadata.backend));
  f.store_up = c.store_up.load(std::memory_order_relaxed);
  f.registrations = get(c.registrations);
  f.lease_renewals = get(c.lease_renewals);
  f.store_errors = get(c.store_errors);
  f.lookups = get(c.lookups);
  f.lookups_refused_away = get(c.lookups_refused_away);
  f.entries_refused = get(c.entries_refused);
  f.watch_events = get(c.watch_events);
  f.watch_restarts = get(c.watch_restarts);
  f.peers_readdressed = get(c.peers_readdressed);
  f.peers_expired = get(c.peers_expired);
  f.blobs_added = get(c.blobs_added);
  out->control.descriptor_fetches = get(counters_.descriptor_fetches);
}

}  // namespace tent::control
