// tent public API: one-sided RDMA READ/WRITE between registered memory of
// processes, through a batch API. No exception crosses this API: every call
// returns Status or Result<T>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tent/status.h"

namespace tent {

using SegmentId = uint64_t;
using BatchId = uint64_t;

// The local segment; `Request::target_id` of LOCAL_SEGMENT_ID moves bytes within this process.
inline constexpr SegmentId LOCAL_SEGMENT_ID = 0;

enum class OpCode : uint8_t { READ = 0, WRITE = 1 };

// Why a request is issued. FOREGROUND_GET (and any non-zero deadline) marks it
// latency-sensitive: it tries the direct path first.
enum class IntentType : uint8_t {
  UNSPEC = 0,
  FOREGROUND_GET = 1,
  BACKGROUND_PREFETCH = 2,
  MIGRATION = 3,
  CHECKPOINT = 4,
  WEIGHT_LOADING = 5,
};

struct Request {
  OpCode opcode = OpCode::READ;
  void* source = nullptr;      // local address, inside registered memory
  SegmentId target_id = 0;     // from openSegment()
  uint64_t target_offset = 0;  // remote address, inside the peer's registered memory
  uint64_t length = 0;
  int priority = 0;
  uint64_t deadline_ns = 0;  // absolute, steady clock (std::chrono::steady_clock) ns; 0 = none
  IntentType intent_type = IntentType::UNSPEC;
};

enum class TransferState : uint8_t {
  INITIAL = 0,
  PENDING,
  INVALID,
  CANCELED,
  COMPLETED,
  TIMEOUT,
  FAILED,
};

struct TransferStatus {
  TransferState state = TransferState::INITIAL;
  // Bytes accounted so far (all of them when COMPLETED). A PENDING request carried by
  // one WR reports 0: its bytes are accounted together with its end.
  uint64_t transferred_bytes = 0;
};

// Inline so tools that link without the engine (tebench's tests) can name states too.
inline constexpr std::string_view toString(TransferState s) noexcept {
  switch (s) {
    case TransferState::INITIAL:
      return "INITIAL";
    case TransferState::PENDING:
      return "PENDING";
    case TransferState::INVALID:
      return "INVALID";
    case TransferState::CANCELED:
      return "CANCELED";
    case TransferState::COMPLETED:
      return "COMPLETED";
    case TransferState::TIMEOUT:
      return "TIMEOUT";
    case TransferState::FAILED:
      return "FAILED";
  }
  return "UNKNOWN";
}
std::string_view toString(IntentType t) noexcept;
// Parses "unspec", "foreground_get", "background_prefetch", "migration", "checkpoint",
// "weight_loading".
Result<IntentType> parseIntentType(std::string_view text);

// Where memory lives: "cpu:N" (NUMA node N), "cuda:N", or "*" (unknown / anywhere).
// Registering or allocating with a cpu:N this machine does not have (or anything else
// that is not a location) fails with InvalidArgument.
using Location = std::string;

// What peers may do to a registered buffer. The local side may always read it and
// READ into it; a buffer peers should only read is registered kRemoteRead, and a
// peer's WRITE to it then fails with a remote access error instead of landing.
enum class MemoryAccess : uint8_t {
  kRemoteRead = 1,
  kRemoteWrite = 2,
  kRemoteReadWrite = 3,
};
std::string_view toString(MemoryAccess a) noexcept;  // "r", "w", "rw"
// Parses "r", "w", "rw" (also "read", "write", "readwrite").
Result<MemoryAccess> parseMemoryAccess(std::string_view text);

// What unregisterLocalMemory / freeLocalMemory do when transfers still use the memory
// (a task whose source lies in it and that is not terminal yet).
enum class UnregisterMode : uint8_t {
  // Refuse: FailedPrecondition naming how many transfers use it; nothing changes.
  kFailIfInUse = 0,
  // Cancel those transfers and return once they are drained (terminal: no WR of them
  // can touch the memory), within timeouts.unregister_drain_ms; past it, Timeout and
  // the memory stays registered.
  kCancelTransfers = 1,
};

// One buffer registered in a segment, as its descriptor lists it.
struct SegmentBufferInfo {
  uint64_t addr = 0;  // what Request::target_offset addresses
  uint64_t length = 0;
  Location location;  // location of the buffer's first region
  std::string name;   // given at registration; empty when none was (or a v1/v2 peer)
  // What the peer lets others do to it; empty for a v1/v2 peer, which does not say.
  std::optional<MemoryAccess> access;
  // Registration order within the segment (1 = first); 0 for a v1/v2 peer.
  uint64_t seq = 0;
};

struct DirectPathStats {
  uint64_t lanes_in_use = 0;  // direct lane slots held right now, all contexts
  uint64_t attempted = 0;
  uint64_t succeeded = 0;
  uint64_t fallback_lane_busy = 0;
  uint64_t fallback_endpoint_not_ready = 0;
  uint64_t fallback_unresolvable = 0;
  uint64_t fallback_over_size_cap = 0;
  uint64_t fallback_mode_off = 0;
  uint64_t post_failures = 0;
  uint64_t completion_errors = 0;
  uint64_t timeouts = 0;
  // Failed direct pieces sent again on the worker path (a flushed piece retries
  // without using up workers.max_slice_retries; one that used them up fails its task).
  uint64_t retries = 0;
  // Post-to-completion latency of direct slices: bucket i counts latencies in
  // [2^i, 2^(i+1)) ns (bucket 0 also holds 0 and 1 ns).
  std::vector<uint64_t> latency_histogram_ns;
  // The sum of the latencies the histogram counts, in ns (sum / count = the mean).
  uint64_t latency_sum_ns = 0;
};

struct WorkerPathStats {
  uint64_t tasks = 0;
  uint64_t slices_posted = 0;
  uint64_t slices_completed = 0;
  uint64_t slice_errors = 0;
  uint64_t slice_retries = 0;
  uint64_t foreground_fallback_slices = 0;  // latency-sensitive slices served by rail pollers
};

struct LcoreStatsView {
  unsigned lcore = 0;
  int cpu = -1;
  std::string pollers;       // "rail:soft0,background"
  uint64_t busy_cycles = 0;  // TSC cycles; EngineStats::tsc_hz turns them into seconds
  uint64_t idle_cycles = 0;
};

// Requests with a deadline (Request::deadline_ns != 0), whichever path served them.
struct DeadlineStats {
  uint64_t expired_at_submit = 0;  // already past at submit: not started, TIMEOUT
  uint64_t missed = 0;             // completed (bytes there) after their deadline
};

// What the engine holds of the fabric and the control plane right now, and how
// often it had to rebuild or give up connections. Counts are integers.
struct ResourceStats {
  uint64_t endpoints_live = 0;     // active and passive endpoints in use
  uint64_t endpoints_retired = 0;  // retired, not yet freed (draining or awaiting quiescence)
  uint64_t qps_live = 0;           // QPs that exist, all devices
  std::map<std::string, uint64_t> qps_per_device;  // device name -> QPs
  uint64_t reconnects = 0;  // endpoints connected again to a peer device after the first time
  uint64_t evictions = 0;   // idle endpoints retired to stay within the per-context cap
};

// The control listener and its sessions.
struct ControlStats {
  // Control connections with peers right now (both directions); the engine's own
  // loopback session is not one of them: a fresh engine shows 0.
  uint64_t connections_open = 0;
  // Ends of the engine's own loopback session open right now (its client and server
  // end: 2 once the engine is up).
  uint64_t loopback_connections_open = 0;
  // Control traffic, every connection (the loopback session's too), frame headers
  // and authentication tags included.
  uint64_t bytes_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t frames_received = 0;
  uint64_t frames_sent = 0;
  uint64_t connections_refused = 0;  // closed for want of room (at once, or in their handshake)
  uint64_t auth_failures = 0;        // peers that failed or skipped authentication
  uint64_t frames_rejected = 0;      // malformed, oversized or out-of-order frames
  uint64_t deadline_closures = 0;    // connections closed for missing a read/write deadline
  uint64_t sessions_evicted = 0;     // idle sessions (holding no endpoint) closed for room
  uint64_t source_cap_hits = 0;      // connections from an address at its per-source cap
  uint64_t descriptor_fetches = 0;   // descriptors fetched from peers' control ports
};

// Fleet metadata (metadata.backend; docs/engine.md, "Fleet metadata").
struct FleetStats {
  std::string backend;         // "p2p" or "etcd"
  bool store_up = false;       // etcd: our entry is registered and the store answers
  uint64_t registrations = 0;  // our entry put (first, and again after the store came back)
  uint64_t lease_renewals = 0;
  uint64_t store_errors = 0;          // etcd requests that failed on every member
  uint64_t lookups = 0;               // entries read by openSegment
  uint64_t lookups_refused_away = 0;  // openSegment failed at once: etcd unreachable
  uint64_t entries_refused = 0;       // entries or blobs that did not verify (forged)
  uint64_t watch_events = 0;          // peers' entries changed or removed
  uint64_t watch_restarts = 0;
  uint64_t peers_readdressed = 0;  // open segments re-resolved by a watch event
  uint64_t peers_expired = 0;      // open segments marked down by a watch event
  uint64_t blobs_added = 0;        // segments opened by addRemoteMetadata
};

// What peers did to this engine's registered memory, seen from here (the target
// side). Counted where the provider takes part in the peer's operation: tcp serves
// peers' WRITEs and READs on its receive path. On verbs and soft a peer's WRITE or
// READ is one-sided (the peer's NIC, or the peer's CPU for soft, moves the bytes and
// this process takes no part), so there they stay 0 (docs/metrics.md).
struct TargetStats {
  uint64_t write_bytes = 0;  // payload bytes of peers' WRITEs placed in our memory
  uint64_t writes = 0;       // those WRITEs (one per work request)
  uint64_t read_bytes = 0;   // payload bytes of peers' READs served from our memory
  uint64_t reads = 0;
};

// Notifications (docs/engine.md, "Notifications"), both directions.
struct NotifyStats {
  uint64_t sent = 0;  // SENDs posted to a peer (acknowledgements are reaped later)
  uint64_t sent_bytes = 0;
  uint64_t received = 0;  // moved into this engine's inbox
  uint64_t received_bytes = 0;
  uint64_t refused = 0;          // sends refused by back-pressure: the peer's queue was full
  uint64_t unsupported = 0;      // sends to a peer whose bootstrap offers no notifications
  uint64_t failed = 0;           // not delivered: notify QP failed, SEND completed in error
  uint64_t dropped_batches = 0;  // batch notifications not sent because the batch failed
  uint64_t held = 0;             // received and not yet taken by getNotifications
};

// What the devices reported (docs/engine.md, "Failure model").
struct DeviceEventStats {
  uint64_t fatal = 0;            // fatal errors: the device is dead, its transfers failed
  uint64_t port_down = 0;        // port-down events: the device's rail paused
  uint64_t port_up = 0;          // port-up events: the rail resumed
  uint64_t address_changes = 0;  // address changes: the descriptor was published again
  uint64_t devices_down = 0;     // devices nothing is routed to right now (port down, dead)
  uint64_t failed_slices = 0;    // worker slices failed because their device died
  uint64_t failed_direct = 0;    // direct WRs failed because their device died
};

// A notification received: the sending engine's segment name and its message.
struct Notification {
  std::string name;
  std::string message;
};

struct EngineStats {
  std::string provider;  // "soft" / "verbs" / "tcp"
  // Why that provider serves: "configured (fabric.provider: soft)", "auto: rdma-core
  // lists no RDMA device".
  std::string provider_choice;
  std::string link_model;  // the provider's one-line link model
  // How requests are routed: "direct.mode=auto workers.priority_lane=on (auto)".
  std::string paths;
  std::vector<std::string> devices;
  std::vector<LcoreStatsView> lcores;
  WorkerPathStats worker;
  DirectPathStats direct;
  DeadlineStats deadlines;
  ResourceStats resources;
  ControlStats control;
  FleetStats fleet;
  NotifyStats notify;
  TargetStats target;
  DeviceEventStats device_events;
  uint64_t bytes_transferred = 0;
  std::map<std::string, uint64_t> bytes_per_device;  // device name -> payload bytes moved
  // Payload bytes by Request::intent_type, indexed by its value (UNSPEC = 0 ...).
  std::vector<uint64_t> bytes_per_intent;
  // TSC ticks per second, as measured against CLOCK_MONOTONIC when the engine started:
  // lcores[].busy_cycles / tsc_hz are seconds. 0 where no TSC was measured.
  double tsc_hz = 0;
};

class TransferEngine {
 public:
  virtual ~TransferEngine() = default;

