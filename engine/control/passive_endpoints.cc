#include "control/passive_endpoints.h"

#include <algorithm>

#include "control/control_plane.h"
#include "model/rdma_context.h"
#include "net/address.h"
#include "net/one_shot.h"
#include "wire/segment_descriptor.h"
#include "tent/log.h"
#include "wire/segment_descriptor.h"

namespace tent::control {

PassiveEndpoints::~PassiveEndpoints() {
  *alive_ = false;
  for (auto& [who, timer] : probes_) plane_.loop().cancelTimer(timer);
  for (auto& [id, list] : by_session_)
    for (auto& p : list) drop(p);
  for (auto& p : one_shot_) drop(p);
}

void PassiveEndpoints::scheduleProbe(const Initiator& who) {
  if (probes_.count(who)) return;
  const uint64_t every = uint64_t{plane_.config().bootstrap.keepalive_ms} * 1'000'000;
  probes_[who] = plane_.loop().addTimer(clock::monotonicNs() + every, [this, who] { probe(who); });
}

void PassiveEndpoints::probe(const Initiator& who) {
  probes_.erase(who);
  std::string host;
  uint16_t port = 0;
  // Only numeric addresses: the loop never blocks on a name lookup. A named initiator
  // is not probed; its endpoints go by the pool's cap and replacement rules.
  auto address = splitHostPort(who.first, &host, &port).ok()
                     ? resolveNumeric(host, port)
                     : Result<SocketAddress>(Status::NotFound(""));
  if (!address.ok()) return;
  const uint64_t timeout = uint64_t{plane_.config().bootstrap.io_timeout_ms} * 1'000'000;
  std::weak_ptr<bool> alive = alive_;
  OneShotRequest::start(plane_.loop(), *address, metadata::FrameType::kGetDescriptor, {}, timeout,
                        plane_.counters(), [this, alive, who](auto r) {
                          if (alive.expired() || !*alive.lock()) return;
                          bool same = false;
                          if (r.ok() && r->first == metadata::FrameType::kDescriptor) {
                            auto d = metadata::parseDescriptor(r->second);
                            same = d.ok() && d->instance == who.second;
                          }
                          onProbe(who, same);
                        });
}

void PassiveEndpoints::onProbe(const Initiator& who, bool alive) {
  bool any = false;
  for (auto it = one_shot_.begin(); it != one_shot_.end();) {
    const bool mine = it->initiator_segment == who.first && it->instance == who.second;
    any = any || mine;
    if (mine && !alive) {
      drop(*it);
      it = one_shot_.erase(it);
    } else {
      ++it;
    }
  }
  if (alive && any) scheduleProbe(who);
  if (!alive && any)
    TENT_INFO(kEngine, "passive endpoints of %s (instance %lx): the initiator is gone, freed",
              who.first.c_str(), static_cast<unsigned long>(who.second));
}

int PassiveEndpoints::contextOf(const std::string& device) const {
  const auto& contexts = plane_.deps().contexts;
  for (size_t i = 0; i < contexts.size(); ++i)
    if (contexts[i]->name() == device) return static_cast<int>(i);
  return -1;
}

void PassiveEndpoints::drop(Passive& p) {
  if (!p.ep) return;
  auto& r = plane_.resources();
  r.endpoints_live.fetch_sub(1, std::memory_order_relaxed);
  r.qps[p.context].fetch_sub(p.qps, std::memory_order_relaxed);
  --per_context_[p.context];
  --total_;
  p.ep.reset();  // nothing is posted on passive QPs: destroy them now
}

size_t PassiveEndpoints::heldBy(uint64_t session) const noexcept {
  auto it = by_session_.find(session);
  return it == by_session_.end() ? 0 : it->second.size();
}

PassiveEndpoints::List& PassiveEndpoints::listOf(uint64_t session) {
  return by_session_[session];
}

bool PassiveEndpoints::makeRoom(uint32_t context) {
  if (per_context_[context] < plane_.config().endpoints.max_passive_per_context) return true;
  // Only the sessionless pool is evicted: a session's endpoints live as long as it does.
  for (auto it = one_shot_.begin(); it != one_shot_.end(); ++it) {
    if (it->context != context) continue;
    drop(*it);
    one_shot_.erase(it);
    return true;
  }
  return false;
}

Result<metadata::BootstrapMessage> PassiveEndpoints::accept(uint64_t session,
                                                            const metadata::BootstrapMessage& req) {
  if (per_context_.empty()) per_context_.assign(plane_.deps().contexts.size(), 0);
  const int c = contextOf(req.peer_device);
  if (c < 0) return Status::NotFound("bootstrap names device '" + req.peer_device + "', not ours");
  const uint32_t ctx = static_cast<uint32_t>(c);
  auto same = [&](const Passive& p) {
    return p.context == ctx && p.initiator_device == req.local_device &&
           p.initiator_segment == req.initiator_segment;
  };
  // A duplicate bootstrap (same generation, same QPs) reuses its endpoint; any other
  // bootstrap for the same pair of devices replaces it.
  Passive* reuse = nullptr;
  auto sweep = [&](auto& list) {
    for (auto it = list.begin(); it != list.end();) {
      if (same(*it) && it->instance == req.initiator_instance &&
          metadata::sameQpWiring(it->ep->remote, req)) {
        reuse = &*it;
        ++it;
      } else if (same(*it)) {
        drop(*it);
        it = list.erase(it);
      } else {
        ++it;
      }
    }
  };
  if (session != 0) {
    sweep(listOf(session));
  } else {
    sweep(one_shot_);
  }
  rdma::RdmaEndPoint* ep = reuse ? reuse->ep.get() : nullptr;
  if (!ep) {
    if (req.data_qp_nums.empty() || req.data_qp_nums.size() > metadata::kMaxBootstrapQps)
      return Status::InvalidArgument("bootstrap: QP count out of range");
    if (!makeRoom(ctx))
      return Status::ResourceExhausted(
          "device " + req.peer_device + " has all " +
          std::to_string(plane_.config().endpoints.max_passive_per_context) +
          " passive endpoints in use (endpoints.max_passive_per_context)");
    Passive p;
    p.context = ctx;
    p.initiator_segment = req.initiator_segment;
    p.initiator_device = req.local_device;
    p.instance = req.initiator_instance;
    p.ep = std::make_unique<rdma::RdmaEndPoint>(*plane_.deps().contexts[ctx], 0, 0, req.generation);
    const bool direct = req.direct_qp_num != 0 && plane_.deps().direct_enabled;
    Status s = p.ep->createPassiveQps(static_cast<uint32_t>(req.data_qp_nums.size()), direct);
    if (s.ok()) s = p.ep->connect(req);
    if (!s.ok()) return s.withContext("passive endpoint for " + req.initiator_segment);
    p.ep->markReady();
    p.ep->remote = req;
    p.qps = p.ep->qpCount();
    auto& r = plane_.resources();
    r.endpoints_live.fetch_add(1, std::memory_order_relaxed);
    r.qps[ctx].fetch_add(p.qps, std::memory_order_relaxed);
    ++per_context_[ctx];
    ++total_;
    ep = p.ep.get();
    if (session != 0) {
      listOf(session).push_back(std::move(p));
    } else {
      scheduleProbe({p.initiator_segment, p.instance});
      one_shot_.push_back(std::move(p));
    }
  }
  metadata::BootstrapMessage answer;
  answer.initiator_segment = plane_.segmentName();
  answer.initiator_instance = plane_.instance();
  answer.local_device = req.peer_device;
  answer.peer_device = req.local_device;
  ep->fillBootstrap(&answer);
  answer.generation = req.generation;
  answer.version = metadata::bootstrapVersionFor(req.version);  // a newer peer reads ours
  return answer;
}

void PassiveEndpoints::release(uint64_t session, const metadata::ReleaseMessage& m) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  std::erase_if(it->second, [&](Passive& p) {
    const bool match = p.initiator_device == m.initiator_device &&
                       plane_.deps().contexts[p.context]->name() == m.target_device &&
                       p.ep->generation() == m.generation;
    if (match) drop(p);
    return match;
  });
}

void PassiveEndpoints::sessionClosed(uint64_t session) {
  auto it = by_session_.find(session);
  if (it == by_session_.end()) return;
  for (auto& p : it->second) drop(p);
  by_session_.erase(it);
}

}  // namespace tent::control
