// Direct path: selection rule, counters and statistics (control side).
#include "datapath/direct_path.h"

#include "datapath/datapath_context.h"
#include "model/rdma_context.h"

namespace tent::rdma {

std::string_view toString(DirectDecline d) noexcept {
  switch (d) {
    case DirectDecline::kAccepted:
      return "accepted";
    case DirectDecline::kNotLatencySensitive:
      return "not latency-sensitive";
    case DirectDecline::kModeOff:
      return "mode off";
    case DirectDecline::kOverSizeCap:
      return "over size cap";
    case DirectDecline::kUnresolvable:
      return "unresolvable";
    case DirectDecline::kEndpointNotReady:
      return "endpoint not ready";
    case DirectDecline::kLaneBusy:
      return "lane busy";
    case DirectDecline::kPostFailed:
      return "post failed";
  }
  return "?";
}

bool DirectPath::wantsDirect(const Request& req) const noexcept {
  switch (dp_.config().direct.mode) {
    case config::DirectMode::kForce:
      return true;
    case config::DirectMode::kOff:  // still counted: a latency-sensitive request declined by mode
    case config::DirectMode::kAuto:
      return req.deadline_ns != 0 || req.intent_type == IntentType::FOREGROUND_GET;
  }
  return false;
}

DirectDecline DirectPath::admission(const Request& req) const noexcept {
  const auto& cfg = dp_.config().direct;
  if (!wantsDirect(req)) return DirectDecline::kNotLatencySensitive;
  if (cfg.mode == config::DirectMode::kOff) return DirectDecline::kModeOff;
  if (cfg.max_bytes != 0 && req.length > cfg.max_bytes) return DirectDecline::kOverSizeCap;
  return DirectDecline::kAccepted;
}

void DirectPath::countDecline(DirectDecline d) noexcept {
  auto bump = [](std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); };
  switch (d) {
    case DirectDecline::kModeOff:
      bump(counters_.fallback_mode_off);
      break;
    case DirectDecline::kOverSizeCap:
      bump(counters_.fallback_over_size_cap);
      break;
    case DirectDecline::kUnresolvable:
      bump(counters_.fallback_unresolvable);
      break;
    case DirectDecline::kEndpointNotReady:
      bump(counters_.fallback_endpoint_not_ready);
      break;
    case DirectDecline::kLaneBusy:
      bump(counters_.fallback_lane_busy);
      break;
    case DirectDecline::kPostFailed:
      bump(counters_.post_failures);
      break;
    default:
      break;
  }
}

// datapath-lint: allow(setup) stats() is the control path's read of the counters
void DirectPath::fillStats(DirectPathStats* out) const {
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  out->succeeded = get(counters_.succeeded);
  out->fallback_lane_busy = get(counters_.fallback_lane_busy);
  out->fallback_endpoint_not_ready = get(counters_.fallback_endpoint_not_ready);
  out->fallback_unresolvable = get(counters_.fallback_unresolvable);
  out->fallback_over_size_cap = get(counters_.fallback_over_size_cap);
  out->fallback_mode_off = get(counters_.fallback_mode_off);
  // Every attempt ends accepted or declined for one of these reasons: one atomic
  // fewer per submit than counting attempts apart.
  out->attempted = out->succeeded + out->fallback_lane_busy + out->fallback_endpoint_not_ready +
                   out->fallback_unresolvable + out->fallback_over_size_cap +
                   out->fallback_mode_off;
  out->post_failures = get(counters_.post_failures);
  out->completion_errors = get(counters_.completion_errors);
  out->timeouts = get(counters_.timeouts);
  out->retries = get(counters_.retries);
  out->lanes_in_use = 0;
  for (size_t c = 0; c < dp_.contextCount(); ++c) out->lanes_in_use += dp_.context(c).lanesInUse();
  out->latency_histogram_ns.clear();
  for (const auto& b : counters_.latency) out->latency_histogram_ns.push_back(get(b));
  out->latency_sum_ns = get(counters_.latency_sum_ns);
}

}  // namespace tent::rdma
