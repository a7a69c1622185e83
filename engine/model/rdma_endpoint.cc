#include "model/rdma_endpoint.h"

#include "model/endpoint_link.h"
#include "model/rdma_context.h"
#include "tent/log.h"

namespace tent::rdma {

std::string_view toString(EndpointState s) noexcept {
  switch (s) {
    case EndpointState::kHandshaking:
      return "handshaking";
    case EndpointState::kReady:
      return "ready";
    case EndpointState::kDestroying:
      return "destroying";
  }
  return "?";
}

EndpointTraffic trafficOf(const config::QosConfig& qos) noexcept {
  EndpointTraffic t;
  t.data = {qos.data.traffic_class, qos.data.service_level};
  t.direct = {qos.direct.traffic_class, qos.direct.service_level};
  t.control = {qos.control.traffic_class, qos.control.service_level};
  return t;
}

RdmaEndPoint::RdmaEndPoint(RdmaContext& context, SegmentId segment, uint32_t peer_device,
                           uint64_t generation)
    : context_(context), segment_(segment), peer_device_(peer_device), generation_(generation) {}

RdmaEndPoint::~RdmaEndPoint() = default;

namespace {
Result<std::unique_ptr<fabric::QueuePair>> makeQp(fabric::Device& dev, fabric::CompletionQueue* cq,
                                                  uint32_t depth) {
  if (cq == nullptr) return Status::Internal("no CQ for this QP's poller on " + dev.info().name);
  fabric::QpInitAttr attr;
  attr.send_cq = cq;
  attr.max_send_wr = depth;
  attr.max_sge = 1;
  return dev.createQp(attr);
}
}  // namespace

Status RdmaEndPoint::createActiveQps(const EndpointQpShape& shape) {
  shape_ = shape;
  for (uint32_t i = 0; i < shape.data_qps; ++i) {
    auto qp = makeQp(context_.device(), context_.dataCq(shape.owner_poller), shape.qp_depth);
    if (!qp.ok()) return qp.status().withContext("data QP");
    data_raw_.push_back(qp->get());
    data_qps_.push_back(std::move(qp).value());
  }
  if (const NotifySetup* n = context_.notify()) {
    auto link = notify::NotifyLink::create(context_.device(), n->limits, notify::Role::kActive,
                                           &n->inbox->counters());
    if (!link.ok()) return link.status().withContext("notify link");
    notify_ = std::move(link).value();
  }
  auto rail = makeQp(context_.device(), context_.dataCq(shape.rail_poller), shape.qp_depth);
  if (!rail.ok()) return rail.status().withContext("rail QP");
  rail_raw_ = rail->get();
  data_qps_.push_back(std::move(rail).value());
  if (shape.direct_depth != 0) {
    auto qp = makeQp(context_.device(), context_.directCq(), shape.direct_depth);
    if (!qp.ok()) return qp.status().withContext("direct QP");
    direct_qp_ = std::move(qp).value();
    direct_max_depth_ = shape.direct_depth;
  }
  drawPsns();
  return Status::OK();
}

// One PSN per QP the kPsn tag names: the data QPs (rail included), then the direct QP.
// Not the notify QPs (qpCount() counts them): their link wires itself.
void RdmaEndPoint::drawPsns() {
  psns_.clear();
  const size_t qps = data_qps_.size() + (direct_qp_ ? 1 : 0);
  for (size_t i = 0; i < qps; ++i) psns_.push_back(randomPsn());
}

Status RdmaEndPoint::createPassiveQps(uint32_t data_qps, bool direct,
                                      const std::string& notify_from) {
  passive_ = true;
  if (const NotifySetup* n = context_.notify(); n != nullptr && !notify_from.empty()) {
    auto link = notify::NotifyLink::create(context_.device(), n->limits, notify::Role::kPassive,
                                           &n->inbox->counters(), notify_from);
    if (!link.ok()) return link.status().withContext("passive notify link");
    notify_ = std::move(link).value();
  }
  for (uint32_t i = 0; i < data_qps; ++i) {
    auto qp = makeQp(context_.device(), context_.passiveCq(), 1);
    if (!qp.ok()) return qp.status().withContext("passive data QP");
    data_qps_.push_back(std::move(qp).value());
  }
  if (direct) {
    auto qp = makeQp(context_.device(), context_.passiveCq(), 1);
    if (!qp.ok()) return qp.status().withContext("passive direct QP");
    direct_qp_ = std::move(qp).value();
  }
  drawPsns();
  return Status::OK();
}

void RdmaEndPoint::fillBootstrap(metadata::BootstrapMessage* msg) const {
  msg->data_qp_nums.clear();
  for (const auto& qp : data_qps_) msg->data_qp_nums.push_back(qp->qpNum());
  msg->direct_qp_num = direct_qp_ ? direct_qp_->qpNum() : 0;
  msg->port = context_.device().portIdentity();
  msg->generation = generation_;
  metadata::QosTag qos{traffic_.data, traffic_.direct, traffic_.control};
  addLinkTerms(msg, context_.device().portLink(), qos, psns_);
}

Status RdmaEndPoint::connect(const metadata::BootstrapMessage& peer) {
  if (peer.data_qp_nums.size() != data_qps_.size())
    return Status::InvalidArgument("peer answered with " +
                                   std::to_string(peer.data_qp_nums.size()) +
                                   " data QPs, expected " + std::to_string(data_qps_.size()));
  TENT_ASSIGN_OR_RETURN(PeerTerms terms, readLinkTerms(peer));
  uint32_t peer_mtu = 0;
  if (terms.link) {
    TENT_RETURN_IF_ERROR(checkPeerLink(context_.device().portLink(), *terms.link,
                                       context_.device().info().name, peer.local_device));
    peer_mtu = terms.link->mtu_bytes;
  }
  // The initiator's values hold on both ends; an older initiator sends class 0.
  EndpointTraffic traffic = traffic_;
  if (passive_)
    traffic = terms.qos ? EndpointTraffic{terms.qos->data, terms.qos->direct, terms.qos->control}
                        : EndpointTraffic{};
  // PSNs only when the peer sent its own: then it also took ours (same version).
  auto remote = [&](uint32_t qp_num, size_t ours, size_t theirs, fabric::QpTraffic t) {
    fabric::QpRemote r;
    r.qp_num = qp_num;
    r.port = peer.port;
    r.mtu_bytes = peer_mtu;
    r.traffic = t;
    if (terms.psns && ours < psns_.size()) {
      r.psn = (*terms.psns)[theirs];
      r.local_psn = psns_[ours];
    }
    return r;
  };
  notify_traffic_ = traffic.control;
  for (size_t i = 0; i < data_qps_.size(); ++i) {
    fabric::QpRemote r = remote(peer.data_qp_nums[i], i, i, traffic.data);
    TENT_RETURN_IF_ERROR(fabric::connectQp(*data_qps_[i], r).withContext("data QP"));
  }
  // The direct QP is wired only when both sides advertise one.
  if (direct_qp_ && peer.direct_qp_num != 0) {
    fabric::QpRemote r =
        remote(peer.direct_qp_num, data_qps_.size(), peer.data_qp_nums.size(), traffic.direct);
    TENT_RETURN_IF_ERROR(fabric::connectQp(*direct_qp_, r).withContext("direct QP"));
    direct_wired_ = true;
  } else {
    direct_qp_.reset();
    direct_wired_ = false;
  }
  return Status::OK();
}

metadata::NotifyExtension RdmaEndPoint::notifyOffer() const {
  return notify_ ? notify_->offer() : metadata::NotifyExtension{};
}

Status RdmaEndPoint::connectNotify(const metadata::NotifyExtension& remote,
                                   const fabric::PortIdentity& port) {
  if (!notify_) return Status::OK();
  TENT_RETURN_IF_ERROR(notify_->connect(remote, port, notify_traffic_));
  if (notify_->role() == notify::Role::kPassive && notify_->supported())
    notify_->attachTo(*context_.notify()->inbox);
  return Status::OK();
}

bool RdmaEndPoint::markReady() noexcept {
  EndpointState expected = EndpointState::kHandshaking;
  return state_.compare_exchange_strong(expected, EndpointState::kReady, std::memory_order_acq_rel);
}

bool RdmaEndPoint::beginReset() noexcept {
  EndpointState s = state_.load(std::memory_order_acquire);
  while (s != EndpointState::kDestroying) {
    if (state_.compare_exchange_weak(s, EndpointState::kDestroying, std::memory_order_acq_rel))
      return true;
  }
  return false;
}

void RdmaEndPoint::quiesce() {
  beginReset();
  for (auto& qp : data_qps_) (void)qp->modifyToError();
  if (direct_qp_) (void)direct_qp_->modifyToError();
  if (notify_) notify_->quiesce();
}

bool RdmaEndPoint::drained() const noexcept {
  // A dead device moves no byte and completes nothing any more: its WRs are over.
  if (context_.dead()) return true;
  for (const auto& qp : data_qps_)
    if (qp->outstanding() != 0) return false;
  return directDepth() == 0;
}

uint32_t RdmaEndPoint::qpCount() const noexcept {
  return static_cast<uint32_t>(data_qps_.size()) + (direct_qp_ ? 1u : 0u) +
         (notify_ ? notify_->qpCount() : 0u);
}

bool RdmaEndPoint::tryTakeDirectQuota() noexcept {
  uint32_t depth = direct_wr_depth_.load(std::memory_order_relaxed);
  while (depth < direct_max_depth_) {
    if (direct_wr_depth_.compare_exchange_weak(depth, depth + 1, std::memory_order_acq_rel))
      return true;
  }
  return false;
}

}  // namespace tent::rdma