  // Creates an engine from a YAML config file; an empty path takes TENT_CONFIG
  // or, without it, the defaults.
  static Result<std::unique_ptr<TransferEngine>> create(const std::string& config_path = "");
  // Creates an engine from YAML text (tests, embedded configs).
  static Result<std::unique_ptr<TransferEngine>> createFromYaml(std::string_view yaml);

  // This engine's segment name: "host:port" of its control listener, or with
  // metadata.backend etcd the name it registers under (metadata.name).
  virtual std::string segmentName() const = 0;
  // "host:port" of the control listener as peers dial it (numeric where the host
  // resolves; the port the engine picked when bootstrap.listen's port is 0). With p2p
  // it names the same listener as segmentName(); with etcd it is what the entry
  // publishes next to the name.
  virtual std::string controlAddress() const { return segmentName(); }

  // Memory lifetime. A transfer uses the local memory its Request::source lies in from
  // submitTransfer() until it is terminal (COMPLETED, FAILED, CANCELED, TIMEOUT; terminal
  // means drained: no WR of it can touch the memory any more). While any transfer uses
  // a registration, unregisterLocalMemory and freeLocalMemory never return OK: with
  // kFailIfInUse (the default) they fail with FailedPrecondition naming how many
  // transfers use it and change nothing; with kCancelTransfers they cancel those
  // transfers and return OK once they are drained. Once either returned OK, nothing is
  // posted from or into the range any more: a submit naming it fails, and its memory
  // regions are deregistered (a peer's READ or WRITE of it fails with a remote access
  // error), so the caller may free or reuse the memory. A local transfer (target
  // LOCAL_SEGMENT_ID) whose *target* lies in the range is the peer's side of it: it
  // fails with a remote access error as any peer's would, never writes the range.
  // The same on every provider.

