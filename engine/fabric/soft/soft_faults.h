// Fault injection for the soft provider: reliability tests and benchmarks make the
// emulated NIC misbehave on purpose. Rules are checked when a WR is posted; the
// first rule that matches and fires acts on that WR (or on its QP / port).
//
//   auto* faults = soft::faultInjector(provider);   // nullptr unless provider is soft
//   faults->addRule({.qp_num = qp->qpNum(), .every_nth = 3,
//                    .action = soft::FaultAction::kCompletionError,
//                    .status = WcStatus::kRemoteAccess});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fabric/fabric.h"
#include "tent/status.h"

namespace tent::fabric::soft {

enum class FaultAction : uint8_t {
  kCompletionError,  // the WR is not executed and completes with `status`; its QP goes to ERR
  kDelay,     // the WR's completion becomes visible `delay_ns` later (later WRs of its QP too)
  kQpError,   // the WR's QP goes to ERR: this WR and every outstanding one are flushed
  kPortDown,  // the WR's port goes down: WRs fail with kRetryExceeded until it is up
  kPortUp,    // the WR's port comes back up (the WR itself then runs normally)
  // The posting thread stays inside postSend() for `delay_ns` of real time, or until
  // releaseHeldPosts(), before the WR runs (a slow doorbell): tests use it to hold one
  // poster inside a QP while a second one posts.
  kHoldPost,
};
std::string_view toString(FaultAction a) noexcept;

struct FaultRule {
  std::string device;              // device name; empty or "*" = any device
  uint32_t qp_num = 0;             // 0 = any QP
  std::optional<WrOpcode> opcode;  // empty = any opcode
  uint64_t every_nth = 0;          // fire on the nth, 2nth, ... matching WR; 0 = use probability
  double probability = 0;          // used when every_nth == 0: fire with this probability
  uint64_t seed = 1;               // of the rule's own generator (deterministic)
  uint64_t max_hits = 0;           // the rule retires after this many hits; 0 = never
  FaultAction action = FaultAction::kCompletionError;
  WcStatus status = WcStatus::kGeneral;  // kCompletionError
  uint64_t delay_ns = 0;                 // kDelay, kHoldPost
};

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;
  // Returns the rule's id. InvalidArgument: unknown device, no trigger, bad values;
  // ResourceExhausted: too many rules.
  virtual Result<uint32_t> addRule(const FaultRule& rule) = 0;
  virtual Status removeRule(uint32_t id) = 0;
  virtual void clearRules() = 0;
  // How often the rule fired (0 for an unknown id).
  virtual uint64_t hits(uint32_t id) const = 0;
  // Takes a port down (WRs not yet transmitted fail with kRetryExceeded, new posts too)
  // or brings it back up. NotFound for an unknown device.
  virtual Status setPortUp(std::string_view device, bool up) = 0;
  virtual bool portUp(std::string_view device) const = 0;
  // Reports a device event to the device's user (Device::nextEvent), doing what the
  // event says first: kPortDown / kPortUp as setPortUp; kFatal takes the port down and
  // silences the device for good (its CQs never return a completion again, not even a
  // flush, as a NIC after a fatal error); kAddressChange reports only (a soft device's
  // identity names its process and index, which stay). NotFound for an unknown device.
  virtual Status injectDeviceEvent(std::string_view device, DeviceEventType type) = 0;
  // Ends every kHoldPost hold now (the held posts then run their WRs).
  virtual void releaseHeldPosts() = 0;
};

// The soft provider's injector; nullptr for any other provider.
FaultInjector* faultInjector(Provider& provider) noexcept;

}  // namespace tent::fabric::soft
