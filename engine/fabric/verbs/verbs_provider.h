// The rdma-core provider. Built only when libibverbs is found (TENT_HAVE_VERBS).
#pragma once

#include <cstddef>
#include <memory>

#include "fabric/fabric.h"

namespace tent::config {
struct VerbsFabricConfig;
}

namespace tent::fabric {

// Number of RDMA devices rdma-core lists (0 without a NIC or kernel support).
size_t verbsDeviceCount() noexcept;

// Opens the configured devices (all when the list is empty). NotFound without any.
Result<std::unique_ptr<Provider>> createVerbsProvider(const config::VerbsFabricConfig& config);

}  // namespace tent::fabric
