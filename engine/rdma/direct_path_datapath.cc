// Direct path datapath: posting on direct lanes and direct completions.
#include "engine/rdma/direct_path.h"
#include "engine/rdma/rdma_transport.h"

namespace tent::rdma {

DirectDecline DirectPath::trySubmitDirect(RdmaTask& task, uint64_t now) noexcept {
  (void)now;
  (void)task;
  counters_.attempted.fetch_add(1, std::memory_order_relaxed);
  countDecline(DirectDecline::kModeOff);
  return DirectDecline::kModeOff;
}

unsigned DirectPath::pollContexts(const std::vector<RdmaContext*>& contexts) noexcept {
  (void)contexts;
  return 0;
}

unsigned DirectPath::pollTask(const RdmaTask& task) noexcept {
  (void)task;
  return 0;
}

}  // namespace tent::rdma