  // Memory that every provider reaches by its fastest path, registered on every device.
  // `name` travels in the segment descriptor (segmentBuffers); at most 255 bytes, and
  // need not be unique.
  virtual Result<void*> allocateLocalMemory(size_t length, const Location& location = "*",
                                            MemoryAccess access = MemoryAccess::kRemoteReadWrite,
                                            const std::string& name = "") = 0;
  // Unregisters and frees memory of allocateLocalMemory (see "Memory lifetime").
  virtual Status freeLocalMemory(void* addr,
                                 UnregisterMode mode = UnregisterMode::kFailIfInUse) = 0;
  // Registers caller-owned memory on every device. `location` "*" = ask the topology.
  // The range must be mapped, and writable (the local side READs into it): every
  // provider refuses it otherwise, as a NIC does when it pins the pages.
  // `name` as for allocateLocalMemory.
  virtual Status registerLocalMemory(void* addr, size_t length, const Location& location = "*",
                                     MemoryAccess access = MemoryAccess::kRemoteReadWrite,
                                     const std::string& name = "") = 0;
  // Unregisters what registerLocalMemory registered at `addr` (see "Memory lifetime").
  // With kCancelTransfers it waits for the drain: in manual lcore mode another thread
  // must step the pollers meanwhile.
  virtual Status unregisterLocalMemory(void* addr,
                                       UnregisterMode mode = UnregisterMode::kFailIfInUse) = 0;

