// The provider factory: which provider serves the engine (fabric.provider).
#include "fabric/select/select_provider.h"

#include "config/config.h"
#include "fabric/soft/soft_provider.h"
#include "fabric/tcp/tcp_provider.h"
#include "tent/log.h"
#include "topology/topology.h"
#ifdef TENT_HAVE_VERBS
#include "fabric/verbs/verbs_ops.h"
#endif

namespace tent::fabric {

namespace {

Result<std::unique_ptr<Provider>> createVerbs(const config::FabricConfig& config) {
#ifdef TENT_HAVE_VERBS
  return createVerbsProvider(config.verbs, activeVerbsOps());  // the test hook, or libibverbs
#else
  (void)config;
  return Status::NotSupported(
      "the verbs provider is not built (libibverbs not found at build time)");
#endif
}

size_t verbsDevices() noexcept {
#ifdef TENT_HAVE_VERBS
  return verbsDeviceCount(activeVerbsOps());
#else
  return 0;
#endif
}

}  // namespace

Result<std::unique_ptr<Provider>> createProvider(const config::FabricConfig& config,
                                                 const topology::Topology& topology) {
  switch (config.provider) {
    case config::FabricProvider::kSoft:
      return soft::createSoftProvider(config.soft, topology);
    case config::FabricProvider::kVerbs:
      return createVerbs(config);
    case config::FabricProvider::kTcp:
      return tcp::createTcpProvider(config.tcp);
    case config::FabricProvider::kAuto:
      break;
  }
  if (verbsDevices() > 0) {
    auto verbs = createVerbs(config);
    if (verbs.ok()) return verbs;
    TENT_WARN(kFabric, "fabric auto: verbs provider failed (%s); using the soft provider",
              verbs.status().toString().c_str());
  }
  return soft::createSoftProvider(config.soft, topology);
}

}  // namespace tent::fabric
