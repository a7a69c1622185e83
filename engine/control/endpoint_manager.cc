#include "control/endpoint_manager.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/clock.h"
#include "base/ebr.h"
#include "control/control_plane.h"
#include "control/peer_segments.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "tent/log.h"
#include "wire/bootstrap.h"
#include "wire/bootstrap_notify.h"

namespace tent::control {

using rdma::EndpointSlot;
using rdma::RdmaEndPoint;
using rdma::SlotState;

namespace {
void setState(EndpointSlot& slot, SlotState s) {
  slot.state.store(static_cast<uint8_t>(s), std::memory_order_release);
}
}  // namespace

EndpointManager::EndpointManager(ControlPlane& plane)
    : plane_(plane),
      sieve_(plane.deps().contexts.size()),
      per_owner_(plane.deps().contexts.size()),
      retiring_(plane.deps().contexts.size()),
      per_context_(plane.deps().contexts.size(), 0),
      rng_(std::random_device{}()) {
  const uint32_t n = static_cast<uint32_t>(plane.deps().background_pollers.size());
  per_poller_cap_ = (plane.config().endpoints.max_per_context + n - 1) / n;
}

EndpointManager::~EndpointManager() {
  std::vector<RdmaEndPoint*> eps;
  for (auto& [ep, t] : all_) eps.push_back(ep);
  for (RdmaEndPoint* ep : eps) free(ep);
}

EndpointSlot* EndpointManager::slotOf(const RdmaEndPoint& ep) noexcept {
  rdma::SegmentRecord* rec = plane_.deps().segments.find(ep.segment());
  return rec ? rec->slot(ep.context().index(), ep.peerDevice()) : nullptr;
}

void EndpointManager::handle(EndpointSlot* slot) {
  rdma::SegmentRecord* rec = slot->record;
  if (plane_.deps().segments.find(rec->id) != rec) return;  // a record being retired
  if (RdmaEndPoint* ep = slot->ready.load(std::memory_order_acquire)) {
    if (ep->state() == rdma::EndpointState::kDestroying) retire(*slot, ep, false);
    return;
  }
  switch (slot->slotState()) {
    case SlotState::kConnecting:
      return;
    case SlotState::kBackoff:
      if (clock::engineNowNs() < slot->retry_at_ns.load(std::memory_order_acquire)) return;
      [[fallthrough]];
    case SlotState::kIdle:
      return connect(*slot);
  }
}

void EndpointManager::connect(EndpointSlot& slot) {
  rdma::SegmentRecord& rec = *slot.record;
  if (!rec.up.load(std::memory_order_acquire)) return;  // lookups fail while it is down
  ClientSession* session = plane_.peers().session(rec.id);
  auto peer = rec.peer();
  if (session == nullptr || !peer)
    return backoff(slot,
                   Status::Unavailable("no control session to segment " + std::to_string(rec.id)));
  if (!admit(slot)) return;
  const auto& deps = plane_.deps();
  const auto& cfg = plane_.config();
  rdma::RdmaContext& ctx = *deps.contexts[slot.context];
  auto* ep = new RdmaEndPoint(ctx, rec.id, slot.peer_device, slot.next_generation++);
  rdma::EndpointQpShape shape;
  shape.owner_poller = slot.owner;
  shape.rail_poller = deps.rail_poller_of_context[slot.context];
  shape.data_qps = cfg.workers.qps_per_endpoint;
  shape.qp_depth = cfg.workers.qp_depth;
  shape.direct_depth = deps.direct_enabled ? cfg.direct.qp_depth : 0;
  ep->setTraffic(rdma::trafficOf(cfg.qos));
  track(ep, slot.owner);
  Status s = ep->createActiveQps(shape);
  countQps(ep);
  if (!s.ok()) {
    free(ep);
    return backoff(slot, s.withContext("endpoint " + ctx.name() + " -> " + peer->name));
  }
  metadata::BootstrapMessage msg;
  msg.initiator_segment = plane_.segmentName();
  msg.initiator_instance = plane_.instance();
  msg.local_device = ctx.name();
  msg.peer_device = peer->descriptor.devices[slot.peer_device].name;
  ep->fillBootstrap(&msg);
  metadata::putNotifyExtension(&msg, ep->notifyOffer());
  setState(slot, SlotState::kConnecting);
  slot.connecting = ep;
  const Ticket t{rec.id, slot.context, slot.peer_device, ep};
  // The newest bootstrap both read. Without a direct QP, a v2 peer gets what it got
  // before v3: v1 (no direct_qp_num); v3 says "none" with direct_qp_num = 0.
  uint16_t version = metadata::bootstrapVersionFor(peer->descriptor.max_bootstrap_version);
  if (!deps.direct_enabled && version == metadata::kBootstrapVersionV2)
    version = metadata::kBootstrapVersionV1;
  session->request(metadata::FrameType::kBootstrap, metadata::encodeBootstrap(msg, version),
                   [this, t](Result<ClientSession::Reply> r) { onReply(t, std::move(r)); });
}

bool EndpointManager::room(uint32_t c, uint32_t owner) const {
  auto it = per_owner_[c].find(owner);
  const uint32_t mine = it == per_owner_[c].end() ? 0 : it->second;
  return mine < per_poller_cap_ && per_context_[c] < plane_.config().endpoints.max_per_context;
}

bool EndpointManager::admit(EndpointSlot& slot) {
  const uint32_t c = slot.context;
  if (room(c, slot.owner)) return true;
  auto wait = [&] {  // lookups wait; step() connects it once an endpoint is freed
    setState(slot, SlotState::kConnecting);
    waiting_.push_back(&slot);
    plane_.armReclaim();
    return false;
  };
  // An endpoint of this poller is on its way out already: its room comes shortly.
  if (retiring_[c][slot.owner] > 0) return wait();
  if (RdmaEndPoint* victim = sieveVictim(c, slot.owner)) {
    if (EndpointSlot* vs = slotOf(*victim)) retire(*vs, victim, /*evicted=*/true);
    return wait();
  }
  backoff(slot, Status::ResourceExhausted(
                    "device " + plane_.deps().contexts[c]->name() + ": all " +
                    std::to_string(per_poller_cap_) +
                    " endpoints of its background poller are busy (endpoints.max_per_context)"));
  return false;
}

// SIEVE: the hand walks from the oldest entry; a visited endpoint loses its mark and
// stays, the first unvisited one with nothing in flight is evicted.
RdmaEndPoint* EndpointManager::sieveVictim(uint32_t context, uint32_t owner) {
  auto it = sieve_[context].find(owner);
  if (it == sieve_[context].end() || it->second.list.empty()) return nullptr;
  Sieve& s = it->second;
  if (!s.hand_valid) {
    s.hand = s.list.begin();
    s.hand_valid = true;
  }
  for (size_t steps = 0; steps < 2 * s.list.size(); ++steps) {
    if (s.hand == s.list.end()) s.hand = s.list.begin();
    RdmaEndPoint* ep = *s.hand;
    ++s.hand;
    if (!ep->takeVisited() && ep->drained()) return ep;
  }
  return nullptr;
}

void EndpointManager::onReply(const Ticket& t, Result<ClientSession::Reply> reply) {
  rdma::SegmentRecord* rec = plane_.deps().segments.find(t.segment);
  EndpointSlot* slot = rec ? rec->slot(t.context, t.peer_device) : nullptr;
  if (slot == nullptr || slot->connecting != t.ep) return free(t.ep);  // record replaced or closed
  slot->connecting = nullptr;
  RdmaEndPoint* ep = t.ep;
  Status s = reply.ok() ? Status::OK() : reply.status();
  Result<metadata::BootstrapMessage> remote = Status::Internal("no reply");
  if (s.ok() && reply->type != metadata::FrameType::kBootstrapReply)
    s = Status::InvalidArgument("peer answered BOOTSTRAP with " +
                                std::string(metadata::frameTypeName(reply->type)));
  if (s.ok()) {
    remote = metadata::parseBootstrap(reply->payload);
    if (!remote.ok()) s = remote.status();
  }
  auto peer = rec->peer();
  if (s.ok() && peer && remote->initiator_instance != peer->descriptor.instance)
    s = Status::Unavailable("peer restarted (new instance) while connecting");
  if (s.ok()) s = ep->connect(*remote);
  if (s.ok()) {
    // A peer without notifications leaves the link unsupported (NotSupported on a
    // notification) and drops our notify QP; transfers are not affected.
    auto offer = metadata::notifyExtensionOf(*remote);
    s = offer.ok() ? ep->connectNotify(*offer, remote->port) : offer.status();
  }
  countQps(ep);  // a peer without a direct QP makes us drop ours
  if (s.ok() && !ep->markReady()) s = Status::Canceled("endpoint reset while connecting");
  if (!s.ok()) {
    free(ep);
    return backoff(*slot, s);
  }
  publish(*slot, ep);
}

void EndpointManager::publish(EndpointSlot& slot, RdmaEndPoint* ep) {
  setState(slot, SlotState::kIdle);
  slot.ready.store(ep, std::memory_order_release);
  if (slot.ever_ready) plane_.resources().reconnects.fetch_add(1, std::memory_order_relaxed);
  slot.ever_ready = true;
  Sieve& s = sieve_[slot.context][slot.owner];
  s.list.push_back(ep);
  in_sieve_[ep] = std::prev(s.list.end());
  TENT_DEBUG(kEngine, "endpoint %s -> segment %lu device %u ready (generation %lu, direct %s)",
             ep->context().name().c_str(), static_cast<unsigned long>(slot.record->id),
             slot.peer_device, static_cast<unsigned long>(ep->generation()),
             ep->directQp() ? "yes" : "no");
}

void EndpointManager::retire(EndpointSlot& slot, RdmaEndPoint* ep, bool evicted) {
  if (slot.ready.load(std::memory_order_acquire) != ep) return;
  slot.ready.store(nullptr, std::memory_order_release);
  if (auto it = in_sieve_.find(ep); it != in_sieve_.end()) {
    Sieve& s = sieve_[slot.context][slot.owner];
    if (s.hand_valid && s.hand == it->second) ++s.hand;
    s.list.erase(it->second);
    in_sieve_.erase(it);
  }
  // An endpoint that never carried a WR successfully failed as a connect does.
  if (ep->proven() || evicted) {
    slot.failures = 0;
    setState(slot, SlotState::kIdle);
  } else {
    backoff(slot, Status::Unavailable("endpoint failed before its first transfer"));
  }
  ep->quiesce();
  if (ClientSession* session = plane_.peers().session(slot.record->id)) {
    metadata::ReleaseMessage m;
    m.initiator_device = ep->context().name();
    if (auto peer = slot.record->peer())
      m.target_device = peer->descriptor.devices[slot.peer_device].name;
    m.generation = ep->generation();
    session->notify(metadata::FrameType::kRelease, metadata::encodeRelease(m));
  }
  auto& r = plane_.resources();
  all_[ep].retired = true;
  ++retiring_[slot.context][all_[ep].owner];
  r.endpoints_live.fetch_sub(1, std::memory_order_relaxed);
  r.endpoints_retired.fetch_add(1, std::memory_order_relaxed);
  if (evicted) r.evictions.fetch_add(1, std::memory_order_relaxed);
  // The epoch after the unpublish: readers that may still post on `ep` leave it behind.
  draining_.push_back({ep, clock::engineNowNs(), ebr::retire(), false});
  plane_.armReclaim();
}

void EndpointManager::retireAll(rdma::SegmentRecord& rec) {
  std::erase_if(waiting_, [&](EndpointSlot* s) { return s->record == &rec; });
  for (size_t i = 0; i < rec.slotCount(); ++i) {
    EndpointSlot& slot = rec.slots[i];
    if (RdmaEndPoint* ep = slot.ready.load(std::memory_order_acquire)) {
      ep->beginReset();
      retire(slot, ep, false);
    }
    if (slot.connecting) {  // its reply finds the slot abandoned and frees it
      slot.connecting = nullptr;
      setState(slot, SlotState::kIdle);
    }
  }
}

void EndpointManager::backoff(EndpointSlot& slot, const Status& why) {
  const auto& e = plane_.config().endpoints;
  const uint64_t delay =
      backoffDelayNs(slot.failures++, e.reconnect_initial_ms, e.reconnect_max_ms, rng_);
  slot.retry_at_ns.store(clock::engineNowNs() + delay, std::memory_order_release);
  setState(slot, SlotState::kBackoff);
  if (slot.failures == 1) {
    TENT_WARN(kEngine, "connect %s -> segment %lu device %u: %s (retrying with backoff)",
              plane_.deps().contexts[slot.context]->name().c_str(),
              static_cast<unsigned long>(slot.record->id), slot.peer_device,
              why.toString().c_str());
  }
}

void EndpointManager::track(RdmaEndPoint* ep, uint32_t owner) {
  all_[ep] = Tracked{owner};
  const uint32_t c = ep->context().index();
  ++per_context_[c];
  ++per_owner_[c][owner];
  plane_.resources().endpoints_live.fetch_add(1, std::memory_order_relaxed);
}

void EndpointManager::countQps(RdmaEndPoint* ep) {
  Tracked& t = all_[ep];
  auto& counter = plane_.resources().qps[ep->context().index()];
  counter.fetch_add(ep->qpCount(), std::memory_order_relaxed);
  counter.fetch_sub(t.qps, std::memory_order_relaxed);
  t.qps = ep->qpCount();
}

void EndpointManager::free(RdmaEndPoint* ep) {
  auto it = all_.find(ep);
  if (it == all_.end()) return;
  const Tracked t = it->second;
  all_.erase(it);
  const uint32_t c = ep->context().index();
  --per_context_[c];
  --per_owner_[c][t.owner];
  auto& r = plane_.resources();
  if (t.retired) --retiring_[c][t.owner];
  (t.retired ? r.endpoints_retired : r.endpoints_live).fetch_sub(1, std::memory_order_relaxed);
  r.qps[c].fetch_sub(t.qps, std::memory_order_relaxed);
  in_sieve_.erase(ep);
  delete ep;
}

void EndpointManager::step() {
  steps_.fetch_add(1, std::memory_order_acq_rel);
  const uint64_t now = clock::engineNowNs();
  const uint64_t warn_ns = uint64_t{plane_.config().timeouts.endpoint_destroy_ms} * 1'000'000;
  std::erase_if(draining_, [&](Draining& d) {
    // A poller that looked the endpoint up before its unpublish can still be inside
    // postSend() (copying the payload): its WR is not outstanding yet, so drained()
    // holds too early, and a QP destroyed after its grace would lose that WR's
    // completion - a task pending forever. Once every such reader has left its
    // section no post can begin, and drained() is final.
    if (ebr::quiescentSince(d.unpublished_epoch) && d.ep->drained()) {
      retired_.emplace_back(d.ep, ebr::retire());
      return true;
    }
    if (!d.warned && now - d.since_ns > warn_ns) {
      d.warned = true;
      TENT_WARN(kEngine,
                "endpoint %s -> segment %lu: WRs still outstanding %lu ms after it was "
                "retired (is a poller stuck?); it is freed once they complete",
                d.ep->context().name().c_str(), static_cast<unsigned long>(d.ep->segment()),
                static_cast<unsigned long>((now - d.since_ns) / 1'000'000));
    }
    return false;
  });
  std::erase_if(retired_, [&](auto& r) {
    if (!ebr::quiescentSince(r.second)) return false;
    free(r.first);
    return true;
  });
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (EndpointSlot* slot : waiting) {
    if (!room(slot->context, slot->owner) && retiring_[slot->context][slot->owner] > 0) {
      waiting_.push_back(slot);  // still being freed
      continue;
    }
    setState(*slot, SlotState::kIdle);
    connect(*slot);
  }
}

std::string EndpointManager::describe() {
  std::string out;
  for (const auto& [ep, t] : all_) {
    rdma::SegmentRecord* rec = plane_.deps().segments.find(ep->segment());
    EndpointSlot* slot = rec ? rec->slot(ep->context().index(), ep->peerDevice()) : nullptr;
    const char* role = slot == nullptr            ? "no published record"
                       : slot->ready.load() == ep ? "ready in its slot"
                       : slot->connecting == ep   ? "connecting in its slot"
                                                  : "not in its slot";
    char line[256];
    std::snprintf(line, sizeof line,
                  "endpoint %s -> segment %lu device %u generation %lu: %s, %s, %u QPs, %s\n",
                  ep->context().name().c_str(), static_cast<unsigned long>(ep->segment()),
                  ep->peerDevice(), static_cast<unsigned long>(ep->generation()),
                  std::string(rdma::toString(ep->state())).c_str(), t.retired ? "retired" : "live",
                  t.qps, role);
    out += line;
  }
  return out;
}

}  // namespace tent::control
