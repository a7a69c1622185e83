// Passive endpoints: the target side of peers' endpoints, built when a peer's
// BOOTSTRAP arrives. Each is owned by the session that carried its bootstrap and is
// freed when the peer releases it, replaces it (new generation, changed QPs), or
// when the session ends (the peer closed the segment, died, or stopped answering);
// so a bootstrap on one connection can never touch another connection's endpoints.
// One-shot (v1, sessionless) bootstraps go to a bounded pool: the oldest is evicted
// when the cap is reached, one from the same initiator replaces it, and every
// keepalive interval the initiator is probed (a one-shot GET_DESCRIPTOR to the
// segment the bootstrap named): when it does not answer, or answers as another
// instance, its endpoints are freed - so a departed v1 peer, or a forged bootstrap
// naming someone else, costs nothing for long. We never post on these QPs: each
// reserves one entry of the passive CQ. Loop thread only.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "wire/bootstrap.h"
#include "wire/control_frames.h"
#include "model/rdma_endpoint.h"

namespace tent::control {

class ControlPlane;

class PassiveEndpoints {
 public:
  explicit PassiveEndpoints(ControlPlane& plane)
      : plane_(plane), alive_(std::make_shared<bool>(true)) {}
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
  using Initiator = std::pair<std::string, uint64_t>;  // (segment name, instance)
  void scheduleProbe(const Initiator& who);
  void probe(const Initiator& who);
  void onProbe(const Initiator& who, bool alive);

  ControlPlane& plane_;
  std::unordered_map<uint64_t, List> by_session_;
  std::list<Passive> one_shot_;  // oldest first
  std::vector<uint32_t> per_context_;
  size_t total_ = 0;
  std::map<Initiator, uint64_t> probes_;  // one-shot initiators -> probe timer
  std::shared_ptr<bool> alive_;           // probe answers after we are gone find it false
};

}  // namespace tent::control
