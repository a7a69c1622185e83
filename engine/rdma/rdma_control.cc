// The control thread's work: connecting and retiring active endpoints, and
// answering peers (descriptor requests, bootstraps) on the listener thread.
// Never runs on an lcore.
#include <exception>

#include "engine/rdma/rdma_transport.h"
#include "tent/log.h"

namespace tent::rdma {

void RdmaTransport::serviceSlot(EndpointSlot* slot) {
  RdmaEndPoint* ep = slot->current.load(std::memory_order_acquire);
  if (ep && ep->state() == EndpointState::kDestroying) {
    Status s = ep->destroy(config_->timeouts.endpoint_destroy_ms);
    if (!s.ok()) TENT_WARN(kEngine, "endpoint destroy: %s", s.toString().c_str());
  }
  if (ep && (ep->ready() || ep->state() == EndpointState::kHandshaking)) return;
  if (stopping_.load() || !segment(slot->segment)) return;
  Status s = connectSlot(slot);
  if (!s.ok()) {
    slot->failed_at_ns.store(steadyNowNs(), std::memory_order_release);
    decltype(suspect_)::accessor a;
    suspect_.insert(a, slot->segment);
    a->second = true;
    TENT_WARN(kEngine, "connect %s -> segment %lu device %u: %s",
              contexts_[slot->context]->name().c_str(), static_cast<unsigned long>(slot->segment),
              slot->peer_device, s.toString().c_str());
  }
}

Status RdmaTransport::connectSlot(EndpointSlot* slot) {
  auto seg = segment(slot->segment);
  if (!seg) return Status::NotFound("segment closed");
  if (slot->peer_device >= seg->descriptor.devices.size())
    return Status::NotFound("peer device index out of range");
  RdmaContext& ctx = *contexts_[slot->context];
  auto owned = std::make_unique<RdmaEndPoint>(ctx, slot->segment, slot->peer_device,
                                              slot->next_generation++);
  EndpointQpShape shape;
  shape.posting_pollers = static_cast<uint32_t>(pollers_.size());
  shape.qps_per_poller = config_->workers.qps_per_endpoint;
  shape.qp_depth = config_->workers.qp_depth;
  shape.direct_depth = directEnabled() ? config_->direct.qp_depth : 0;
  RdmaEndPoint* ep = endpoints_.adopt(std::move(owned));
  Status s = ep->createActiveQps(shape);
  metadata::BootstrapMessage msg;
  msg.initiator_segment = segment_name_;
  msg.initiator_instance = instance_;
  msg.local_device = ctx.name();
  msg.peer_device = seg->descriptor.devices[slot->peer_device].name;
  ep->fillBootstrap(&msg);
  slot->current.store(ep, std::memory_order_release);  // handshaking: lookups wait
  Result<metadata::ControlFrame> reply = Status::Internal("not sent");
  if (s.ok()) {
    metadata::ControlFrame req{metadata::ControlType::kBootstrap, metadata::encodeBootstrap(msg)};
    reply = metadata::controlRequest(seg->name, req, config_->bootstrap.connect_timeout_ms,
                                     config_->bootstrap.io_timeout_ms);
    if (!reply.ok()) s = reply.status();
  }
  Result<metadata::BootstrapMessage> remote = Status::Internal("no reply");
  if (s.ok()) {
    remote = metadata::parseBootstrap(reply->payload);
    if (!remote.ok()) s = remote.status();
  }
  if (s.ok() && remote->initiator_instance != seg->descriptor.instance &&
      slot->segment != LOCAL_SEGMENT_ID) {
    // The peer restarted since we cached its descriptor: refresh it (new rkeys).
    (void)refreshSegment(slot->segment, /*force=*/true, ep);
  }
  if (s.ok()) s = ep->connect(*remote);
  if (s.ok() && ep->markReady()) {
    slot->failed_at_ns.store(0, std::memory_order_release);
    TENT_DEBUG(kEngine, "endpoint %s -> %s/%s ready (generation %lu, direct %s)",
               ctx.name().c_str(), seg->name.c_str(), msg.peer_device.c_str(),
               static_cast<unsigned long>(ep->generation()), ep->directQp() ? "yes" : "no");
    return Status::OK();
  }
  (void)ep->destroy(0);
  return s.ok() ? Status::Canceled("endpoint reset while connecting") : s;
}

metadata::ControlFrame RdmaTransport::handleControl(const metadata::ControlFrame& request) {
  metadata::ControlFrame reply;
  reply.type = metadata::ControlType::kError;
  auto fail = [&](const Status& s) {
    std::string m = s.toString();
    reply.type = metadata::ControlType::kError;
    reply.payload.assign(m.begin(), m.end());
  };
  try {
    if (request.type == metadata::ControlType::kGetDescriptor) {
      std::lock_guard<std::mutex> lock(local_mu_);
      reply.type = metadata::ControlType::kDescriptor;
      reply.payload = local_descriptor_bytes_;
    } else if (request.type == metadata::ControlType::kBootstrap) {
      auto req = metadata::parseBootstrap(request.payload);
      auto answer =
          req.ok() ? acceptBootstrap(*req) : Result<metadata::BootstrapMessage>(req.status());
      if (answer.ok()) {
        reply.type = metadata::ControlType::kBootstrapReply;
        reply.payload = metadata::encodeBootstrap(*answer);
      } else {
        fail(answer.status());
      }
    } else {
      fail(Status::InvalidArgument("unknown control request"));
    }
  } catch (const std::exception& e) {  // e.g. bad_alloc: never let it cross the listener
    fail(Status::Internal(e.what()));
  }
  return reply;
}

Result<metadata::BootstrapMessage> RdmaTransport::acceptBootstrap(
    const metadata::BootstrapMessage& req) {
  RdmaContext* ctx = nullptr;
  for (auto& c : contexts_)
    if (c->name() == req.peer_device) ctx = c.get();
  if (!ctx) return Status::NotFound("bootstrap names device '" + req.peer_device + "', not ours");
  std::lock_guard<std::mutex> lock(passive_mu_);
  RdmaEndPoint* reuse = nullptr;
  for (auto it = passive_.begin(); it != passive_.end();) {
    RdmaEndPoint* p = *it;
    bool same_peer = &p->context() == ctx && p->remote.initiator_segment == req.initiator_segment &&
                     p->remote.local_device == req.local_device;
    if (same_peer && p->peer_instance == req.initiator_instance &&
        metadata::sameQpWiring(p->remote, req)) {
      reuse = p;  // a duplicate bootstrap: same generation and the same QPs
      ++it;
    } else if (same_peer) {
      (void)p->destroy(0);  // older generation, changed QPs or a restarted peer
      it = passive_.erase(it);
    } else {
      ++it;
    }
  }
  RdmaEndPoint* ep = reuse;
  if (!ep) {
    uint32_t direct_depth =
        (req.direct_qp_num != 0 && directEnabled()) ? config_->direct.qp_depth : 0;
    ep = endpoints_.adopt(std::make_unique<RdmaEndPoint>(*ctx, 0, 0, req.generation));
    TENT_RETURN_IF_ERROR(ep->createPassiveQps(static_cast<uint32_t>(req.data_qp_nums.size()),
                                              config_->workers.qp_depth, direct_depth));
    TENT_RETURN_IF_ERROR(ep->connect(req));
    ep->markReady();
    ep->remote = req;
    ep->peer_instance = req.initiator_instance;
    passive_.push_back(ep);
  }
  metadata::BootstrapMessage answer;
  answer.initiator_segment = segment_name_;
  answer.initiator_instance = instance_;
  answer.local_device = ctx->name();
  answer.peer_device = req.local_device;
  ep->fillBootstrap(&answer);
  answer.generation = req.generation;
  return answer;
}

}  // namespace tent::rdma
