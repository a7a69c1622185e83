// The direct path (the RFC): latency-sensitive requests posted by the caller onto
// an idle per-context direct lane (a shallow direct QP per endpoint, completions on
// the context's direct CQ), bypassing the worker queues. Every missing resource
// declines the request, which then takes the worker path unchanged.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "fabric/fabric.h"
#include "model/rdma_task.h"
#include "tent/transfer_engine.h"

namespace tent::rdma {

class DatapathContext;
class RdmaContext;
class RdmaEndPoint;
struct DirectPlan;
struct SegmentRecord;

enum class DirectDecline : uint8_t {
  kAccepted = 0,
  kNotLatencySensitive,
  kModeOff,
  kOverSizeCap,
  kUnresolvable,
  kEndpointNotReady,  // includes a peer without a direct QP
  kLaneBusy,
  kPostFailed,
};
std::string_view toString(DirectDecline d) noexcept;

struct DirectCounters {
  // attempted = succeeded + the fallbacks (DirectPath::fillStats)
  std::atomic<uint64_t> succeeded{0};
  std::atomic<uint64_t> fallback_lane_busy{0};
  std::atomic<uint64_t> fallback_endpoint_not_ready{0};
  std::atomic<uint64_t> fallback_unresolvable{0};
  std::atomic<uint64_t> fallback_over_size_cap{0};
  std::atomic<uint64_t> fallback_mode_off{0};
  std::atomic<uint64_t> post_failures{0};
  std::atomic<uint64_t> completion_errors{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> retries{0};               // failed pieces sent to the worker path again
  std::atomic<uint64_t> dead_device_failures{0};  // WRs failed for a dead device
  std::atomic<uint64_t> bytes{0};
  static constexpr size_t kBuckets = 40;
  std::array<std::atomic<uint64_t>, kBuckets> latency{};
  std::atomic<uint64_t> latency_sum_ns{0};  // of every latency the buckets count
};

class DirectPath {
 public:
  explicit DirectPath(DatapathContext& datapath) : dp_(datapath) {}

  // Is the request latency-sensitive under the configured mode?
  bool wantsDirect(const Request& req) const noexcept;
  // The direct path's decision for a request, made once when it is resolved:
  // kNotLatencySensitive, kModeOff, kOverSizeCap, or kAccepted (try it).
  DirectDecline admission(const Request& req) const noexcept;
  // Posts an admitted task on direct lanes or declines (nothing posted, no lane held).
  // Uses the task's placement and segment record (the submitter's, resolved once).
  DirectDecline trySubmitDirect(RdmaTask& task, uint64_t now) noexcept;
  // Counts a latency-sensitive request that the direct path did not take.
  void countDecline(DirectDecline d) noexcept;
  // Polls the direct CQs of `contexts` (caller-driven or rail poller); handles each
  // completion exactly once. Also expires direct slices past direct.timeout_ms.
  unsigned pollContexts(const std::vector<RdmaContext*>& contexts) noexcept;
  // Polls the contexts a pending direct task posted on.
  unsigned pollTask(const RdmaTask& task) noexcept;
  // The task's caller may stop polling (cancel, error, batch freed): the rail
  // pollers of its contexts reap its lanes whatever direct.poll_by_rail says.
  void abandon(const RdmaTask& task) noexcept;

  // The RFC's one way to get an endpoint: a ready one, or nullptr after asking the
  // control plane to connect. Never blocks.
  RdmaEndPoint* getEndpointForContextIndex(uint32_t context, SegmentId segment,
                                           uint32_t peer_device, uint64_t now) noexcept;
  // The same in a segment record the caller found already.
  RdmaEndPoint* getEndpointForContextIndex(uint32_t context, SegmentRecord& record,
                                           uint32_t peer_device, uint64_t now) noexcept;

  void fillStats(DirectPathStats* out) const;
  const DirectCounters& counters() const noexcept { return counters_; }

 private:
  DirectDecline plan_(RdmaTask& task, uint64_t now, DirectPlan& plan) noexcept;
  DirectDecline acquire_(RdmaTask& task, DirectPlan& plan) noexcept;
  void post_(RdmaTask& task, uint64_t now, DirectPlan& plan) noexcept;
  // reap: also expire lanes past direct.timeout_ms (the rail poller always does).
  unsigned pollContext(RdmaContext& ctx, bool reap) noexcept;
  void completeSlice(RdmaSlice* s, fabric::WcStatus status, uint64_t now) noexcept;
  void retryOrFail(RdmaTask& task, RdmaSlice* s, fabric::WcStatus status, uint64_t now) noexcept;
  void expire(RdmaContext& ctx, uint64_t now) noexcept;
  // A dead device's lanes: fails the WRs posted there (no completion will come).
  unsigned failDeadLanes(RdmaContext& ctx) noexcept;

  // A piece that could not be posted continues on its context's rail poller.
  void fallbackSlice(RdmaTask& task, RdmaSlice* slice, uint64_t now) noexcept;

  DatapathContext& dp_;
  DirectCounters counters_;
};

}  // namespace tent::rdma
