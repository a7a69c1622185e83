// A loopback fake libibverbs: RDMA devices, PDs, MRs, CQs and RC QPs inside one
// process, behind the VerbsOps table, so the verbs provider's real code runs on it
// and moves bytes. Unlike fake_verbs.h (a recorder for one call at a time), it
// behaves like a NIC: keys and access flags checked on every access, the RC state
// machine with the attribute masks a NIC checks, send-queue and CQ limits, flushes,
// retry-exceeded timing, and thread safety (QPs and CQs used from several threads).
// What it emulates and what it does not: docs/fabric.md, "The fake verbs device".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fabric/verbs/verbs_ops.h"

namespace tent::fabric::testing {

namespace loopback {
class Fabric;
}

struct LoopbackDeviceSpec {
  std::string name;
  bool roce = true;   // link layer Ethernet (RoCE v1/v2 GIDs) or InfiniBand (LID + GID)
  int numa_node = 0;  // what the fake sysfs tree reports
};

// What a contract break (two threads inside post_send on one QP, a CQ overflow) does.
enum class OnContractBreak : uint8_t {
  kAbort,  // message on stderr, then abort(): nobody can miss it (the default)
  kCount,  // message on stderr, counted in stats(); posters are serialised, as mlx5 does
};

struct LoopbackOptions {
  std::vector<LoopbackDeviceSpec> devices;
  OnContractBreak on_contract_break = OnContractBreak::kAbort;
  // The retry timer's clock in ns; empty: CLOCK_MONOTONIC. Read only while a WR
  // waits for a responder that does not answer.
  std::function<uint64_t()> clock;
  // Called inside post_send, after the concurrent-poster check and before the QP
  // is locked, so a test can hold a poster there and make an overlap certain.
  std::function<void(uint32_t qp_num)> on_post;
};

struct LoopbackStats {
  uint64_t wrs_executed = 0;           // WRs that passed every check and moved their bytes
  uint64_t bytes_moved = 0;            // their payload
  uint64_t error_completions = 0;      // CQEs with a status other than success or flush
  uint64_t flushed = 0;                // CQEs with IBV_WC_WR_FLUSH_ERR
  uint64_t retry_exceeded = 0;         // of the error completions
  uint64_t concurrent_posts = 0;       // post_send entered while another thread was inside it
  uint64_t registrations = 0;          // reg_mr calls that succeeded
  uint64_t relaxed_registrations = 0;  // of them, with IBV_ACCESS_RELAXED_ORDERING
  uint64_t reg_in_flight_max = 0;      // most reg_mr calls inside the fake at one time
  uint64_t cq_overflows = 0;           // CQEs that found their CQ full
  uint64_t async_acks = 0;             // async events acknowledged (ibv_ack_async_event)
  int64_t open_contexts = 0, pds = 0, mrs = 0, cqs = 0, qps = 0;  // live objects
  uint64_t contractBreaks() const noexcept { return concurrent_posts + cq_overflows; }
};

// What registering costs, as a kernel pinning pages does (per 4 KiB page), and a
// rendezvous that shows registrations overlap without measuring time: with
// `meet` = N, each reg_mr waits (60 s at most) until N calls are inside the fake
// at once; stats().reg_in_flight_max then says how many were.
struct RegistrationModel {
  uint64_t ns_per_page = 0;
  uint32_t meet = 0;                         // 0: nobody waits
  uint64_t max_mr_size = uint64_t{1} << 40;  // what query_device reports
  std::string fail_on_device;                // reg_mr on this device fails with ENOMEM
};

// One RTR or RTS a QP went through: what it will put on the wire (issue 24's checks
// that traffic class, SL, MTU and PSNs reach both sides of a connection).
struct LoopbackTransition {
  std::string device;
  uint32_t qp_num = 0;
  int state = 0;  // IBV_QPS_RTR or IBV_QPS_RTS
  uint8_t traffic_class = 0, service_level = 0;  // RTR: the address vector's
  int path_mtu = 0;                              // RTR: ibv_mtu
  uint32_t rq_psn = 0;                           // RTR
  uint32_t sq_psn = 0;                           // RTS
};

// One fabric at a time per process: get_device_list() has no argument through
// which to find its fabric. Every object must be destroyed before the fabric.
class LoopbackVerbs {
 public:
  explicit LoopbackVerbs(LoopbackOptions options);
  ~LoopbackVerbs();
  LoopbackVerbs(const LoopbackVerbs&) = delete;
  LoopbackVerbs& operator=(const LoopbackVerbs&) = delete;

  // The table whose functions act on this fabric.
  const VerbsOps& ops() const noexcept;
  LoopbackStats stats() const noexcept;
  // Only while no thread is inside post_send or poll_cq.
  void setOnContractBreak(OnContractBreak policy) noexcept;
  // Only while no thread is inside reg_mr; also resets reg_in_flight_max.
  void setRegistrationModel(const RegistrationModel& model);
  // The directory standing in for /sys/class/infiniband (numa_node, PCI link, port
  // counters), removed with the fabric.
  const std::string& sysfsRoot() const noexcept;
  // Every successful modify to RTR or RTS so far, in order.
  std::vector<LoopbackTransition> transitions() const;

  // Async events: queues `type` on `context` (one ibv_context, not the device: two
  // engines of a test program each open their own), with element.port_num = `port`
  // for port and GID events. IBV_EVENT_DEVICE_FATAL also kills the context: from
  // then on its QPs take WRs and execute nothing, its CQs return no completion.
  void injectAsyncEvent(ibv_context* context, ibv_event_type type, uint8_t port = 1);
  // While held, the CQs of `context` return no completion (WRs still execute): WRs
  // stay in flight for as long as a test needs them there.
  void holdCompletions(ibv_context* context, bool held);
  // Replaces GID `index` of `device` (a re-addressed netdev); false: no such entry.
  bool replaceGid(const std::string& device, int index, const std::string& gid_text);

 private:
  std::unique_ptr<loopback::Fabric> fabric_;
};

// The process-wide fabric of the engine tests: devices soft0 and soft1 (RoCE, NUMA
// node 0), installed with setVerbsOpsOverride() on the first call and never
// destroyed (engines may outlive any scope in a test program). At exit, a verbs
// object still alive is reported as a leak and fails the program.
LoopbackVerbs& engineTestVerbs();

}  // namespace tent::fabric::testing
