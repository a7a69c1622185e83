// Submitter set-up: what it needs, given at construction.
#include "datapath/submitter.h"

namespace tent::rdma {

// datapath-lint: allow(setup) built once at engine start
Submitter::Submitter(const config::Config& config, DatapathContext& datapath, DirectPath& direct,
                     const LocalMemory& local, ControlRequests& requests, bool manual_lcores)
    : config_(config),
      datapath_(datapath),
      direct_(direct),
      local_(local),
      requests_(requests),
      manual_lcores_(manual_lcores) {}

}  // namespace tent::rdma
