#include "control/peer_segments.h"

#include "base/clock.h"
#include "base/ebr.h"
#include "control/control_plane.h"
#include "control/endpoint_manager.h"
#include "model/local_memory.h"
#include "model/rdma_context.h"
#include "tent/log.h"
#include "wire/segment_descriptor.h"

namespace tent::control {

uint64_t backoffDelayNs(uint32_t failures, uint32_t initial_ms, uint32_t max_ms,
                        std::mt19937_64& rng) noexcept {
  uint64_t d = uint64_t{initial_ms} * 1'000'000;
  const uint64_t cap = uint64_t{max_ms} * 1'000'000;
  for (uint32_t i = 0; i < failures && d < cap; ++i) d *= 2;
  if (d > cap) d = cap;
  return d / 2 + rng() % (d / 2 + 1);  // jitter: peers that failed together spread out
}

struct PeerSegments::Peer {
  SegmentId id = 0;
  std::string name;
  SocketAddress address;
  bool local = false;
  bool ever_up = false;
  bool closing = false;
  uint32_t failures = 0;
  uint64_t reconnect_timer = 0;
  uint64_t open_deadline_ns = 0;  // a first open retries transient refusals until then
  uint64_t instance = 0;           // from an etcd entry or a blob; 0: not known
  std::vector<uint8_t> known_descriptor;  // from an entry or a blob: not fetched
  bool parked = false;             // its entry is gone: no reconnect until it is back
  std::unique_ptr<SessionListener> listener;
  std::unique_ptr<ClientSession> session;
  rdma::SegmentRecord* record = nullptr;
  std::vector<OpenDone> openers;

  // Whatever path removes a segment, the callers waiting to open it get an answer: a
  // waiter whose completion is dropped hears nothing until its own deadline (before
  // the deadlines existed it waited forever, its own reference keeping the promise
  // from ever breaking). drop() answers them first; this catches any other path.
  ~Peer() {
    for (auto& done : openers) done(Status::Canceled("segment " + name + " was closed"));
  }
};

class PeerSegments::SessionListener final : public ClientSession::Listener {
 public:
  SessionListener(PeerSegments& owner, SegmentId id) : owner_(owner), id_(id) {}
  void onSessionUp(ClientSession&, std::vector<uint8_t> d) override {
    if (Peer* p = owner_.find(id_)) owner_.onUp(*p, std::move(d));
  }
  void onDescriptorUpdate(ClientSession&, std::vector<uint8_t> d) override {
    if (Peer* p = owner_.find(id_)) owner_.onUpdate(*p, std::move(d));
  }
  void onSessionDown(ClientSession&, const Status& why) override {
    if (Peer* p = owner_.find(id_)) owner_.onDown(*p, why);
  }
  void onSessionSlow(ClientSession&, bool slow) override {
    if (Peer* p = owner_.find(id_)) owner_.onSlow(*p, slow);
  }

