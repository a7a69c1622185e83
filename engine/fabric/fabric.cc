// The fabric interface's shared helpers and the provider factory.
#include "fabric/fabric.h"

#include <string>

#include "config/config.h"
#include "fabric/soft/soft_provider.h"
#include "fabric/tcp/tcp_provider.h"
#include "tent/log.h"
#include "topology/topology.h"
#ifdef TENT_HAVE_VERBS
#include "fabric/verbs/verbs_ops.h"
#endif

namespace tent::fabric {

std::string_view toString(WcStatus s) noexcept {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kLocalLength:
      return "local length error";
    case WcStatus::kLocalProtection:
      return "local protection error";
    case WcStatus::kRemoteAccess:
      return "remote access error";
    case WcStatus::kRemoteOperation:
      return "remote operation error";
    case WcStatus::kRetryExceeded:
      return "transport retry counter exceeded";
    case WcStatus::kFlushed:
      return "work request flushed";
    case WcStatus::kGeneral:
      return "general error";
  }
  return "unknown";
}

Status connectQp(QueuePair& qp, const QpRemote& remote) {
  const std::string who =
      "connect QP " + std::to_string(qp.qpNum()) + " to QP " + std::to_string(remote.qp_num);
  if (qp.state() == QpState::kReset) {
    TENT_RETURN_IF_ERROR(qp.modifyToInit().withContext(who + ": INIT"));
  }
  TENT_RETURN_IF_ERROR(qp.modifyToRtr(remote).withContext(who + ": RTR"));
  TENT_RETURN_IF_ERROR(qp.modifyToRts().withContext(who + ": RTS"));
  return Status::OK();
}

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
