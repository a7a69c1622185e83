// What the two ends of an endpoint agree on besides QP numbers (issue 24): the link
// (layer, GID type, MTU), the traffic settings and the initial PSNs. The bytes travel
// as bootstrap v3 extensions (wire/bootstrap_link.h); this is what the engine does
// with them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fabric/fabric.h"
#include "tent/status.h"
#include "wire/bootstrap.h"
#include "wire/bootstrap_link.h"

namespace tent::rdma {

// FailedPrecondition when the two ports can never carry an RC connection: different
// link layers, or different GID types (RoCE v1 against v2). Unknown on either side
// (soft, tcp, an older peer): nothing to check.
Status checkPeerLink(const fabric::PortLink& local, const fabric::PortLink& peer,
                     std::string_view local_device, std::string_view peer_device);

// Our terms, added to a bootstrap we send (kLink, kQos, kPsn). `psns`: one per QP, in
// the order of data_qp_nums, then the direct QP's when there is one.
void addLinkTerms(metadata::BootstrapMessage* msg, const fabric::PortLink& link,
                  const metadata::QosTag& qos, std::span<const uint32_t> psns);

// The peer's terms; each one absent when the peer did not send it (an older engine).
// InvalidArgument when one is malformed, or when the PSNs do not match its QPs.
struct PeerTerms {
  std::optional<fabric::PortLink> link;
  std::optional<metadata::QosTag> qos;
  std::optional<std::vector<uint32_t>> psns;
};
Result<PeerTerms> readLinkTerms(const metadata::BootstrapMessage& msg);

// A random 24-bit initial PSN (as perftest does): a stale packet of an earlier QP with
// the same number cannot land in a new connection's sequence.
uint32_t randomPsn() noexcept;

}  // namespace tent::rdma
