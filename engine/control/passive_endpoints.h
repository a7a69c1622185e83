// Passive endpoints: the target side of peers' endpoints, built when a peer's
// BOOTSTRAP arrives. Each is owned by the session that carried its bootstrap and is
// freed when the peer releases it, replaces it (new generation, changed QPs), or
// when the session ends (the peer closed the segment, died, or stopped answering);
// so a bootstrap on one connection can never touch another connection's endpoints.
// One-shot (v1, sessionless) bootstraps go to a bounded pool: the oldest is evicted
// when the cap is reached, and one from the same initiator replaces it. We never
// post on these QPs: each reserves one entry of the passive CQ. Loop thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/metadata/bootstrap.h"
#include "engine/metadata/control_frames.h"
#include "engine/rdma/rdma_endpoint.h"

namespace tent::control {

class ControlPlane;

class PassiveEndpoints {
 public:
  explicit PassiveEndpoints(ControlPlane& plane) : plane_(plane) {}
  ~PassiveEndpoints();

  // `session` 0: a one-shot bootstrap.
  Result<metadata::BootstrapMessage> accept(uint64_t session,
                                            const metadata::BootstrapMessage& req);
  void release(uint64_t session, const metadata::ReleaseMessage& m);
  void sessionClosed(uint64_t session);
  size_t count() const noexcept { return total_; }

 private:
  struct Passive {
    std::unique_ptr<rdma::RdmaEndPoint> ep;
    uint32_t context = 0;
    std::string initiator_segment;
    std::string initiator_device;
    uint64_t instance = 0;
    uint32_t qps = 0;
  };
  using List = std::vector<Passive>;
  int contextOf(const std::string& device) const;
  bool makeRoom(uint32_t context);
  void drop(Passive& p);
  List& listOf(uint64_t session);

  ControlPlane& plane_;
  std::unordered_map<uint64_t, List> by_session_;
  std::list<Passive> one_shot_;  // oldest first
  std::vector<uint32_t> per_context_;
  size_t total_ = 0;
};

}  // namespace tent::control
