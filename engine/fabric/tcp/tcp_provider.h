// The tcp provider: the fabric contract (RC queue pairs, one-sided WRITE and READ into
// registered memory, rkey/bounds/access checked by the responder) over one TCP
// connection per queue pair, for hosts without RDMA. See docs/fabric.md, "tcp provider".
// Most callers build it through fabric::createProvider() (`fabric.provider: tcp`).
#pragma once

#include <memory>
#include <vector>

#include "config/config.h"
#include "fabric/fabric.h"

namespace tent::fabric::tcp {

// The devices the tcp provider opens: the config's list, or one "tcp0" listening on
// 127.0.0.1:0 when it is empty.
std::vector<config::TcpDevice> resolveDevices(const config::TcpFabricConfig& config);

Result<std::unique_ptr<Provider>> createTcpProvider(const config::TcpFabricConfig& config);

}  // namespace tent::fabric::tcp
