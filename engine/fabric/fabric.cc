// The fabric interface's shared helpers.
#include "fabric/fabric.h"

#include <string>

#include "tent/log.h"

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
    case WcStatus::kRnrRetryExceeded:
      return "receiver not ready (no receive posted)";
  }
  return "unknown";
}

std::string_view toString(LinkLayer layer) noexcept {
  switch (layer) {
    case LinkLayer::kInfiniband:
      return "InfiniBand";
    case LinkLayer::kEthernet:
      return "Ethernet (RoCE)";
    case LinkLayer::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view toString(GidType type) noexcept {
  switch (type) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
    case GidType::kUnknown:
      break;
  }
  return "unknown";
}

std::string_view toString(DeviceEventType type) noexcept {
  switch (type) {
    case DeviceEventType::kFatal:
      return "device fatal";
    case DeviceEventType::kPortDown:
      return "port down";
    case DeviceEventType::kPortUp:
      return "port up";
    case DeviceEventType::kAddressChange:
      return "address change";
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

}  // namespace tent::fabric
