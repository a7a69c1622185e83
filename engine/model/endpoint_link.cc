#include "model/endpoint_link.h"

#include <random>
#include <string>

namespace tent::rdma {

Status checkPeerLink(const fabric::PortLink& local, const fabric::PortLink& peer,
                     std::string_view local_device, std::string_view peer_device) {
  using fabric::GidType;
  using fabric::LinkLayer;
  const std::string ours = "device " + std::string(local_device);
  const std::string theirs = "the peer's device " + std::string(peer_device);
  if (local.link_layer != LinkLayer::kUnknown && peer.link_layer != LinkLayer::kUnknown &&
      local.link_layer != peer.link_layer) {
    return Status::FailedPrecondition(
        ours + " is " + std::string(fabric::toString(local.link_layer)) + ", " + theirs + " " +
        std::string(fabric::toString(peer.link_layer)) +
        ": no RC connection between them (list devices of one link layer in "
        "fabric.verbs.devices)");
  }
  if (local.gid_type != GidType::kUnknown && peer.gid_type != GidType::kUnknown &&
      local.gid_type != peer.gid_type) {
    return Status::FailedPrecondition(
        ours + " uses a " + std::string(fabric::toString(local.gid_type)) + " GID, " + theirs +
        " a " + std::string(fabric::toString(peer.gid_type)) +
        " GID: they never connect (their packets time out); give both the same GID type "
        "(fabric.verbs.gid_index, or the automatic RoCE v2 choice on both)");
  }
  return Status::OK();
}

void addLinkTerms(metadata::BootstrapMessage* msg, const fabric::PortLink& link,
                  const metadata::QosTag& qos, std::span<const uint32_t> psns) {
  msg->setExtension(metadata::BootstrapTag::kLink, metadata::encodeLinkTag(link));
  msg->setExtension(metadata::BootstrapTag::kQos, metadata::encodeQosTag(qos));
  msg->setExtension(metadata::BootstrapTag::kPsn, metadata::encodePsnTag(psns));
}

Result<PeerTerms> readLinkTerms(const metadata::BootstrapMessage& msg) {
  PeerTerms terms;
  if (const auto* bytes = msg.extension(metadata::BootstrapTag::kLink)) {
    TENT_ASSIGN_OR_RETURN(terms.link, metadata::decodeLinkTag(*bytes));
  }
  if (const auto* bytes = msg.extension(metadata::BootstrapTag::kQos)) {
    TENT_ASSIGN_OR_RETURN(terms.qos, metadata::decodeQosTag(*bytes));
  }
  if (const auto* bytes = msg.extension(metadata::BootstrapTag::kPsn)) {
    TENT_ASSIGN_OR_RETURN(terms.psns, metadata::decodePsnTag(*bytes));
    const size_t qps = msg.data_qp_nums.size() + (msg.direct_qp_num != 0 ? 1 : 0);
    if (terms.psns->size() != qps) {
      return Status::InvalidArgument(
          "bootstrap psn extension: " + std::to_string(terms.psns->size()) + " PSNs for " +
          std::to_string(qps) + " QPs");
    }
  }
  return terms;
}

uint32_t randomPsn() noexcept {
  thread_local std::mt19937 rng{std::random_device{}()};
  return static_cast<uint32_t>(rng()) & fabric::kMaxPsn;
}

}  // namespace tent::rdma