  // Opens a peer's segment by name ("host:port"); fetches and caches its descriptor.
  // Returns within bootstrap.connect_timeout_ms + io_timeout_ms (then Timeout).
  virtual Result<SegmentId> openSegment(const std::string& name) = 0;
  virtual Status closeSegment(SegmentId id) = 0;
  // This engine's segment as bytes (descriptor, control address, name; signed with
  // bootstrap.auth's secret when configured), for stacks that run their own
  // handshake: the peer passes them to addRemoteMetadata.
  virtual Result<std::string> localMetadata() {
    return Status::NotSupported("localMetadata is not implemented by this engine");
  }
  // Opens a segment from another engine's localMetadata() without fetching its
  // descriptor from its control port (the control session still carries bootstraps).
  // A blob that does not verify is PermissionDenied (counted in fleet.entries_refused).
  virtual Result<SegmentId> addRemoteMetadata(std::string_view blob) {
    (void)blob;
    return Status::NotSupported("addRemoteMetadata is not implemented by this engine");
  }
  // The buffers registered in an open segment (LOCAL_SEGMENT_ID: ours), from the
  // cached descriptor, in registration order (the first registered first) with their
  // names and access modes. A v1/v2 peer's descriptor says neither: its buffers come
  // in address order, without name or access. Tools such as tebench use it to find
  // the peer's addresses.
  virtual Result<std::vector<SegmentBufferInfo>> segmentBuffers(SegmentId id) {
    (void)id;
    return Status::NotSupported("segmentBuffers is not implemented by this engine");
  }