 private:
  PeerSegments& owner_;
  SegmentId id_;
};

PeerSegments::PeerSegments(ControlPlane& plane)
    : plane_(plane), next_owner_(plane.deps().contexts.size(), 0), rng_(std::random_device{}()) {}

PeerSegments::~PeerSegments() {
  closeAll();
}

PeerSegments::Peer* PeerSegments::find(SegmentId id) noexcept {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second.get();
}

ClientSession* PeerSegments::session(SegmentId id) noexcept {
  Peer* p = find(id);
  return (p && p->session && p->session->up()) ? p->session.get() : nullptr;
}

rdma::SegmentRecord* PeerSegments::makeRecord(SegmentId id, uint32_t peer_devices) {
  const auto& deps = plane_.deps();
  auto* rec =
      new rdma::SegmentRecord(id, static_cast<uint32_t>(deps.contexts.size()), peer_devices);
  const size_t n = deps.background_pollers.size();
  for (uint32_t c = 0; c < rec->contexts; ++c)
    for (uint32_t d = 0; d < peer_devices; ++d)
      rec->slot(c, d)->owner = deps.background_pollers[next_owner_[c]++ % n];
  return rec;
}

// A record that replaces another (the session came back, the peer restarted) keeps
// what its slots learnt: generations go on, and a connect counts as a reconnect.
void PeerSegments::inheritSlots(const rdma::SegmentRecord& from, rdma::SegmentRecord& to) {
  if (from.contexts != to.contexts || from.peer_devices != to.peer_devices) return;
  for (size_t i = 0; i < to.slotCount(); ++i) {
    to.slots[i].ever_ready = from.slots[i].ever_ready;
    to.slots[i].next_generation = from.slots[i].next_generation;
    to.slots[i].owner = from.slots[i].owner;
  }
}

void PeerSegments::setView(rdma::SegmentRecord& rec,
                           std::shared_ptr<const rdma::PeerSegment> peer) {
  auto* view = new rdma::SegmentView{std::move(peer)};
  const rdma::SegmentView* old = rec.view.exchange(view, std::memory_order_acq_rel);
  if (old) {
    retired_views_.emplace_back(old, ebr::retire());
    plane_.armReclaim();
  }
}

void PeerSegments::retireRecord(rdma::SegmentRecord* rec) {
  rec->up.store(false, std::memory_order_release);
  plane_.endpoints().retireAll(*rec);
  retired_records_.emplace_back(rec, ebr::retire());
  plane_.armReclaim();
}

void PeerSegments::reclaim() {
  std::erase_if(retired_views_, [](auto& v) {
    if (!ebr::quiescentSince(v.second)) return false;
    delete v.first;
    return true;
  });
  std::erase_if(retired_records_, [](auto& r) {
    if (!ebr::quiescentSince(r.second)) return false;
    if (const rdma::SegmentView* v = r.first->view.load()) delete v;
    delete r.first;
    return true;
  });
}

void PeerSegments::reclaimAll() {
  for (auto& v : retired_views_) delete v.first;
  retired_views_.clear();
  for (auto& r : retired_records_) {
    if (const rdma::SegmentView* v = r.first->view.load()) delete v;
    delete r.first;
  }
  retired_records_.clear();
}

void PeerSegments::startLocal(const std::string& own_name, const SocketAddress& own_address,
                              OpenDone up) {
  auto p = std::make_unique<Peer>();
  p->id = LOCAL_SEGMENT_ID;
  p->name = own_name;
  p->address = own_address;
  p->local = true;
  p->record = makeRecord(LOCAL_SEGMENT_ID, static_cast<uint32_t>(plane_.deps().contexts.size()));
  p->openers.push_back(std::move(up));
  Peer& ref = *p;
  peers_[LOCAL_SEGMENT_ID] = std::move(p);
  installLocal();
  plane_.deps().segments.publish(ref.record);
  connect(ref);
}

void PeerSegments::installLocal() {
  Peer* p = find(LOCAL_SEGMENT_ID);
  if (p == nullptr) return;
  std::vector<std::string> names;
  for (auto* ctx : plane_.deps().contexts) names.push_back(ctx->name());
  setView(*p->record,
          rdma::makePeerSegment(LOCAL_SEGMENT_ID, true, plane_.deps().local.descriptor(), names,
                                clock::engineNowNs()));
}

void PeerSegments::localChanged() {
  installLocal();
}

void PeerSegments::open(const std::string& name, const SocketAddress& address, OpenDone done,
                        uint64_t instance, std::vector<uint8_t> descriptor) {
  if (auto known = by_name_.find(name); known != by_name_.end()) {
    Peer* p = find(known->second);
    if (p->record && p->record->up.load(std::memory_order_acquire)) return done(p->id);
    // Opened before but its session is down: the caller wants it now, so the next
    // attempt starts at once instead of after the backoff delay.
    p->openers.push_back(std::move(done));
    if (p->reconnect_timer) {
      plane_.loop().cancelTimer(p->reconnect_timer);
      connect(*p);
    }
    return;
  }
  auto id = plane_.deps().segments.allocateId();
  if (!id.ok()) return done(id.status());
  auto p = std::make_unique<Peer>();
  p->id = *id;
  p->name = name;
  p->address = address;
  p->instance = instance;
  p->known_descriptor = std::move(descriptor);
  p->openers.push_back(std::move(done));
  p->open_deadline_ns =
      clock::monotonicNs() + uint64_t{plane_.config().bootstrap.connect_timeout_ms} * 1'000'000;
  Peer& ref = *p;
  peers_[*id] = std::move(p);
  by_name_[name] = *id;
  connect(ref);
}

void PeerSegments::openKnown(const std::string& name, const SocketAddress& address,
                             uint64_t instance, std::vector<uint8_t> descriptor, OpenDone done) {
  if (by_name_.count(name) == 0)
    return open(name, address, std::move(done), instance, std::move(descriptor));
  Peer* p = find(by_name_[name]);
  if (instance != 0 && p->instance != 0 && instance != p->instance) {
    readdress(name, address, instance, std::move(descriptor));
  }
  open(name, address, std::move(done));
}

std::optional<SegmentId> PeerSegments::upId(const std::string& name) {
  auto known = by_name_.find(name);
  if (known == by_name_.end()) return std::nullopt;
  Peer* p = find(known->second);
  if (p && p->record && p->record->up.load(std::memory_order_acquire)) return p->id;
  return std::nullopt;
}

bool PeerSegments::readdress(const std::string& name, const SocketAddress& address,
                             uint64_t instance, std::vector<uint8_t> descriptor) {
  auto known = by_name_.find(name);
  if (known == by_name_.end()) return false;
  Peer* p = find(known->second);
  if (p == nullptr || p->local) return false;
  if (p->instance == instance && !p->parked) {
    // The same peer put its entry again (its memory changed): a newer descriptor.
    if (!descriptor.empty() && p->record && session(p->id)) {
      p->known_descriptor = descriptor;
      Status s = install(*p, std::move(descriptor), /*new_record=*/false);
      if (!s.ok()) TENT_WARN(kEngine, "segment %s: %s", name.c_str(), s.toString().c_str());
    }
    return false;
  }
  TENT_INFO(kEngine, "segment %s: registered again by another instance; reconnecting to it",
            name.c_str());
  p->address = address;
  p->instance = instance;
  p->known_descriptor = std::move(descriptor);
  p->parked = false;
  p->failures = 0;
  if (p->record) {  // nothing more is posted to the old instance's endpoints
    p->record->up.store(false, std::memory_order_release);
    p->record->retry_at_ns.store(clock::engineNowNs(), std::memory_order_release);
    plane_.endpoints().retireAll(*p->record);
  }
  restartSession(*p);
  return true;
}

bool PeerSegments::expire(const std::string& name) {
  auto known = by_name_.find(name);
  if (known == by_name_.end()) return false;
  Peer* p = find(known->second);
  if (p == nullptr || p->local || (p->session && p->session->up())) return false;
  if (p->reconnect_timer) plane_.loop().cancelTimer(p->reconnect_timer);
  p->reconnect_timer = 0;
  p->parked = true;
  return true;
}

// Closes the current session (if any) without the down path's backoff, and connects
// to the peer's current address now.
void PeerSegments::restartSession(Peer& p) {
  if (p.reconnect_timer) plane_.loop().cancelTimer(p.reconnect_timer);
  p.reconnect_timer = 0;
  if (p.session) {
    p.closing = true;
    p.session->close(Status::Canceled("peer re-resolved"));
    p.closing = false;
  }
  connect(p);
}

void PeerSegments::abandonOpen(const std::string& name) {
  auto known = by_name_.find(name);
  if (known == by_name_.end()) return;
  Peer* p = find(known->second);
  if (p == nullptr || p->ever_up || p->local) return;
  for (const OpenDone& done : p->openers)
    if (!done.abandoned()) return;  // another caller still waits for it
  p->closing = true;
  drop(*p);
}

void PeerSegments::connect(Peer& p) {
  p.reconnect_timer = 0;
  const auto& b = plane_.config().bootstrap;
  ClientOptions options;
  options.connect_timeout_ns = uint64_t{b.connect_timeout_ms} * 1'000'000;
  options.io_timeout_ns = uint64_t{b.io_timeout_ms} * 1'000'000;
  options.keepalive_ns = uint64_t{b.keepalive_ms} * 1'000'000;
  options.peer_timeout_ns = uint64_t{b.peer_timeout_ms} * 1'000'000;
  options.fetch_descriptor = p.known_descriptor.empty() || p.local;
  options.loopback = p.local;
  if (p.session) {  // a session replaced before it reported down: destroyed later
    p.closing = true;
    p.session->close(Status::Canceled("session replaced"));
    p.closing = false;
    plane_.loop().post([s = std::shared_ptr<ClientSession>(std::move(p.session))] {});
  }
  if (!p.listener) p.listener = std::make_unique<SessionListener>(*this, p.id);
  p.session = std::make_unique<ClientSession>(plane_.loop(), p.name, p.address, plane_.secret(),
                                              options, plane_.counters(), *p.listener);
  p.session->start();
}

Status PeerSegments::install(Peer& p, std::vector<uint8_t> bytes, bool new_record) {
  auto d = metadata::parseDescriptor(bytes);
  if (!d.ok()) return d.status().withContext("descriptor of " + p.name);
  d->name = p.name;  // the name we reach it by
  std::vector<std::string> names;
  for (auto* ctx : plane_.deps().contexts) names.push_back(ctx->name());
  const auto devices = static_cast<uint32_t>(d->devices.size());
  auto peer = rdma::makePeerSegment(p.id, false, std::move(d).value(), names, clock::engineNowNs());
  if (new_record || p.record == nullptr || p.record->peer_devices != devices) {
    rdma::SegmentRecord* rec = makeRecord(p.id, devices);
    if (p.record) inheritSlots(*p.record, *rec);
    setView(*rec, std::move(peer));
    rec->up.store(true, std::memory_order_release);
    rdma::SegmentRecord* old = plane_.deps().segments.publish(rec);
    p.record = rec;
    if (old) retireRecord(old);
  } else {
    setView(*p.record, std::move(peer));
  }
  return Status::OK();
}

void PeerSegments::onUp(Peer& p, std::vector<uint8_t> descriptor) {
  if (p.local) {  // the record is ours and current: the session carries bootstraps only
    p.record->up.store(true, std::memory_order_release);
  } else {
    if (descriptor.empty()) descriptor = p.known_descriptor;
    Status s = install(p, std::move(descriptor), /*new_record=*/true);
    if (!s.ok()) return p.session->close(s);
  }
  p.ever_up = true;
  p.failures = 0;
  auto openers = std::move(p.openers);
  p.openers.clear();
  for (auto& done : openers) done(p.id);
}

void PeerSegments::onUpdate(Peer& p, std::vector<uint8_t> descriptor) {
  if (p.local) return;
  Status s = install(p, std::move(descriptor), /*new_record=*/false);
  if (!s.ok()) TENT_WARN(kEngine, "segment %s: %s", p.name.c_str(), s.toString().c_str());
}

void PeerSegments::onDown(Peer& p, const Status& why) {
  // The session object is in its own callback: destroy it (and its listener) later.
  plane_.loop().post([s = std::shared_ptr<ClientSession>(std::move(p.session))] {});
  if (p.closing) return;
  // A first open that was refused or cut off (a listener at its connection cap, a
  // peer restarting) tries again within its connect budget; authentication and
  // protocol errors end it at once.
  const bool transient = why.code() == StatusCode::kUnavailable;
  // One reading of the clock, so that the remaining budget never wraps (with two, it
  // could; std::min with the backoff kept that harmless).
  const uint64_t now = clock::monotonicNs();
  if (!p.ever_up && !p.local && transient && now < p.open_deadline_ns) {
    const uint64_t delay = std::min<uint64_t>(
        backoffDelayNs(p.failures++, 5, plane_.config().endpoints.reconnect_max_ms, rng_),
        p.open_deadline_ns - now);
    const SegmentId id = p.id;
    p.reconnect_timer = plane_.loop().addTimer(now + delay, [this, id] {
      if (Peer* q = find(id)) connect(*q);
    });
    return;
  }
  if (!p.ever_up && !p.local) {  // openSegment fails: nothing of this segment remains
    auto openers = std::move(p.openers);
    const std::string name = p.name;
    drop(p);
    for (auto& done : openers) done(why.withContext("open segment " + name));
    return;
  }
  auto openers = std::move(p.openers);  // callers waiting for this attempt
  p.openers.clear();
  for (auto& done : openers) done(why.withContext("connect to segment " + p.name));
  const auto& e = plane_.config().endpoints;
  const uint64_t delay =
      backoffDelayNs(p.failures++, e.reconnect_initial_ms, e.reconnect_max_ms, rng_);
  if (p.record) {
    p.record->retry_at_ns.store(clock::engineNowNs() + delay, std::memory_order_release);
    p.record->up.store(false, std::memory_order_release);
    p.record->slow.store(false, std::memory_order_release);
    plane_.endpoints().retireAll(*p.record);
  }
  if (p.parked) return;  // its entry is gone: a new one (watch) reconnects it
  TENT_INFO(kEngine, "segment %s: control session lost (%s); reconnecting in %lu ms",
            p.name.c_str(), why.toString().c_str(), static_cast<unsigned long>(delay / 1'000'000));
  const SegmentId id = p.id;
  p.reconnect_timer = plane_.loop().addTimer(clock::monotonicNs() + delay, [this, id] {
    if (Peer* q = find(id)) connect(*q);
  });
}

// Liveness comes from the data path: a slow control session changes nothing for the
// endpoints (their completions tell whether the peer's NIC answers); only the
// session's failure - peer_timeout, or the connection lost - retires them.
void PeerSegments::onSlow(Peer& p, bool slow) {
  if (p.record) p.record->slow.store(slow, std::memory_order_release);
  if (slow) ControlCounters::bump(plane_.counters().sessions_slow);
  const auto& b = plane_.config().bootstrap;
  if (slow)
    TENT_INFO(kEngine,
              "segment %s: control session slow (no answer within %u ms); its endpoints keep "
              "carrying transfers, the peer is declared down after %u ms of silence",
              p.name.c_str(), b.io_timeout_ms, b.peer_timeout_ms);
  else
    TENT_INFO(kEngine, "segment %s: control session answers again", p.name.c_str());
}

void PeerSegments::refresh(SegmentId id, std::function<void(Status)> done) {
  Peer* p = find(id);
  if (p == nullptr) return done(Status::NotFound("segment " + std::to_string(id) + " is not open"));
  if (p->local) {
    installLocal();
    return done(Status::OK());
  }
  ClientSession* s = session(id);
  if (s == nullptr) return done(Status::Unavailable("segment " + p->name + " is unreachable"));
  s->request(metadata::FrameType::kGetDescriptor,
             metadata::encodeDescriptorRequest(metadata::kDescriptorVersion),
             [this, id, done = std::move(done)](Result<ClientSession::Reply> r) {
               Peer* q = find(id);
               if (!r.ok()) return done(r.status());
               if (q == nullptr) return done(Status::NotFound("segment closed"));
               done(install(*q, std::move(r->payload), false));
             });
}

void PeerSegments::drop(Peer& p) {
  // Callers still waiting for this segment to open get an answer: it is gone.
  auto openers = std::move(p.openers);
  p.openers.clear();
  for (auto& done : openers) done(Status::Canceled("segment " + p.name + " was closed"));
  if (p.reconnect_timer) plane_.loop().cancelTimer(p.reconnect_timer);
  if (p.record) {
    plane_.deps().segments.unpublish(p.id);
    retireRecord(p.record);
  }
  if (p.session) {
    p.closing = true;
    p.session->close(Status::Canceled("segment closed"));
  }
  plane_.loop().post([s = std::shared_ptr<ClientSession>(std::move(p.session)),
                      l = std::shared_ptr<SessionListener>(std::move(p.listener))] {});
  if (p.id != LOCAL_SEGMENT_ID) plane_.deps().segments.releaseId(p.id);
  by_name_.erase(p.name);
  peers_.erase(p.id);  // `p` is gone from here on
}

Status PeerSegments::close(SegmentId id) {
  if (id == LOCAL_SEGMENT_ID) return Status::OK();
  Peer* p = find(id);
  if (p == nullptr) return Status::NotFound("segment " + std::to_string(id) + " is not open");
  p->closing = true;
  drop(*p);
  return Status::OK();
}

void PeerSegments::closeAll() {
  while (!peers_.empty()) {
    Peer& p = *peers_.begin()->second;
    p.closing = true;
    drop(p);
  }
}

}  // namespace tent::control
