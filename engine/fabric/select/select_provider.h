// The provider factory (fabric.provider): the one place that knows every provider.
#pragma once

#include <memory>

#include "fabric/fabric.h"

namespace tent::config {
struct FabricConfig;
}
namespace tent::topology {
class Topology;
}

namespace tent::fabric {

// Builds the provider the config asks for. `auto` picks verbs when rdma-core
// finds a device, and soft otherwise. Soft devices come from the config, or
// from the topology's RDMA devices.
Result<std::unique_ptr<Provider>> createProvider(const config::FabricConfig& config,
                                                 const topology::Topology& topology);

}  // namespace tent::fabric