  virtual Result<BatchId> allocateBatch(size_t capacity) = 0;
  virtual Status freeBatch(BatchId batch) = 0;
  // Adds requests to a batch; task ids continue from the batch's previous tasks.
  virtual Status submitTransfer(BatchId batch, std::span<const Request> requests) = 0;
  // submitTransfer with a notification bound to the batch: `notification` reaches the
  // requests' target segment (they must all name the same one) after every task of the
  // batch completed, never before, and never when one failed. It leaves when the caller
  // sees the batch complete (getTransferStatus, getBatchTransferStatus, waitTransfer or
  // freeBatch): the initiator has then seen every completion, on every QP and rail. One
  // notification per batch. While the target's receive queue is full, those calls return
  // ResourceExhausted (back-pressure; call again), and freeBatch sends it or says why not.
  // A peer without notifications: NotSupported from those calls, the transfer unharmed.
  virtual Status submitTransfer(BatchId batch, std::span<const Request> requests,
                                std::string_view notification) {
    (void)batch, (void)requests, (void)notification;
    return Status::NotSupported("notifications are not implemented by this engine");
  }
  // A notification on its own (acks, heartbeats), delivered into the target's receive
  // buffers before this returns OK. ResourceExhausted when the target holds every
  // receive buffer (back-pressure: it has not taken its notifications; nothing was
  // sent), NotSupported for a peer that offers no notifications, InvalidArgument for a
  // message longer than notify.max_message_bytes (ours or the peer's). Waits at most
  // notify.timeout_ms (for an endpoint to connect and the peer's NIC to acknowledge).
  virtual Status sendNotification(SegmentId target, std::string_view message) {
    (void)target, (void)message;
    return Status::NotSupported("notifications are not implemented by this engine");
  }
  // The notifications received since the last call, in arrival order per sender.
  virtual Result<std::vector<Notification>> getNotifications() {
    return Status::NotSupported("notifications are not implemented by this engine");
  }
  // getNotifications, waiting up to `timeout_ns` for at least one (an empty list when
  // none came). Sleeps between looks; nothing polls for notifications otherwise.
  virtual Result<std::vector<Notification>> waitNotifications(uint64_t timeout_ns) {
    (void)timeout_ns;
    return Status::NotSupported("notifications are not implemented by this engine");
  }

  // Status of one task. Drives completion of direct-path tasks (caller-driven progress).
  virtual Result<TransferStatus> getTransferStatus(BatchId batch, size_t task_id) = 0;
  // Aggregate status of the batch: COMPLETED when every task did, the first
  // failure otherwise, PENDING while any task runs.
  virtual Result<TransferStatus> getBatchTransferStatus(BatchId batch) = 0;
  // Marks a task canceled; WRs already posted drain through normal completion.
  virtual Status cancelTransfer(BatchId batch, size_t task_id) = 0;
  // Polls until the task leaves PENDING or `timeout_ns` passes (then Status Timeout):
  // spins briefly, then sleeps until a task of the engine ends (the thread that ends
  // it wakes sleeping waiters), in naps of at most 2 ms for a worker-path task and
  // 100 us for a direct one (only its caller's polls find its end), never past the
  // timeout. For callers that must not spin.
  virtual Result<TransferStatus> waitTransfer(BatchId batch, size_t task_id,
                                              uint64_t timeout_ns) = 0;

  virtual EngineStats stats() const = 0;

  // "host:port" the metrics endpoint (metrics.listen) serves GET /metrics on, port 0
  // resolved to the bound one; "" when metrics are off.
  virtual std::string metricsAddress() const { return ""; }

  // The first step of closing the engine from another thread: every call waiting on
  // the control plane (an openSegment in progress) returns Canceled now, and later
  // ones fail at once with FailedPrecondition. Transfers are not touched. Destroy
  // the engine once no thread uses it any more. Thread-safe; idempotent.
  virtual void cancelWaits() {}
};

}  // namespace tent
