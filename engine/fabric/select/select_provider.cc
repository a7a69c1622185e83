// The provider factory: which provider serves the engine (fabric.provider), and why.
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
  std::string wanted;
  for (const std::string& d : config.verbs.devices) wanted += (wanted.empty() ? " " : ",") + d;
  return Status::NotSupported("verbs: no RDMA device" + wanted +
                              ": the verbs provider is not built (libibverbs not found at build "
                              "time); on a host without RDMA use the tcp provider "
                              "(fabric.provider: tcp; Mooncake: protocol 'tcp')");
#endif
}

size_t verbsDevices() noexcept {
#ifdef TENT_HAVE_VERBS
  return verbsDeviceCount(activeVerbsOps());
#else
  return 0;
#endif
}

std::string joinedNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

Result<ProviderChoice> chosen(Result<std::unique_ptr<Provider>> provider, std::string reason) {
  if (!provider.ok()) return provider.status();
  return ProviderChoice{std::move(provider).value(), std::move(reason)};
}

// auto: verbs when a usable RDMA device exists, else tcp. Devices named under
// fabric.verbs.devices must exist: auto never drops a name it was given.
Result<ProviderChoice> chooseAuto(const config::FabricConfig& config) {
  const size_t listed = verbsDevices();
  if (listed > 0) {
    auto verbs = createVerbs(config);
    if (verbs.ok()) {
      return chosen(std::move(verbs), "auto: rdma-core lists " + std::to_string(listed) +
                                          " RDMA device(s) and they open");
    }
    if (!config.verbs.devices.empty()) return verbs.status().withContext("fabric.provider auto");
    std::string why = "auto: rdma-core lists " + std::to_string(listed) +
                      " RDMA device(s) but the verbs provider failed (" +
                      verbs.status().toString() + ")";
    TENT_WARN(kFabric, "%s; using the tcp provider", why.c_str());
    return chosen(tcp::createTcpProvider(config.tcp), why);
  }
  if (!config.verbs.devices.empty()) {
    return Status::NotFound("fabric.provider auto: RDMA device(s) " +
                            joinedNames(config.verbs.devices) +
                            " named in fabric.verbs.devices: rdma-core lists no RDMA device; "
                            "on a host without RDMA use the tcp provider (fabric.provider: tcp)");
  }
  return chosen(tcp::createTcpProvider(config.tcp), "auto: rdma-core lists no RDMA device");
}

}  // namespace

Result<ProviderChoice> chooseProvider(const config::FabricConfig& config,
                                      const topology::Topology& topology) {
  Result<ProviderChoice> out = Status::Internal("no provider");
  switch (config.provider) {
    case config::FabricProvider::kSoft:
      out = chosen(soft::createSoftProvider(config.soft, topology),
                   "configured (fabric.provider: soft)");
      break;
    case config::FabricProvider::kVerbs:
      out = chosen(createVerbs(config), "configured (fabric.provider: verbs)");
      break;
    case config::FabricProvider::kTcp:
      out = chosen(tcp::createTcpProvider(config.tcp), "configured (fabric.provider: tcp)");
      break;
    case config::FabricProvider::kAuto:
      out = chooseAuto(config);
      break;
  }
  if (out.ok()) {
    TENT_INFO(kFabric, "fabric: provider %s, %s", std::string(out->provider->name()).c_str(),
              out->reason.c_str());
  }
  return out;
}

Result<std::unique_ptr<Provider>> createProvider(const config::FabricConfig& config,
                                                 const topology::Topology& topology) {
  auto choice = chooseProvider(config, topology);
  if (!choice.ok()) return choice.status();
  return std::move(choice->provider);
}

}  // namespace tent::fabric
