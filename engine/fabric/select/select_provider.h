// The provider factory (fabric.provider): the one place that knows every provider.
#pragma once

#include <memory>
#include <string>

#include "fabric/fabric.h"

namespace tent::config {
struct FabricConfig;
}
namespace tent::topology {
class Topology;
}

namespace tent::fabric {

// A provider and, in one line, why it serves: "configured (fabric.provider: soft)" or
// "auto: rdma-core lists no RDMA device". Start-up logs it at info; stats(), tebench's
// header and the metrics' info series carry it, so no figure hides which provider ran.
struct ProviderChoice {
  std::unique_ptr<Provider> provider;
  std::string reason;
};

// Builds the provider the config asks for. `auto` picks verbs when rdma-core lists a
// device that opens, and tcp otherwise (soft runs only when configured). A device the
// config names that does not exist is an error on every provider.
Result<ProviderChoice> chooseProvider(const config::FabricConfig& config,
                                      const topology::Topology& topology);

// chooseProvider() without the reason.
Result<std::unique_ptr<Provider>> createProvider(const config::FabricConfig& config,
                                                 const topology::Topology& topology);

}  // namespace tent::fabric
